#!/usr/bin/env python3
"""Checks a Fulcrum run's TensorBoard graphs with TensorBoard itself (from PyPI).

Every task folder of RUN_DIR whose events file holds a graph is loaded with TensorBoard's own
reader (EventAccumulator.Graph()), and its VariableV2 nodes are held to the run's placement
(report.json's placement_table: each variable or part on /job:ps/task:K). Then `tensorboard
--logdir RUN_DIR` is started on 127.0.0.1 (a free port, loopback only) and the graph plugin's
own endpoint, /data/plugin/graphs/graph?run=TASK, must serve each graph.

Not part of CI (it needs TensorBoard from PyPI). In a virtual environment outside the tree:
  python3 -m venv /tmp/tb-venv && /tmp/tb-venv/bin/pip install tensorboard
  /tmp/tb-venv/bin/python bench/tensorboard_graph_check.py RUN_DIR
Exit codes: 0 every graph loads and is served, 1 a check failed, 2 bad input.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request


def fail(message, code=1):
    print(f"tensorboard_graph_check: {message}", file=sys.stderr)
    sys.exit(code)


def task_dirs(run_dir):
    """Folders holding an events file: the task folders, or RUN_DIR itself (single mode)."""
    found = []
    for root, _, files in os.walk(run_dir):
        if any(f.startswith("events.out.tfevents.") for f in files):
            found.append(root)
    return sorted(found)


def load_graph(task_dir):
    from tensorboard.backend.event_processing import event_accumulator
    acc = event_accumulator.EventAccumulator(task_dir)
    acc.Reload()
    if not acc.Tags().get("graph"):
        return None
    return acc.Graph()


def placement_of(run_dir):
    """{variable or part name: ps index} from report.json; None without one or without ps
    tasks (a single-mode run's table is empty)."""
    path = os.path.join(run_dir, "report.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        report = json.load(f)
    table = report.get("placement_table") or []
    return {row["variable"]: row["ps"] for row in table} or None


def check_graph(name, graph, placement):
    """Problems of one task's graph (a list of strings)."""
    problems = []
    variables = {n.name: n.device for n in graph.node if n.op == "VariableV2"}
    layers = sorted({n.name.split("/")[0] for n in graph.node if "/" in n.name})
    ops = sorted({n.op for n in graph.node})
    print(f"{name}: {len(graph.node)} nodes, {len(variables)} variables, "
          f"scopes {', '.join(layers)}; ops {', '.join(ops)}")
    if not variables:
        problems.append(f"{name}: no VariableV2 node")
    for node in graph.node:
        if "_output_shapes" not in node.attr:
            problems.append(f"{name}: {node.name} has no _output_shapes")
    if placement is None:  # single mode: every variable where the layers run
        problems += [f"{name}: {var} on {dev} in a run without ps tasks"
                     for var, dev in variables.items() if dev.startswith("/job:ps")]
    else:
        if set(variables) != set(placement):
            problems.append(f"{name}: variables {sorted(variables)} are not the placement's "
                            f"{sorted(placement)}")
        for var, ps in placement.items():
            want = f"/job:ps/task:{ps}"
            if var in variables and variables[var] != want:
                problems.append(f"{name}: {var} on {variables[var]}, the placement says {want}")
    return problems


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode("utf-8", "replace")


def check_server(run_dir, runs, timeout_s):
    """Starts TensorBoard on loopback and fetches every run's graph from the graph plugin."""
    port = free_port()
    cmd = [sys.executable, "-m", "tensorboard.main", "--logdir", run_dir, "--port", str(port),
           "--host", "127.0.0.1", "--load_fast=false"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    problems = []
    try:
        deadline = time.time() + timeout_s
        served = {}
        while time.time() < deadline and set(served) != set(runs):
            time.sleep(1)
            try:
                listed = json.loads(fetch(port, "/data/plugin/graphs/info"))
            except OSError:
                continue  # not listening yet
            served = {r for r, info in listed.items() if info.get("run_graph")}
        for run in runs:
            if run not in served:
                problems.append(f"graph plugin: run {run!r} has no graph (it lists {sorted(served)})")
                continue
            query = urllib.parse.urlencode({"run": run, "conceptual": "false"})
            text = fetch(port, f"/data/plugin/graphs/graph?{query}")
            nodes = text.count("node {")
            print(f"graph plugin: /data/plugin/graphs/graph?{query}: {len(text)} bytes, "
                  f"{nodes} nodes")
            if nodes == 0 or 'op: "VariableV2"' not in text:
                problems.append(f"graph plugin: run {run!r} served no variables")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", help="a run directory (--run_dir of a run)")
    parser.add_argument("--no_server", action="store_true",
                        help="only read the files; do not start tensorboard")
    parser.add_argument("--server_timeout", type=float, default=120,
                        help="seconds to wait for tensorboard to list every graph")
    args = parser.parse_args()
    if not os.path.isdir(args.run_dir):
        fail(f"{args.run_dir}: not a directory", 2)
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        fail("tensorboard is not installed in this Python (see the docstring)", 2)
    run_dir = os.path.abspath(args.run_dir)
    placement = placement_of(run_dir)
    problems, runs = [], []
    for task_dir in task_dirs(run_dir):
        name = os.path.relpath(task_dir, run_dir)
        graph = load_graph(task_dir)
        if graph is None:
            print(f"{name}: no graph")
            continue
        runs.append(name)
        problems += check_graph(name, graph, placement)
    if not runs:
        fail(f"{run_dir}: no events file holds a graph")
    if not args.no_server:
        problems += check_server(run_dir, runs, args.server_timeout)
    for p in problems:
        print(f"FAIL {p}")
    if problems:
        sys.exit(1)
    print(f"ok: {len(runs)} graph(s) load with TensorBoard {tensorboard_version()}"
          + ("" if args.no_server else " and the graph plugin serves them"))


def tensorboard_version():
    from tensorboard import version
    return version.VERSION


if __name__ == "__main__":
    main()
