#!/usr/bin/python3
"""Smoke test of bench/grpc_bench (ctest GrpcBench.smoke): a tiny run of every benchmark.

  grpc_bench_smoke_test.py BUILD/bin/grpc_bench

Runs every benchmark and mode with tiny sizes and rounds, then checks the JSON and CSV: each
benchmark has a row per mode, every row moved exactly the payload bytes its steps asked for,
the figures are finite and positive, the ratios are there; the plot script draws the JSON;
bad flags exit 2 naming the flag; as root, a tiny run across two emulated hosts
(bench/grpc_bench_netns.sh: servers and the ps in one network namespace, the clients in
another) finishes with every mode. No timing assertion: only that the runs finished.
"""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = ["tcp", "serialized", "bytebuffer"]
FLAGS = ["--sizes=32,4K,256K", "--iovec=1,3", "--schemes=skew,uniform-small",
         "--scheme_buffers=5", "--large_class=64K:128K:96K", "--medium_class=1K:16K:4K",
         "--round_ms=20", "--pairs=1", "--min_iters=2", "--window=4", "--ps_servers=2",
         "--ps_clients=1,2", "--ps_schemes=skew", "--ps_models=logreg,syn1mb",
         "--rpc_timeout_s=20"]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check_row(r):
    name = "%s/%s/%s M%s N%s" % (r["benchmark"], r["mode"], r["payload"], r["servers"],
                                 r["clients"])
    moved = r["bytes_sent"] + r["bytes_received"]
    if r["bytes_expected"] <= 0 or moved != r["bytes_expected"]:
        fail("%s moved %d payload bytes, its steps asked for %d" % (name, moved,
                                                                   r["bytes_expected"]))
    for key in ("seconds", "mb_per_s", "calls_per_s", "steps", "calls", "message_bytes"):
        if not (isinstance(r[key], (int, float)) and math.isfinite(r[key]) and r[key] > 0):
            fail("%s: %s = %r" % (name, key, r[key]))
    if r["benchmark"] != "bandwidth":
        if not (0 < r["p50_us"] <= r["p95_us"] <= r["p99_us"]) or r["samples"] < 1:
            fail("%s: percentiles %r %r %r of %r samples" % (name, r["p50_us"], r["p95_us"],
                                                             r["p99_us"], r["samples"]))
    for ratio, v in r["ratios"].items():
        if not (0 < v["min"] <= v["median"] <= v["max"]) or not math.isfinite(v["max"]):
            fail("%s: ratio %s = %r" % (name, ratio, v))


def check_run(rows):
    by = {}
    for r in rows:
        by.setdefault(r["benchmark"], set()).add(r["mode"])
        check_row(r)
    for bench in ("latency", "bandwidth", "ps_throughput"):
        if by.get(bench) != set(RAW):
            fail("%s has modes %s, wanted %s" % (bench, sorted(by.get(bench, [])), RAW))
    if by.get("ps_path") != set(RAW + ["fulcrum_ps", "fulcrum_ps_tcp"]):
        fail("ps_path has modes %s" % sorted(by.get("ps_path", [])))
    payloads = {(r["payload"], r["buffers"]) for r in rows if r["benchmark"] == "latency"}
    for want in (("32 B", 1), ("256 KiB x3", 3), ("skew", 5), ("uniform-small", 5)):
        if want not in payloads:
            fail("latency has no row for %s (rows: %s)" % (want, sorted(payloads)))
    layouts = {(r["servers"], r["clients"]) for r in rows if r["benchmark"] == "ps_throughput"}
    if layouts != {(2, 1), (2, 2)}:
        fail("ps_throughput layouts %s" % sorted(layouts))
    for r in rows:
        if r["benchmark"] == "ps_path" and r["mode"] in ("fulcrum_ps", "fulcrum_ps_tcp"):
            if set(r["ratios"]) != {"speed_vs_tcp", "time_vs_serialized", "time_vs_bytebuffer"}:
                fail("ps_path %s ratios %s" % (r["payload"], sorted(r["ratios"])))
            want = 31400 if r["payload"] == "logreg" else 1 << 20
            if r["message_bytes"] != want:
                fail("ps_path %s holds %d bytes, not %d" % (r["payload"], r["message_bytes"], want))


def check_bad_flags(binary):
    for flag, named in (("--window=0", "--window"), ("--bogus=1", "--bogus"),
                        ("--sizes=12Q", "--sizes"), ("--modes=tcp,udp", "--modes")):
        p = subprocess.run([binary, flag], capture_output=True, text=True, timeout=30)
        if p.returncode != 2 or named not in p.stderr:
            fail("%s: exit %d, stderr %r" % (flag, p.returncode, p.stderr))


def check_netns(binary, tmp):
    """Across two emulated hosts (root only): the ps in another namespace than its client."""
    if os.geteuid() != 0:
        print("netns run skipped: the emulated hosts need root")
        return
    js = os.path.join(tmp, "netns.json")
    p = subprocess.run([os.path.join(HERE, "grpc_bench_netns.sh"), "none",
                        "--benchmarks=latency,ps_path", "--sizes=32", "--iovec=1", "--schemes=",
                        "--ps_models=logreg", "--round_ms=20", "--pairs=1", "--min_iters=2",
                        "--rpc_timeout_s=20", "--json=" + js], capture_output=True, text=True,
                       timeout=180, env=dict(os.environ, GRPC_BENCH=binary,
                                             GRPC_BENCH_PREFIX="gsm"))
    if "cannot" in p.stderr and "netns_hosts" in p.stderr and p.returncode == 2:
        print("netns run skipped: cannot make emulated hosts here:\n" + p.stderr)
        return
    if p.returncode != 0:
        fail("grpc_bench_netns.sh exited %d:\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
    with open(js, encoding="utf-8") as f:
        rows = json.load(f)["rows"]
    modes = {(r["benchmark"], r["mode"]) for r in rows}
    for want in [("latency", m) for m in RAW] + [("ps_path", "fulcrum_ps")]:
        if want not in modes:
            fail("across emulated hosts: no %s row (rows: %s)" % (want, sorted(modes)))
    for r in rows:
        check_row(r)


def main():
    binary = sys.argv[1]
    check_bad_flags(binary)
    with tempfile.TemporaryDirectory() as tmp:
        check_netns(binary, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        js, cs = os.path.join(tmp, "run.json"), os.path.join(tmp, "run.csv")
        p = subprocess.run([binary] + FLAGS + ["--json=" + js, "--csv=" + cs],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            fail("grpc_bench exited %d:\n%s\n%s" % (p.returncode, p.stdout, p.stderr))
        with open(js, encoding="utf-8") as f:
            run = json.load(f)
        check_run(run["rows"])
        with open(cs, newline="", encoding="utf-8") as f:
            lines = list(csv.DictReader(f))
        if len(lines) != len(run["rows"]) or lines[0]["benchmark"] != run["rows"][0]["benchmark"]:
            fail("the CSV has %d rows, the JSON %d" % (len(lines), len(run["rows"])))
        for key in ("command", "date", "loadavg_before", "loadavg_after", "network"):
            if not run["meta"].get(key):
                fail("meta.%s is missing" % key)
        out = os.path.join(tmp, "plots")
        p = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "plot_grpc_bench.py"), js,
                            "--out=" + out], capture_output=True, text=True, timeout=120)
        svgs = [n for n in os.listdir(out) if n.endswith(".svg")] if p.returncode == 0 else []
        if p.returncode != 0 or len(svgs) < 8:
            fail("plot_grpc_bench.py: exit %d, %d SVGs\n%s" % (p.returncode, len(svgs), p.stderr))
    print("OK: %d rows" % len(run["rows"]))


if __name__ == "__main__":
    main()
