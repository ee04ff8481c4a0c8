#!/usr/bin/env python3
"""Writes a ClusterSpec and its task -> host map for a cluster layout.

  scripts/make_spec.py --layout ps-w-w --workers 2 --ps 1 --hosts 2 --out DIR
      [--ps_hosts K] [--prefix fh] [--base_port 2222] [--local | --nodes n1,n2,... | --nodes_file F]

Layouts (the chief always sits on host 1, beside the first ps):
  ps-w-w  the ps tasks round-robin over hosts 1..K (--ps_hosts, default 1), the workers
          round-robin over hosts K+1..H (H > K)
  pw-pw   ps i and worker i on host (i mod H) + 1: every host runs a ps and a worker
  pw-w    the ps tasks and worker 0 on host 1; the other workers round-robin over hosts 2..H
  single  every task on host 1 (H = 1)
--hosts per_task gives every ps and every worker a host of its own (ps-w-w: K = ps and
H = ps + workers; pw-w: H = workers; pw-pw: H = min(ps, workers)), as the studies ran them.

Where the tasks go:
  (default) the emulated hosts of scripts/netns_hosts.sh (namespace <prefix>-h<i>, address
            198.18.0.<i>); DIR/hosts.json maps each task to its namespace
  --local   every task on localhost (no host map; for layouts that need no network emulation)
  --nodes   real machines: host i is the i-th name of the list (a comma-separated list, or
            --nodes_file with one name per line, '#' comments): the spec holds those names, for
            scripts/launch_ssh.sh. A list shorter than the layout's host count is an error;
            extra names are left unused.
Ports: --base_port, +1 per task in the order chief, ps, workers (unique across the spec, so
several tasks can share a host). Writes DIR/spec.json ({"chief": [...], "ps": [...],
"worker": [...]}) and, on emulated hosts, DIR/hosts.json ({"chief:0": "fh-h1", ...}).
Exit code 2 on bad input, with nothing written.
"""
import argparse
import json
import os
import sys

LAYOUTS = ("ps-w-w", "pw-pw", "pw-w", "single")


def per_task_hosts(layout, num_ps, num_workers):
    """(hosts, ps_hosts) of --hosts per_task: a host of its own for every ps and worker."""
    if layout == "ps-w-w":
        return num_ps + num_workers, num_ps
    if layout == "pw-w":
        return num_workers, 1
    if layout == "pw-pw":
        return min(num_ps, num_workers), 1
    return 1, 1


def place(layout, num_ps, num_workers, hosts, ps_hosts=1):
    """Host number (1-based) of every task: {"chief": [h], "ps": [...], "worker": [...]}."""
    if layout == "single":
        return {"chief": [1], "ps": [1] * num_ps, "worker": [1] * num_workers}
    if layout == "ps-w-w":
        return {"chief": [1], "ps": [1 + i % ps_hosts for i in range(num_ps)],
                "worker": [ps_hosts + 1 + i % (hosts - ps_hosts) for i in range(num_workers)]}
    if layout == "pw-pw":
        return {"chief": [1], "ps": [1 + i % hosts for i in range(num_ps)],
                "worker": [1 + i % hosts for i in range(num_workers)]}
    # pw-w
    workers = [1] + [2 + i % (hosts - 1) for i in range(num_workers - 1)]
    return {"chief": [1], "ps": [1] * num_ps, "worker": workers}


def read_nodes(args):
    """The node names of --nodes / --nodes_file, or raises ValueError naming the problem."""
    if args.nodes_file:
        try:
            with open(args.nodes_file) as f:
                text = [line.split("#")[0].strip() for line in f]
        except OSError as e:
            raise ValueError("--nodes_file=%s: %s" % (args.nodes_file, e.strerror))
        names = [t for t in text if t]
        where = "--nodes_file=%s" % args.nodes_file
    else:
        names = [n.strip() for n in args.nodes.split(",")]
        where = "--nodes=%s" % args.nodes
    for n in names:
        if not n or any(c in n for c in " :/\t") or n.startswith("-"):
            raise ValueError("%s: %r is not a host name" % (where, n))
    if not names:
        raise ValueError("%s: no host names" % where)
    return names, where


def check(args):
    if args.layout not in LAYOUTS:
        return "--layout=%s: expected one of %s" % (args.layout, ", ".join(LAYOUTS))
    if args.workers < 1 or args.ps < 1 or args.ps_hosts < 1:
        return "--workers, --ps and --ps_hosts must be at least 1"
    if args.hosts == "per_task":
        args.hosts, args.ps_hosts = per_task_hosts(args.layout, args.ps, args.workers)
    else:
        try:
            args.hosts = int(args.hosts)
        except ValueError:
            return "--hosts=%s: expected a number or per_task" % args.hosts
        if args.hosts < 1:
            return "--hosts must be at least 1"
    if sum(1 for x in (args.local, args.nodes, args.nodes_file) if x) > 1:
        return "give at most one of --local, --nodes and --nodes_file"
    if args.hosts > 250 and not (args.nodes or args.nodes_file):
        return "--hosts=%d: at most 250 emulated hosts" % args.hosts
    if args.ps_hosts > 1 and args.layout != "ps-w-w":
        return "--ps_hosts=%d: only ps-w-w spreads the ps tasks over hosts of their own" % args.ps_hosts
    if args.layout == "ps-w-w" and args.ps_hosts > args.ps:
        return "--ps_hosts=%d: more ps hosts than ps tasks (%d)" % (args.ps_hosts, args.ps)
    if args.layout == "ps-w-w" and args.hosts <= args.ps_hosts:
        return ("--layout=ps-w-w needs at least %d hosts (the ps on hosts 1..%d, the workers "
                "on the hosts after them)" % (args.ps_hosts + 1, args.ps_hosts))
    if args.layout == "single" and args.hosts != 1:
        return "--layout=single runs on one host: give --hosts=1"
    if args.layout == "pw-w" and args.hosts < 2:
        return "--layout=%s needs at least 2 hosts" % args.layout
    if args.layout == "pw-w" and args.workers < 2:
        return "--layout=pw-w needs at least 2 workers (worker 0 beside the ps, the rest apart)"
    if args.layout == "pw-pw" and (args.ps < args.hosts or args.workers < args.hosts):
        return "--layout=pw-pw puts a ps and a worker on every host: give --ps and --workers >= --hosts"
    total = 1 + args.ps + args.workers
    if not 1024 <= args.base_port <= 65535 - total:
        return "--base_port=%d: must leave room for %d ports below 65536" % (args.base_port, total)
    if args.nodes or args.nodes_file:
        try:
            args.node_names, where = read_nodes(args)
        except ValueError as e:
            return str(e)
        used = max(max(v) for v in place(args.layout, args.ps, args.workers, args.hosts,
                                         args.ps_hosts).values())
        if len(args.node_names) < used:
            return ("%s: %d node(s) for a layout of %d host(s) (%s, %d ps + %d workers): the "
                    "node list is too short" % (where, len(args.node_names), used, args.layout,
                                                args.ps, args.workers))
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layout", required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--hosts", default="2")
    p.add_argument("--ps_hosts", type=int, default=1)
    p.add_argument("--prefix", default="fh")
    p.add_argument("--base_port", type=int, default=2222)
    p.add_argument("--local", action="store_true")
    p.add_argument("--nodes", default="")
    p.add_argument("--nodes_file", default="")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    error = check(args)
    if error:
        print("make_spec: " + error, file=sys.stderr)
        return 2
    hosts = place(args.layout, args.ps, args.workers, args.hosts, args.ps_hosts)
    nodes = getattr(args, "node_names", None)
    spec, host_map, port = {}, {}, args.base_port
    for job in ("chief", "ps", "worker"):
        spec[job] = []
        for index, h in enumerate(hosts[job]):
            if nodes:
                ip = nodes[h - 1]
            else:
                ip = "localhost" if args.local else "198.18.0.%d" % h
            spec[job].append("%s:%d" % (ip, port))
            host_map["%s:%d" % (job, index)] = "%s-h%d" % (args.prefix, h)
            port += 1
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "spec.json"), "w") as f:
        json.dump(spec, f, indent=1)
    if not args.local and not nodes:
        with open(os.path.join(args.out, "hosts.json"), "w") as f:
            json.dump(host_map, f, indent=1)
    used = 1 if args.local else max(max(v) for v in hosts.values())
    print("make_spec: %s, %d ps + %d workers on %d host(s)%s -> %s" %
          (args.layout, args.ps, args.workers, used,
           " (%s)" % ", ".join(nodes[:used]) if nodes else "", args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
