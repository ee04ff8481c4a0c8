#!/usr/bin/env python3
"""Writes a ClusterSpec on free localhost ports: bench/free_spec.py OUT NUM_PS NUM_WORKERS.

The ports are ones the OS handed out a moment ago (bound to 127.0.0.1:0, then released), so
back-to-back benchmark runs never collide with each other or with a lingering TIME_WAIT.
"""
import json
import socket
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: free_spec.py OUT NUM_PS NUM_WORKERS")
    out, num_ps, num_workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    socks = []
    for _ in range(1 + num_ps + num_workers):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    addr = ["localhost:%d" % s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    spec = {"chief": addr[:1], "ps": addr[1:1 + num_ps], "worker": addr[1 + num_ps:]}
    with open(out, "w") as f:
        json.dump(spec, f)


if __name__ == "__main__":
    main()
