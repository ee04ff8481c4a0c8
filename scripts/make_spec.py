#!/usr/bin/env python3
"""Writes a ClusterSpec and its task -> host map for a cluster layout.

  scripts/make_spec.py --layout ps-w-w --workers 2 --ps 1 --hosts 2 --out DIR
      [--prefix fh] [--base_port 2222] [--local]

Layouts (the chief always sits on host 1, beside the first ps):
  ps-w-w  the ps tasks alone on host 1; the workers round-robin over hosts 2..H (H >= 2)
  pw-pw   ps i and worker i on host (i mod H) + 1: every host runs a ps and a worker
  pw-w    the ps tasks and worker 0 on host 1; the other workers round-robin over hosts 2..H
  single  every task on host 1 (H = 1)
The hosts are the emulated ones of scripts/netns_hosts.sh (namespace <prefix>-h<i>, address
198.18.0.<i>); --local puts every task on localhost instead (no host map; for layouts that
need no network emulation). Writes DIR/spec.json ({"chief": [...], "ps": [...],
"worker": [...]}) and DIR/hosts.json ({"chief:0": "fh-h1", ...}). Exit code 2 on bad input.
"""
import argparse
import json
import os
import sys

LAYOUTS = ("ps-w-w", "pw-pw", "pw-w", "single")


def place(layout, num_ps, num_workers, hosts):
    """Host number (1-based) of every task: {"chief": [h], "ps": [...], "worker": [...]}."""
    if layout == "single":
        return {"chief": [1], "ps": [1] * num_ps, "worker": [1] * num_workers}
    if layout == "ps-w-w":
        return {"chief": [1], "ps": [1] * num_ps,
                "worker": [2 + i % (hosts - 1) for i in range(num_workers)]}
    if layout == "pw-pw":
        return {"chief": [1], "ps": [1 + i % hosts for i in range(num_ps)],
                "worker": [1 + i % hosts for i in range(num_workers)]}
    # pw-w
    workers = [1] + [2 + i % (hosts - 1) for i in range(num_workers - 1)]
    return {"chief": [1], "ps": [1] * num_ps, "worker": workers}


def check(args):
    if args.layout not in LAYOUTS:
        return "--layout=%s: expected one of %s" % (args.layout, ", ".join(LAYOUTS))
    if args.workers < 1 or args.ps < 1 or args.hosts < 1:
        return "--workers, --ps and --hosts must be at least 1"
    if args.hosts > 250:
        return "--hosts=%d: at most 250 emulated hosts" % args.hosts
    if args.layout == "single" and args.hosts != 1:
        return "--layout=single runs on one host: give --hosts=1"
    if args.layout in ("ps-w-w", "pw-w") and args.hosts < 2:
        return "--layout=%s needs at least 2 hosts" % args.layout
    if args.layout == "pw-w" and args.workers < 2:
        return "--layout=pw-w needs at least 2 workers (worker 0 beside the ps, the rest apart)"
    if args.layout == "pw-pw" and (args.ps < args.hosts or args.workers < args.hosts):
        return "--layout=pw-pw puts a ps and a worker on every host: give --ps and --workers >= --hosts"
    total = 1 + args.ps + args.workers
    if not 1024 <= args.base_port <= 65535 - total:
        return "--base_port=%d: must leave room for %d ports below 65536" % (args.base_port, total)
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layout", required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--ps", type=int, default=1)
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--prefix", default="fh")
    p.add_argument("--base_port", type=int, default=2222)
    p.add_argument("--local", action="store_true")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    error = check(args)
    if error:
        print("make_spec: " + error, file=sys.stderr)
        return 2
    hosts = place(args.layout, args.ps, args.workers, args.hosts)
    spec, host_map, port = {}, {}, args.base_port
    for job in ("chief", "ps", "worker"):
        spec[job] = []
        for index, h in enumerate(hosts[job]):
            ip = "localhost" if args.local else "198.18.0.%d" % h
            spec[job].append("%s:%d" % (ip, port))
            host_map["%s:%d" % (job, index)] = "%s-h%d" % (args.prefix, h)
            port += 1
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "spec.json"), "w") as f:
        json.dump(spec, f, indent=1)
    if not args.local:
        with open(os.path.join(args.out, "hosts.json"), "w") as f:
            json.dump(host_map, f, indent=1)
    print("make_spec: %s, %d ps + %d workers on %d host(s) -> %s" %
          (args.layout, args.ps, args.workers, 1 if args.local else max(
              max(v) for v in hosts.values()), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
