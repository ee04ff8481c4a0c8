#!/usr/bin/python3
"""Runs the cartesian product of cluster layouts and settings on emulated hosts.

  bench/sweep.py --layouts=ps-w-w,pw-pw,pw-w --workers=1,2,4 --ps=1,2 --batch_sizes=64,128
      --modes=sync,async,ssp3 --rates=1gbit,10gbit --model=logreg --steps=500 --repeats=3
      --out=DIR [--target_accuracy=0.8 --eval_every=50] [--extra="--learning_rate=0.03"] [--timeout=600]

Each run is a real cluster (scripts/local_cluster.sh --hosts) on hosts made by
scripts/netns_hosts.sh (one set per link rate, removed afterwards), laid out by
scripts/make_spec.py; combinations a layout cannot take (pw-w with one worker, ...) are
listed as skipped. A mode is sync, async or sspS (--mode=ssp --staleness=S, e.g. ssp0, ssp3).
A failed run is recorded as failed and the sweep goes on; a run whose
report.json exists in DIR/runs/ is not run again (resume by repeating the command).
Writes DIR/runs.csv (one row per run) and DIR/results.csv (one row per combination, medians
over its good repeats), DIR/index.html (examples/s vs workers with the ideal-linear line,
loopback vs cross-host bytes, CPU, memory and training time per combination, the table, as
inline SVG) and each chart as DIR/plots/NN.svg, drawn by scripts/fulcrum_report (matplotlib;
the renderer of the chief's report.html too). Needs root for the emulated hosts and Debian's
/usr/bin/python3 with python3-matplotlib; exit code 2 on bad input.
"""
import argparse
import csv
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
LAYOUTS = ("ps-w-w", "pw-pw", "pw-w", "single")

# The page renderer shared with the chief's report.html; it needs Debian's python3-matplotlib.
sys.path.insert(0, SCRIPTS)
try:
    import fulcrum_report
except ImportError as renderer_error:  # reported by main(), before any run starts
    fulcrum_report, RENDERER_ERROR = None, renderer_error

# Per-run figures taken from report.json ("cluster" table unless noted).
RUN_FIELDS = ["layout", "workers", "ps", "hosts", "batch_size", "mode", "rate", "repeat",
              "status", "exit_code", "examples_per_sec", "global_step", "final_test_accuracy",
              "time_to_target_accuracy_seconds", "train_seconds", "cpu_percent_mean",
              "peak_rss_bytes", "loopback_bytes_sent", "external_bytes_sent",
              "external_bytes_received", "app_bytes_sent", "run_dir"]
NUMERIC = RUN_FIELDS[10:21]


def csv_list(text, kind, name):
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError("--%s is empty" % name)
    if kind is int:
        try:
            values = [int(x) for x in items]
        except ValueError:
            raise ValueError("--%s=%s: expected integers separated by commas" % (name, text))
        if min(values) < 1:
            raise ValueError("--%s=%s: values must be positive" % (name, text))
        return values
    return items


def mode_flags(mode):
    """The flags of a --modes entry: sync, async, or sspS (bounded staleness S)."""
    if mode.startswith("ssp"):
        return ["--mode=ssp", "--staleness=" + mode[3:]]
    return ["--mode=" + mode]


def hosts_for(layout, workers, ps):
    """The host count a layout uses, or None with the reason it cannot take the combination."""
    if layout == "single":
        return 1, None
    if layout == "ps-w-w":
        return 2, None
    if layout == "pw-w":
        return (2, None) if workers >= 2 else (None, "pw-w needs 2 or more workers")
    hosts = min(ps, workers)  # pw-pw: a ps and a worker on every host
    return (hosts, None) if hosts >= 2 else (None, "pw-pw needs 2 or more ps and workers")


def run_name(c, repeat):
    return "%s_w%d_ps%d_b%d_%s_%s_r%d" % (c["layout"], c["workers"], c["ps"], c["batch_size"],
                                          c["mode"], c["rate"], repeat)


def sh(args, timeout):
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        return 124, out + "\nsweep: timed out after %d s" % timeout


def figures(report):
    c = report.get("cluster", {})
    row = {"examples_per_sec": report.get("workers_examples_per_sec"),
           "global_step": report.get("global_step"),
           "final_test_accuracy": report.get("final_test_accuracy"),
           "time_to_target_accuracy_seconds": report.get("time_to_target_accuracy_seconds"),
           "train_seconds": report.get("train_seconds")}
    for k in ("cpu_percent_mean", "peak_rss_bytes", "loopback_bytes_sent", "external_bytes_sent",
              "external_bytes_received", "app_bytes_sent"):
        row[k] = c.get(k)
    return row


def run_one(c, repeat, args, out_dir, bin_dir):
    name = run_name(c, repeat)
    run_dir = os.path.join(out_dir, "runs", name)
    row = dict(c, repeat=repeat, run_dir=os.path.relpath(run_dir, out_dir))
    report_path = os.path.join(run_dir, "run", "report.json")
    if os.path.exists(report_path):  # resume: done in an earlier sweep
        with open(report_path) as f:
            row.update(figures(json.load(f)), status="ok", exit_code=0)
        return row, True
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    code, out = sh([sys.executable, os.path.join(SCRIPTS, "make_spec.py"), "--layout",
                    c["layout"], "--workers", str(c["workers"]), "--ps", str(c["ps"]), "--hosts",
                    str(c["hosts"]), "--prefix", args.prefix, "--out", run_dir], 60)
    if code == 0:
        flags = (["--model=" + args.model, "--batch_size=%d" % c["batch_size"],
                  "--train_steps=%d" % args.steps] + mode_flags(c["mode"]) +
                 ["--threads=1", "--eval_every=%d" % (args.eval_every or max(1, args.steps // 5)),
                  "--log_every=100000",
                  "--startup_timeout=120", "--run_dir=" + os.path.join(run_dir, "run")])
        if args.target_accuracy > 0:  # stop there; --steps is the cap
            flags.append("--target_accuracy=%g" % args.target_accuracy)
        flags += args.extra.split()
        env = dict(os.environ, BIN_DIR=bin_dir)
        cmd = [os.path.join(SCRIPTS, "local_cluster.sh"), "--hosts",
               os.path.join(run_dir, "hosts.json"), os.path.join(run_dir, "spec.json")] + flags
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=args.timeout, env=env)
            code, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            code = 124
            out = (e.stdout if isinstance(e.stdout, str) else "") + "\nsweep: timed out"
    with open(os.path.join(run_dir, "cluster.log"), "w") as f:
        f.write(out)
    if code == 0 and os.path.exists(report_path):
        with open(report_path) as f:
            row.update(figures(json.load(f)), status="ok", exit_code=0)
    else:
        row.update(status="failed", exit_code=code)
    return row, False


def median(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def write_csv(path, rows, fields):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    os.replace(tmp, path)


def summarize(combos, runs):
    out = []
    key = ("layout", "workers", "ps", "hosts", "batch_size", "mode", "rate")
    for c in combos:
        mine = [r for r in runs if all(r.get(k) == c.get(k) for k in key)]
        good = [r for r in mine if r.get("status") == "ok"]
        row = {k: c.get(k) for k in key}
        row["status"] = c.get("skip") or ("ok" if good else "failed")
        row["repeats_ok"] = len(good)
        row["repeats_failed"] = len(mine) - len(good)
        for k in NUMERIC:
            row[k] = median(r.get(k) for r in good)
        out.append(row)
    return out


def load_report(out_dir, combo):
    """The report.json of a combination's first good repeat, or None."""
    repeat = 1
    while os.path.isdir(os.path.join(out_dir, "runs", run_name(combo, repeat))):
        path = os.path.join(out_dir, "runs", run_name(combo, repeat), "run", "report.json")
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        repeat += 1
    return None


def representative_layouts(out_dir, ok):
    """Per layout its run with the most workers, with the reports of that combination in
    sync and in async mode (None where not run), for the per-task and loss charts."""
    chosen = {}
    for r in ok:
        best = chosen.get(r["layout"])
        if best is None or r["workers"] > best["workers"]:
            chosen[r["layout"]] = r
    layouts = []
    for layout, r in sorted(chosen.items()):
        reports = {mode: load_report(out_dir, dict(r, mode=mode))
                   for mode in {"sync", "async", r["mode"]}}
        layouts.append({"layout": layout, "workers": r["workers"], "ps": r["ps"],
                        "mode": r["mode"], "reports": reports})
    return layouts


def write_index(out_dir, results):
    """DIR/index.html (the sweep's figures as inline SVG, then the results table) and each
    chart as DIR/plots/NN.svg, for papers and slides. Drawn by scripts/fulcrum_report, the
    renderer of the chiefs' report.html too."""
    ok = [r for r in results if r["status"] == "ok"]
    html, charts = fulcrum_report.render_sweep_page(results, representative_layouts(out_dir, ok))
    plots = os.path.join(out_dir, "plots")
    os.makedirs(plots, exist_ok=True)
    for i, chart in enumerate(charts):
        fulcrum_report.write_atomically(os.path.join(plots, "%02d.svg" % (i + 1)), chart.svg)
    fulcrum_report.write_atomically(os.path.join(out_dir, "index.html"), html)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layouts", default="ps-w-w,pw-w")
    p.add_argument("--workers", default="2")
    p.add_argument("--ps", default="1")
    p.add_argument("--batch_sizes", default="128")
    p.add_argument("--modes", default="sync")
    p.add_argument("--rates", default="none")
    p.add_argument("--model", default="logreg")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--target_accuracy", type=float, default=0.0)
    p.add_argument("--eval_every", type=int, default=0,
                   help="global steps between evaluations (default steps/5); the resolution "
                        "of time to target accuracy")
    p.add_argument("--extra", default="")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--out", required=True)
    p.add_argument("--prefix", default="sw",
                   help="name prefix of the emulated hosts (netns_hosts.sh --prefix): two "
                        "sweeps at once on one machine need different prefixes")
    args = p.parse_args()
    try:
        layouts = csv_list(args.layouts, str, "layouts")
        bad = [x for x in layouts if x not in LAYOUTS]
        if bad:
            raise ValueError("--layouts: unknown %s (known: %s)" % (", ".join(bad), ", ".join(LAYOUTS)))
        workers = csv_list(args.workers, int, "workers")
        ps = csv_list(args.ps, int, "ps")
        batches = csv_list(args.batch_sizes, int, "batch_sizes")
        modes = csv_list(args.modes, str, "modes")
        if any(m not in ("sync", "async") and not (m.startswith("ssp") and m[3:].isdigit())
               for m in modes):
            raise ValueError("--modes=%s: expected sync, async and/or sspS (S = staleness, "
                             "e.g. ssp3)" % args.modes)
        rates = csv_list(args.rates, str, "rates")
        if args.steps < 1 or args.repeats < 1 or args.timeout < 1 or args.eval_every < 0:
            raise ValueError("--steps, --repeats and --timeout must be positive")
        if not 0 <= args.target_accuracy <= 1:
            raise ValueError("--target_accuracy=%g: must be in [0, 1]" % args.target_accuracy)
    except ValueError as e:
        print("sweep: %s" % e, file=sys.stderr)
        return 2
    if fulcrum_report is None:
        print("sweep: cannot draw the pages (%s): install python3-matplotlib (scripts/setup.sh)"
              " and run Debian's /usr/bin/python3" % RENDERER_ERROR, file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("sweep: the emulated hosts need root (network namespaces); run as root",
              file=sys.stderr)
        return 2
    bin_dir = os.environ.get("BIN_DIR", os.path.join(ROOT, "build", "bin"))
    for b in ("ps", "worker", "chief"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            print("sweep: %s/%s not found: build first" % (bin_dir, b), file=sys.stderr)
            return 2
    os.makedirs(args.out, exist_ok=True)

    combos = []
    for layout, w, n_ps, b, mode, rate in itertools.product(layouts, workers, ps, batches, modes,
                                                            rates):
        hosts, why = hosts_for(layout, w, n_ps)
        combos.append({"layout": layout, "workers": w, "ps": n_ps, "hosts": hosts or 0,
                       "batch_size": b, "mode": mode, "rate": rate, "skip": why})
    todo = [c for c in combos if not c["skip"]]
    total = len(todo) * args.repeats
    print("sweep: %d combination(s) (%d skipped), %d run(s) -> %s" %
          (len(combos), len(combos) - len(todo), total, args.out), file=sys.stderr)
    runs, done, started = [], 0, time.time()
    for rate in rates:
        group = [c for c in todo if c["rate"] == rate]
        if not group:
            continue
        hosts = max(c["hosts"] for c in group)
        sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "down", "--prefix", args.prefix], 60)
        code, out = sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "up", str(hosts), "--rate",
                        rate, "--prefix", args.prefix], 120)
        if code != 0:
            print("sweep: cannot make %d host(s) at rate %s:\n%s" % (hosts, rate, out),
                  file=sys.stderr)
            for c in group:
                for r in range(1, args.repeats + 1):
                    runs.append(dict(c, repeat=r, status="failed", exit_code=code))
            continue
        try:
            for c in group:
                for r in range(1, args.repeats + 1):
                    row, reused = run_one(c, r, args, args.out, bin_dir)
                    runs.append(row)
                    done += 1
                    left = (time.time() - started) / done * (total - done)
                    print("sweep: [%d/%d] %s: %s%s, ETA %.0f s" %
                          (done, total, run_name(c, r), row["status"],
                           " (from an earlier sweep)" if reused else "", left), file=sys.stderr)
                    write_csv(os.path.join(args.out, "runs.csv"), runs, RUN_FIELDS)
        finally:
            sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "down", "--prefix", args.prefix], 60)
    results = summarize(combos, runs)
    fields = ["layout", "workers", "ps", "hosts", "batch_size", "mode", "rate", "status",
              "repeats_ok", "repeats_failed"] + NUMERIC
    write_csv(os.path.join(args.out, "runs.csv"), runs, RUN_FIELDS)
    write_csv(os.path.join(args.out, "results.csv"), results, fields)
    write_index(args.out, [{f: r.get(f) for f in fields} for r in results])
    failed = sum(1 for r in runs if r.get("status") != "ok")
    print("sweep: done, %d run(s), %d failed; %s" %
          (len(runs), failed, os.path.join(args.out, "results.csv")), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
