#!/usr/bin/env python3
"""Checks the chief's what-if predictions (chief/whatif.h) against reruns on emulated hosts.

For each model: a baseline sweep point (ps-w-w, one emulated host per task with --cpus CPU and
--rate links, 2 workers, 2 ps, sync) and one sweep point per change the what-if predicts (one
more ps, links at 2x and 1/2, --wire_dtype=bf16, the other placements, 2x the workers), each
run --repeats times by bench/sweep.py. The predictions come from each baseline run's
report.json (`chief --whatif=RUN --link_rate --host_cpus`); each is compared with the median
of the rerun's examples/s. Prints one row per model and change, and the median and worst error.

  sudo bench/whatif_check.py --out=/tmp/whatif [--models=logreg:3000,mlp:300,cifar10_cnn:40]
      [--repeats=2] [--cpus=0.25] [--rate=1gbit] [--skip_runs]

--skip_runs only reads the sweeps already in --out (a sweep that finished is not rerun either:
sweep.py skips the runs already in its runs.csv). Needs root (network namespaces, cgroups).
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_flags import rate_bits as bits  # noqa: E402 (after the path)
BIN = os.environ.get("BIN_DIR", os.path.join(ROOT, "build", "bin"))

# (what-if scenario, sweep folder, the sweep options that make the change)
CHANGES = [
    ("one_more_ps", "ps3", ["--ps", "3"]),
    ("link_2x", "rate2x", ["--rates", "RATE2X"]),
    ("link_half", "rate_half", ["--rates", "RATEHALF"]),
    ("wire_bf16", "bf16", ["--extra=--wire_dtype=bf16"]),
    ("placement_greedy", "greedy", ["--extra=--placement=greedy"]),
    ("placement_partition", "partition", ["--extra=--placement=partition"]),
    ("workers_2x", "workers4", ["--workers", "4"]),
]


def rate_text(b):
    return "%dmbit" % round(b / 1e6)


def sweep(args, model, steps, name, changed):
    base = ["--layouts", "ps-w-w", "--hosts", "per_task", "--cpus", str(args.cpus), "--model",
            model, "--steps", str(steps), "--repeats", str(args.repeats), "--eval_every",
            "100000", "--prefix", "wc", "--workers", "2", "--ps", "2", "--rates", args.rate]
    r = bits(args.rate)
    changed = [{"RATE2X": rate_text(2 * r), "RATEHALF": rate_text(r / 2)}.get(x, x)
               for x in changed]
    # A later option wins over the baseline's (argparse keeps the last).
    cmd = [sys.executable, os.path.join(ROOT, "bench", "sweep.py")] + base + changed + [
        "--out", os.path.join(args.out, model, name)]
    print("whatif_check: %s %s" % (model, name), flush=True)
    subprocess.run(cmd, check=False)


def measured(folder):
    """The median examples/s of a sweep folder's successful runs, and their count."""
    path = os.path.join(folder, "runs.csv")
    if not os.path.exists(path):
        return None, 0
    with open(path) as f:
        rates = [float(r["examples_per_sec"]) for r in csv.DictReader(f)
                 if r["status"] == "ok" and r["examples_per_sec"]]
    return (statistics.median(rates), len(rates)) if rates else (None, 0)


def predictions(args, folder):
    """Per scenario, the median prediction over the baseline's runs."""
    out = {}
    runs = os.path.join(folder, "runs")
    for run in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        cmd = [os.path.join(BIN, "chief"), "--whatif=" + os.path.join(runs, run, "run"),
               "--whatif_json", "--link_rate=" + args.rate, "--host_cpus=%g" % args.cpus,
               # netns_hosts.sh's token bucket: 1 ms at the rate, at least 64 KiB.
               "--link_burst_bytes=%d" % max(bits(args.rate) / 8 / 1000, 65536)]
        p = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            print("whatif_check: %s: %s" % (run, p.stderr.strip()), file=sys.stderr)
            continue
        for s in json.loads(p.stdout)["scenarios"]:
            out.setdefault(s["name"], []).append(s["examples_per_sec"])
    return {k: statistics.median(v) for k, v in out.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="logreg:3000,mlp:300,cifar10_cnn:40",
                   help="model:steps, comma-separated")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--cpus", type=float, default=0.25)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--skip_runs", action="store_true")
    args = p.parse_args()
    models = [m.split(":") for m in args.models.split(",")]
    errors = []
    rows = []
    for model, steps in models:
        if not args.skip_runs:
            sweep(args, model, steps, "base", [])
            for _, name, changed in CHANGES:
                sweep(args, model, steps, name, changed)
        base, n = measured(os.path.join(args.out, model, "base"))
        predicted = predictions(args, os.path.join(args.out, model, "base"))
        for scenario, name, _ in CHANGES:
            got, runs = measured(os.path.join(args.out, model, name))
            want = predicted.get(scenario)
            if got is None or want is None:
                rows.append((model, scenario, base, want, got, None, runs))
                continue
            err = want / got - 1
            errors.append(abs(err))
            rows.append((model, scenario, base, want, got, err, runs))
    print("%-12s %-20s %12s %12s %12s %8s %5s" % ("model", "change", "baseline/s", "predicted/s",
                                                  "measured/s", "error", "runs"))
    for model, scenario, base, want, got, err, runs in rows:
        def f(x):
            return "%12.0f" % x if x is not None else "%12s" % "-"
        print("%-12s %-20s %s %s %s %8s %5d" % (model, scenario, f(base), f(want), f(got),
                                                "%+.1f%%" % (100 * err) if err is not None
                                                else "-", runs))
    if errors:
        print("median |error| %.1f%%, worst %.1f%% over %d predictions"
              % (100 * statistics.median(errors), 100 * max(errors), len(errors)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
