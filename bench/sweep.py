#!/usr/bin/env python3
"""Runs the cartesian product of cluster layouts and settings on emulated hosts.

  bench/sweep.py --layouts=ps-w-w,pw-pw,pw-w --workers=1,2,4 --ps=1,2 --batch_sizes=64,128
      --modes=sync,async --rates=1gbit,10gbit --model=logreg --steps=500 --repeats=3
      --out=DIR [--target_accuracy=0.8 --eval_every=50] [--extra="--learning_rate=0.03"] [--timeout=600]

Each run is a real cluster (scripts/local_cluster.sh --hosts) on hosts made by
scripts/netns_hosts.sh (one set per link rate, removed afterwards), laid out by
scripts/make_spec.py; combinations a layout cannot take (pw-w with one worker, ...) are
listed as skipped. A failed run is recorded as failed and the sweep goes on; a run whose
report.json exists in DIR/runs/ is not run again (resume by repeating the command).
Writes DIR/runs.csv (one row per run) and DIR/results.csv (one row per combination, medians
over its good repeats), DIR/plots/NN.svg and DIR/index.html (examples/sec vs workers with the ideal-linear line,
loopback vs cross-host bytes, CPU, memory and training time per combination, the table, as
inline SVG). Needs root for the emulated hosts; exit code 2 on bad input.
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
PREFIX = "sw"

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
                    str(c["hosts"]), "--prefix", PREFIX, "--out", run_dir], 60)
    if code == 0:
        flags = ["--model=" + args.model, "--batch_size=%d" % c["batch_size"],
                 "--train_steps=%d" % args.steps, "--mode=" + c["mode"], "--threads=1",
                 "--eval_every=%d" % (args.eval_every or max(1, args.steps // 5)),
                 "--log_every=100000",
                 "--startup_timeout=120", "--run_dir=" + os.path.join(run_dir, "run")]
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


COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
          "#ff9da7", "#9c755f", "#bab0ac"]


def human(v):
    if abs(v) >= 1e6:
        return "%.2fM" % (v / 1e6)
    if abs(v) >= 1e4:
        return "%.0fk" % (v / 1e3)
    return "%.3g" % v


def esc(text):
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def line_chart(title, xlabel, ylabel, series, w=560, h=300):
    """series: [(name, [(x, y)...], dashed, color index)] -> inline SVG with axes, a legend."""
    pts = [(x, y) for _, xy, _, _ in series for x, y in xy if x is not None and y is not None]
    head = ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="11"><rect width="100%%" height="100%%" '
            'fill="#fff"/><text x="%d" y="16" text-anchor="middle" font-size="13">%s</text>'
            % (w, h + 20 * ((len(series) + 1) // 2), w / 2, esc(title)))
    if not pts:
        return head + '<text x="%d" y="%d" text-anchor="middle">no data</text></svg>' % (w / 2, h / 2)
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y1 = max(p[1] for p in pts) * 1.05 or 1.0
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    L, R, T, B = 70, 15, 28, 40
    px = lambda x: L + (x - x0) / (x1 - x0) * (w - L - R)
    py = lambda y: h - B - y / y1 * (h - T - B)
    out = [head]
    for i in range(6):
        v = y1 * i / 5
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>'
                   '<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (L, w - R, py(v), py(v), L - 4, py(v) + 4, human(v)))
    xs = sorted({p[0] for p in pts})
    if len(xs) > 12:  # evenly spaced ticks instead of every value
        xs = [x0 + (x1 - x0) * i / 6 for i in range(7)]
    for x in xs:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (px(x), h - B + 14,
                                                                        human(x)))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((L + w - R) / 2, h - 8, esc(xlabel)))
    out.append('<text transform="translate(12,%d) rotate(-90)" text-anchor="middle">%s</text>'
               % ((T + h - B) / 2, esc(ylabel)))
    for i, (name, xy, dashed, c) in enumerate(series):
        color = COLORS[c % len(COLORS)]
        good = [(x, y) for x, y in xy if x is not None and y is not None]
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>'
                   % (color, ' stroke-dasharray="5 3"' if dashed else "",
                      " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in good)))
        for x, y in (good if len(good) <= 30 else []):
            out.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (px(x), py(y), color))
        lx, ly = 10 + (i % 2) * (w / 2), h + 4 + 20 * (i // 2)
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                   '<text x="%d" y="%d">%s</text>' % (lx, lx + 18, ly, ly, color,
                                                     ' stroke-dasharray="5 3"' if dashed else "",
                                                     lx + 22, ly + 4, esc(name)))
    return "".join(out) + "</svg>"


def bar_chart(title, parts, bars, unit, w=640):
    """bars: [(label, [value per part])] -> horizontal stacked bars (labels left of x=260)."""
    h = 50 + 20 * max(1, len(bars))
    top = max([sum(v or 0 for v in vals) for _, vals in bars] + [0]) or 1.0
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11"><rect width="100%%" height="100%%" fill="#fff"/><text x="%d" y="16" '
           'text-anchor="middle" font-size="13">%s</text>' % (w, h, w / 2, esc(title))]
    for i, p in enumerate(parts):
        out.append('<rect x="%d" y="24" width="10" height="8" fill="%s"/><text x="%d" y="32">%s</text>'
                   % (260 + 110 * i, COLORS[i], 273 + 110 * i, esc(p)))
    for j, (label, vals) in enumerate(bars):
        y, x = 42 + 20 * j, 260.0
        out.append('<text x="256" y="%d" text-anchor="end">%s</text>' % (y + 12, esc(label)))
        for i, v in enumerate(vals):
            width = (v or 0) / top * (w - 350)
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="14" fill="%s"/>'
                       % (x, y, width, COLORS[i]))
            x += width
        out.append('<text x="%.1f" y="%d">%s</text>' % (x + 4, y + 12,
                                                       esc(unit(sum(v or 0 for v in vals)))))
    return "".join(out) + "</svg>"


def mb(v):
    return "%.1f MB" % (v / 1e6)


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


def per_run_charts(out_dir, ok):
    """Charts from the runs' own reports: per task, per host, and loss curves."""
    charts = []
    # One representative run per layout: most workers, then the first of the other settings.
    chosen = {}
    for r in ok:
        best = chosen.get(r["layout"])
        if best is None or r["workers"] > best["workers"]:
            chosen[r["layout"]] = r
    tasks, hosts = [], []
    for layout, r in sorted(chosen.items()):
        report = load_report(out_dir, r)
        if report is None:
            continue
        tag = "%s w%d ps%d %s" % (layout, r["workers"], r["ps"], r["mode"])
        for t in report.get("tasks", []):
            tasks.append(("%s %s@%s" % (tag, t.get("task"), t.get("host")),
                          t.get("cpu_percent_mean"), t.get("peak_rss_bytes")))
        for h in report.get("hosts", []):
            hosts.append(("%s %s" % (tag, h.get("host")),
                          [h.get("loopback_bytes_sent"), h.get("external_bytes_sent"),
                           h.get("external_bytes_received")]))
    charts.append(bar_chart("CPU per task (mean, % of one core), most workers per layout",
                            ["CPU"], [(n, [c]) for n, c, _ in tasks], lambda v: "%.0f%%" % v))
    charts.append(bar_chart("Peak RSS per task", ["RSS"], [(n, [m]) for n, _, m in tasks], mb))
    charts.append(bar_chart("Per host: loopback out, external out, external in",
                            ["lo out", "ext out", "ext in"], hosts, mb))
    # Loss of worker 0 against the global step and against time, sync vs async, per layout.
    by_step, by_time = [], []
    for g, (layout, r) in enumerate(sorted(chosen.items())):
        for mode, dashed in (("sync", False), ("async", True)):
            c = dict(r, mode=mode)
            report = load_report(out_dir, c)
            if report is None or not report.get("workers"):
                continue
            steps = report["workers"][0].get("series", {}).get("steps", {})
            loss, gstep, t = steps.get("loss", []), steps.get("global_step", []), steps.get("unix_s", [])
            name = "%s w%d %s" % (layout, r["workers"], mode)
            by_step.append((name, list(zip(gstep, loss)), dashed, g))
            t0 = t[0] if t else 0
            by_time.append((name, [(x - t0, y) for x, y in zip(t, loss)], dashed, g))
    charts.append(line_chart("Training loss (worker 0) vs global step: sync solid, async dashed",
                             "global step", "loss", by_step))
    charts.append(line_chart("Training loss (worker 0) vs time: sync solid, async dashed",
                             "seconds", "loss", by_time))
    return charts


def write_index(out_dir, results):
    """DIR/index.html: the sweep's figures as inline SVG, then the results table."""
    ok = [r for r in results if r["status"] == "ok"]
    charts = []
    groups = {}
    for r in ok:
        groups.setdefault((r["layout"], r["ps"], r["batch_size"], r["mode"], r["rate"]), []).append(r)
    series = []
    for g, ((layout, n_ps, b, mode, rate), rows) in enumerate(sorted(groups.items())):
        rows.sort(key=lambda r: r["workers"])
        name = "%s %dps b%d %s %s" % (layout, n_ps, b, mode, rate)
        xy = [(r["workers"], r["examples_per_sec"]) for r in rows]
        series.append((name, xy, False, g))
        base = rows[0]
        if len(rows) > 1 and base["examples_per_sec"]:
            per = base["examples_per_sec"] / base["workers"]
            series.append((name + " ideal", [(r["workers"], per * r["workers"]) for r in rows], True,
                           g))
    charts.append(line_chart("Examples/sec vs workers (dashed: ideal linear)", "workers",
                             "examples/sec", series))
    label = lambda r: "%s w%d ps%d b%d %s %s" % (r["layout"], r["workers"], r["ps"],
                                                r["batch_size"], r["mode"], r["rate"])
    charts.append(bar_chart("Network bytes sent: same host (lo) vs across hosts",
                            ["loopback", "external"],
                            [(label(r), [r["loopback_bytes_sent"], r["external_bytes_sent"]])
                             for r in ok], mb))
    charts.append(bar_chart("Cluster CPU (sum of task means, % of one core)", ["CPU"],
                            [(label(r), [r["cpu_percent_mean"]]) for r in ok],
                            lambda v: "%.0f%%" % v))
    charts.append(bar_chart("Peak RSS, all tasks", ["RSS"],
                            [(label(r), [r["peak_rss_bytes"]]) for r in ok], mb))
    charts.append(bar_chart("Training time (s)", ["train"],
                            [(label(r), [r["train_seconds"]]) for r in ok], lambda v: "%.2f s" % v))
    if any(r["time_to_target_accuracy_seconds"] is not None for r in ok):
        charts.append(bar_chart("Time to target accuracy (s)", ["time"],
                                [(label(r), [r["time_to_target_accuracy_seconds"]]) for r in ok],
                                lambda v: "%.2f s" % v))
    charts += per_run_charts(out_dir, ok)
    fields = list(results[0].keys()) if results else []
    table = "<table><tr>%s</tr>%s</table>" % (
        "".join("<th>%s</th>" % esc(f) for f in fields),
        "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % esc("" if r[f] is None else (
            "%.4g" % r[f] if isinstance(r[f], float) else r[f])) for f in fields) for r in results))
    html = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Fulcrum sweep</title>"
            "<style>body{font:13px sans-serif;margin:16px}svg{border:1px solid #ddd;margin:4px}"
            "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style>"
            "</head><body><h1>Fulcrum sweep</h1>%s<h2>Results (medians over repeats)</h2>%s"
            "</body></html>\n" % ("".join(charts), table))
    # Each chart also as its own SVG file, for papers and slides.
    plots = os.path.join(out_dir, "plots")
    os.makedirs(plots, exist_ok=True)
    for i, svg in enumerate(charts):
        with open(os.path.join(plots, "%02d.svg" % (i + 1)), "w") as f:
            f.write(svg)
    tmp = os.path.join(out_dir, "index.html.tmp")
    with open(tmp, "w") as f:
        f.write(html)
    os.replace(tmp, os.path.join(out_dir, "index.html"))


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
        if any(m not in ("sync", "async") for m in modes):
            raise ValueError("--modes=%s: expected sync and/or async" % args.modes)
        rates = csv_list(args.rates, str, "rates")
        if args.steps < 1 or args.repeats < 1 or args.timeout < 1 or args.eval_every < 0:
            raise ValueError("--steps, --repeats and --timeout must be positive")
        if not 0 <= args.target_accuracy <= 1:
            raise ValueError("--target_accuracy=%g: must be in [0, 1]" % args.target_accuracy)
    except ValueError as e:
        print("sweep: %s" % e, file=sys.stderr)
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
        sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "down", "--prefix", PREFIX], 60)
        code, out = sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "up", str(hosts), "--rate",
                        rate, "--prefix", PREFIX], 120)
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
            sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "down", "--prefix", PREFIX], 60)
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
