#!/usr/bin/python3
"""Throughput of two builds of Fulcrum side by side: did a change make training slower?

Runs the same workloads with build A (the baseline, e.g. the previous commit's build/bin)
and build B (this tree's), alternately A B A B ..., after one unreported warm-up pair, as
docs/benchmarking.md asks. Workloads: single-mode logreg (batch 256) and mlp (batch 128) on
Fashion-MNIST, and a 1 ps + 2 workers async mlp cluster (batch 128) through
scripts/local_cluster.sh. The figure per run is the steady-state examples/sec (first 20
steps left out): summary.json's examples_per_sec in single mode, report.json's
workers_examples_per_sec (the workers' sum) for the cluster. Prints, per workload, the median
of each side and the median (min-max) of the pairwise ratios B/A, and /proc/loadavg before
and after.

  bench/compare_builds.py --base=/path/to/old/build/bin [--new=build/bin] [--pairs=3]
      [--workloads=logreg,mlp,cluster_mlp,cluster_mlp_grpc] [--out=build/compare_builds.md]
Exit code 2 for bad arguments; 1 when a run fails (its log is kept under --work).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMON = ["--threads=1", "--eval=false", "--log_every=100000", "--optimizer=sgd"]
WORKLOADS = {
    "logreg": ("single", ["--model=logreg", "--batch_size=256", "--learning_rate=0.01",
                          "--train_steps=3000"]),
    "mlp": ("single", ["--model=mlp", "--batch_size=128", "--learning_rate=0.05",
                       "--train_steps=1500"]),
    "cluster_mlp": ("cluster", ["--model=mlp", "--batch_size=128", "--learning_rate=0.05",
                                "--train_steps=3000", "--mode=async", "--eval_every=0"]),
    # The same on the gRPC data plane (the default is the tcp plane without TLS).
    "cluster_mlp_grpc": ("cluster", ["--model=mlp", "--batch_size=128", "--learning_rate=0.05",
                                     "--train_steps=3000", "--mode=async", "--eval_every=0",
                                     "--data_plane=grpc"]),
}


def run(bin_dir, workload, run_dir):
    kind, flags = WORKLOADS[workload]
    env = dict(os.environ, BIN_DIR=bin_dir)
    if kind == "single":
        cmd = [os.path.join(bin_dir, "worker"), "--run_dir=" + run_dir] + COMMON + flags
        summary = os.path.join(run_dir, "summary.json")
        key = "examples_per_sec"
    else:
        cmd = [os.path.join(ROOT, "scripts", "local_cluster.sh"),
               os.path.join(ROOT, "cluster_specs", "local_1ps_2w.json"),
               "--run_dir=" + run_dir] + COMMON + flags
        summary = os.path.join(run_dir, "report.json")
        key = "workers_examples_per_sec"
    # A fresh folder for each run (a --work folder given again holds the last call's runs, and
    # the binaries refuse a run directory holding a finished run; the baseline build may
    # predate --overwrite).
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.log"), "w") as log:
        code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=600)
    if code != 0:
        sys.exit("compare_builds: %s run failed (exit %d); log: %s/run.log" % (workload, code,
                                                                            run_dir))
    with open(summary) as f:
        return float(json.load(f)[key])


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", required=True, help="bin folder of build A (the baseline)")
    p.add_argument("--new", default=os.path.join(ROOT, "build", "bin"),
                   help="bin folder of build B")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--workloads", default="logreg,mlp,cluster_mlp")
    p.add_argument("--work", default=None, help="folder for the runs (default: a temp dir)")
    p.add_argument("--out", default=os.path.join(ROOT, "build", "compare_builds.md"))
    a = p.parse_args()
    workloads = a.workloads.split(",")
    for w in workloads:
        if w not in WORKLOADS:
            p.error("--workloads: unknown workload '%s' (expected %s)" % (w, ",".join(WORKLOADS)))
    for d in (a.base, a.new):
        if not os.access(os.path.join(d, "worker"), os.X_OK):
            p.error("no worker binary in %s" % d)
    if a.pairs < 1:
        p.error("--pairs must be >= 1")
    work = a.work or tempfile.mkdtemp(prefix="fulcrum_compare_builds_")
    before = loadavg()
    rows = []
    for w in workloads:
        run(a.base, w, os.path.join(work, w, "warm-a"))
        run(a.new, w, os.path.join(work, w, "warm-b"))
        xs, ys = [], []
        for i in range(a.pairs):
            xs.append(run(a.base, w, os.path.join(work, w, "a%d" % i)))
            ys.append(run(a.new, w, os.path.join(work, w, "b%d" % i)))
            print("compare_builds: %s pair %d: A %.0f  B %.0f ex/s" % (w, i + 1, xs[-1], ys[-1]),
                  file=sys.stderr)
        ratios = [y / x for x, y in zip(xs, ys)]
        rows.append("| %s | %.0f | %.0f | **%.3f** | %.3f-%.3f | %d |" % (
            w, statistics.median(xs), statistics.median(ys), statistics.median(ratios),
            min(ratios), max(ratios), a.pairs))
    after = loadavg()
    text = "\n".join([
        "A: %s  B: %s" % (a.base, a.new),
        "load average before: %s, after: %s" % (before, after), "",
        "| workload | A ex/s (median) | B ex/s (median) | B/A (median of pairs) | min-max | pairs |",
        "|---|---:|---:|---:|---:|---:|"] + rows) + "\n"
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
