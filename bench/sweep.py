#!/usr/bin/python3
"""Runs the cartesian product of cluster layouts and settings on emulated hosts or real nodes.

`--help` lists every option with its default; `--dry_run` lists the runs (and the skipped
ones, with why) and an estimate of their time, and runs nothing.

  bench/sweep.py --layouts=ps-w-w,pw-pw,pw-w --workers=1,2,4 --ps=1,2 --batch_sizes=64,128
      --modes=sync,async,ssp3 --rates=1gbit,10gbit --models=logreg,mlp --steps=500 --repeats=3
      --out=DIR [--target_accuracy=0.8 --eval_every=50] [--extra="--learning_rate=0.03"] [--timeout=600]
      [--widths=0.5,1,2] [--datasets=full,subset10000,repeat2] [--epochs=1,3]
      [--optimizers=sgd,adam] [--hosts=packed|per_task] [--single_baseline]
      [--cpus=0.4 --scales=1,4 [--cpu_period_us=10000]]
      [--host_examples_per_sec=427 --examples_per_cpu=400 --scales=6] (instead of --cpus)
      [--nodes=n1,n2,... | --nodes_file=F] [--launch_exec=CMD] [--remote_dir=DIR] [--ssh=CMD]
      [--base_port=2222]

Axes (every list is comma-separated; the sweep runs their product):
  --layouts, --workers, --ps, --batch_sizes, --modes (sync, async, sspS), --rates (link rate of
  the emulated hosts, or none), --models, --widths (--model_width), --datasets (full, subsetN:
  the first N training examples, repeatN: the training set N times per epoch), --epochs (each
  run trains that many epochs instead of --steps), --optimizers, --scales (with --cpus: every
  emulated host gets --cpus / F CPUs and the link rate / F, scripts/netns_hosts.sh --scale F).
--host_examples_per_sec E --examples_per_cpu X set the hosts' compute-to-link ratio instead of
--cpus: each host computes E examples/s (E / X CPUs, X measured on this machine for the model
and batch) beside its link (netns_hosts.sh's options of the same names; an unreachable ratio
exits 2 naming the highest possible and the --scales that would give it).
--hosts=packed (default) puts the tasks of a layout on as few hosts as it allows (ps-w-w: the
ps on host 1, every worker on host 2); --hosts=per_task gives every ps and every worker a host
of its own, as the studies ran them (scripts/make_spec.py --hosts per_task).
--single_baseline adds, per setting, a row "single-process": the worker alone (no ps, no
chief) on host 1 with the same model, data, batch and optimizer: the baseline of CS744's
"Single" and of the speed-ups.
--nodes runs every cluster on real machines through scripts/launch_ssh.sh (the spec names the
nodes, host i = the i-th node; no link emulation: --rates=none, --scales=1); --launch_exec
replaces ssh (launch_ssh.sh --exec, e.g. "env" when every node is this machine). With --nodes
the single-process baseline runs on this machine.

Each run is a real cluster (scripts/local_cluster.sh --hosts) on hosts made by
scripts/netns_hosts.sh (one set per link rate and scale, removed afterwards), laid out by
scripts/make_spec.py; combinations a layout cannot take (pw-w with one worker, ...) are
listed as skipped. A failed run is recorded as failed and the sweep goes on (it ends with
exit code 1, after writing everything); a run whose report.json exists in DIR/runs/ is not run
again (resume by repeating the command).
Writes DIR/runs.csv (one row per run) and DIR/results.csv (one row per combination, medians
over its good repeats), DIR/index.html (examples/s vs workers with the ideal-linear line,
loopback vs cross-host bytes, CPU, memory and training time per combination as inline SVG,
the results table in people's units, and every run linked to its own report.html) and each chart as DIR/plots/NN.svg, drawn by scripts/fulcrum_report (matplotlib;
the renderer of the chief's report.html too). Needs root for the emulated hosts and Debian's
/usr/bin/python3 with python3-matplotlib; exit code 2 on bad input (an impossible CPU share
or scale, a node list shorter than a layout, an unknown axis value), before anything runs.
"""
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sweep_flags import SINGLE_PROCESS, task_flags  # noqa: E402 (after the path)
import sweep_provenance as provenance  # noqa: E402
from sweep_options import parse_args as parse_options  # noqa: E402

# The page renderer shared with the chief's report.html; it needs Debian's python3-matplotlib.
sys.path.insert(0, SCRIPTS)
try:
    import fulcrum_report
except ImportError as renderer_error:  # reported by main(), before any run starts
    fulcrum_report, RENDERER_ERROR = None, renderer_error

# Per-run figures taken from report.json ("cluster" table unless noted).
# The axes of a combination, in the order of the CSV columns.
KEY = ("layout", "workers", "ps", "hosts", "batch_size", "mode", "rate", "model", "model_width",
       "dataset", "epochs", "optimizer", "cpus", "scale")
NUMERIC = ["examples_per_sec", "global_step", "final_test_accuracy",
           "time_to_target_accuracy_seconds", "train_seconds", "cpu_percent_mean",
           "peak_rss_bytes", "loopback_bytes_sent", "external_bytes_sent",
           "external_bytes_received", "app_bytes_sent"]
RUN_FIELDS = (list(KEY) + ["repeat", "status", "exit_code"] + NUMERIC +
              ["commit", "binaries", "settings_hash", "other_cpus", "run_dir"])
# results.csv: the medians, their spread over the good repeats, and the sources behind them.
SPREAD = ["examples_per_sec_min", "examples_per_sec_max", "train_seconds_min",
          "train_seconds_max"]
# Seconds a run costs beyond its training: the hosts' tasks starting, the final evaluation,
# the summaries and the report (--dry_run's estimate).
RUN_OVERHEAD_S = 8


def csv_list(text, kind, name):
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError("--%s is empty" % name)
    if kind is float:
        try:
            values = [float(x) for x in items]
        except ValueError:
            raise ValueError("--%s=%s: expected numbers separated by commas" % (name, text))
        if min(values) <= 0:
            raise ValueError("--%s=%s: values must be positive" % (name, text))
        return values
    if kind is int:
        try:
            values = [int(x) for x in items]
        except ValueError:
            raise ValueError("--%s=%s: expected integers separated by commas" % (name, text))
        if min(values) < 1:
            raise ValueError("--%s=%s: values must be positive" % (name, text))
        return values
    return items


def hosts_for(layout, workers, ps, per_task=False):
    """The host count a layout uses, or None with the reason it cannot take the combination."""
    if layout in ("single", SINGLE_PROCESS):
        return 1, None
    if layout == "ps-w-w":
        return (ps + workers if per_task else 2), None
    if layout == "pw-w":
        if workers < 2:
            return None, "pw-w needs 2 or more workers"
        return (workers if per_task else 2), None
    hosts = min(ps, workers)  # pw-pw: a ps and a worker on every host
    return (hosts, None) if hosts >= 2 else (None, "pw-pw needs 2 or more ps and workers")


# The value of an axis a combination does not name (a caller that builds combinations by hand).
DEFAULTS = {"model": "logreg", "model_width": 1.0, "dataset": "full", "epochs": 0,
            "optimizer": "sgd", "cpus": 0, "scale": 1.0}


def run_name(c, repeat):
    c = dict(DEFAULTS, **c)
    return "%s_w%d_ps%d_h%d_b%d_%s_%s_%s_x%g_%s_e%g_%s_s%g_r%d" % (
        c["layout"], c["workers"], c["ps"], c["hosts"], c["batch_size"], c["mode"], c["rate"],
        c["model"], c["model_width"], c["dataset"], c["epochs"], c["optimizer"], c["scale"], repeat)


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


def single_figures(summary):
    """A single-process run's row figures from the worker's summary.json."""
    return {"examples_per_sec": summary.get("examples_per_sec"),
            "global_step": summary.get("last_global_step") or summary.get("local_steps"),
            "final_test_accuracy": summary.get("final_test_accuracy"),
            "time_to_target_accuracy_seconds": summary.get("time_to_target_accuracy_seconds"),
            "train_seconds": summary.get("train_seconds"),
            "cpu_percent_mean": summary.get("cpu_percent_mean"),
            "peak_rss_bytes": summary.get("peak_rss_bytes"),
            "loopback_bytes_sent": summary.get("network_loopback_bytes_sent"),
            "external_bytes_sent": summary.get("network_external_bytes_sent"),
            "external_bytes_received": summary.get("network_external_bytes_received"),
            "app_bytes_sent": summary.get("app_bytes_sent")}


def run_settings(c, args, run_dir):
    """The run's task flags and its settings (provenance.settings_of)."""
    flags = task_flags(c, args, run_dir)
    hosts = {"rate": c["rate"], "share": host_share(args, c["scale"]), "hosts": args.hosts,
             "nodes": args.nodes_list}
    return flags, provenance.settings_of(flags, hosts)


def finished_run(c, repeat, args, out_dir):
    """(run_dir, report_path, reusable, why, flags, settings): where combination c's repeat
    lives, whether a finished run of the same settings is there to reuse, and its flags."""
    run_dir = os.path.join(out_dir, "runs", run_name(c, repeat))
    single = c["layout"] == SINGLE_PROCESS
    report_path = os.path.join(run_dir, "run", "summary.json" if single else "report.json")
    flags, settings = run_settings(c, args, run_dir)
    if not os.path.exists(report_path):
        return run_dir, report_path, False, "", flags, settings
    same, why = provenance.reusable(run_dir, settings, report_path,
                                    args.max_other_cpus if args.rerun_busy else None)
    return run_dir, report_path, same, why, flags, settings


def run_one(c, repeat, args, out_dir, bin_dir, source):
    """(row, reused): runs combination c's repeat, or reuses it from an earlier sweep when it
    finished with the same settings."""
    name = run_name(c, repeat)
    run_dir, report_path, same, why, flags, settings = finished_run(c, repeat, args, out_dir)
    row = dict(c, repeat=repeat, run_dir=os.path.relpath(run_dir, out_dir))
    single = c["layout"] == SINGLE_PROCESS
    read = single_figures if single else figures
    if os.path.exists(report_path):  # resume: done in an earlier sweep
        if same:
            with open(report_path) as f:
                row.update(read(json.load(f)), status="ok", exit_code=0)
            row.update(provenance.source_columns(run_dir))
            return row, True
        print("sweep: %s %s: running it again" % (name, why), file=sys.stderr)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    started = time.time()
    env = dict(os.environ, BIN_DIR=bin_dir)
    # A run at scale 1/F takes about F times longer.
    timeout = int(args.timeout * max(1.0, c["scale"]))
    if single:
        where = ([os.path.join(SCRIPTS, "netns_hosts.sh"), "exec", "%s-h1" % args.prefix, "--"]
                 if not args.nodes_list else [])
        cmd = where + [os.path.join(bin_dir, "worker")] + flags
        code = 0
    else:
        spec_args = ["--layout", c["layout"], "--workers", str(c["workers"]), "--ps",
                     str(c["ps"]), "--hosts", "per_task" if args.hosts == "per_task" else
                     str(c["hosts"]), "--prefix", args.prefix, "--base_port",
                     str(args.base_port), "--out", run_dir]
        if args.nodes_list:
            spec_args += ["--nodes", ",".join(args.nodes_list)]
        code, out = sh([sys.executable, os.path.join(SCRIPTS, "make_spec.py")] + spec_args, 60)
        spec = os.path.join(run_dir, "spec.json")
        if args.nodes_list:
            cmd = [os.path.join(SCRIPTS, "launch_ssh.sh"), "--run_dir",
                   os.path.join(run_dir, "run"), "--bin_dir", bin_dir]
            cmd += ["--exec", args.launch_exec] if args.launch_exec else []
            cmd += ["--remote_dir", args.remote_dir] if args.remote_dir else []
            cmd += ["--ssh", args.ssh] if args.ssh else []
            cmd += [spec] + [f for f in flags if not f.startswith("--run_dir=")]
        else:
            cmd = [os.path.join(SCRIPTS, "local_cluster.sh"), "--hosts",
                   os.path.join(run_dir, "hosts.json"), spec] + flags
    if code == 0:
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=timeout, env=env)
            code, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            code = 124
            out = (e.stdout if isinstance(e.stdout, str) else "") + "\nsweep: timed out"
    with open(os.path.join(run_dir, "cluster.log"), "w") as f:
        f.write(out)
    provenance.write_record(run_dir, source, settings, started, code)
    row.update(provenance.source_columns(run_dir))
    if code == 0 and os.path.exists(report_path):
        with open(report_path) as f:
            row.update(read(json.load(f)), status="ok", exit_code=0)
    else:
        row.update(status="failed", exit_code=code)
    return row, False


def eta(fresh, fresh_seconds, left, to_run):
    """The time left: the runs still to run (not to reuse) at the mean time of this sweep's
    own runs (reused ones cost nothing and would make it look short)."""
    if left == 0:
        return "none left"
    if fresh == 0:
        return "%d left (%d to run), no run of this sweep yet to time" % (left, to_run)
    return "%d left (%d to run), about %.0f min" % (left, to_run,
                                                    fresh_seconds / fresh * to_run / 60)


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
    key = KEY
    for c in combos:
        mine = [r for r in runs if all(r.get(k, DEFAULTS.get(k)) == c.get(k, DEFAULTS.get(k))
                                       for k in key)]
        good = [r for r in mine if r.get("status") == "ok"]
        row = {k: c.get(k, DEFAULTS.get(k)) for k in key}
        row["status"] = c.get("skip") or ("ok" if good else "failed")
        row["repeats_ok"] = len(good)
        row["repeats_failed"] = len(mine) - len(good)
        for k in NUMERIC:
            row[k] = median(r.get(k) for r in good)
        for k in ("examples_per_sec", "train_seconds"):
            values = [r.get(k) for r in good if isinstance(r.get(k), (int, float))]
            row[k + "_min"] = min(values) if values else None
            row[k + "_max"] = max(values) if values else None
        row.update(provenance.point_columns(good))
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
        if r["layout"] == SINGLE_PROCESS:  # no cluster report: no per-task charts
            continue
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


def write_index(out_dir, results, runs=()):
    """DIR/index.html (the sweep's figures as inline SVG, the results table, then every run
    linked to its own report) and each chart as DIR/plots/NN.svg, for papers and slides. Drawn
    by scripts/fulcrum_report, the renderer of the chiefs' report.html too."""
    ok = [r for r in results if r["status"] == "ok"]
    html, charts = fulcrum_report.render_sweep_page(results, representative_layouts(out_dir, ok),
                                                    runs)
    plots = os.path.join(out_dir, "plots")
    os.makedirs(plots, exist_ok=True)
    for i, chart in enumerate(charts):
        fulcrum_report.write_atomically(os.path.join(plots, "%02d.svg" % (i + 1)), chart.svg)
    fulcrum_report.write_atomically(os.path.join(out_dir, "index.html"), html)


def parse_axes(args):
    """Checks every option; returns the axes' lists, or raises ValueError naming the problem."""
    layouts = csv_list(args.layouts, str, "layouts")
    bad = [x for x in layouts if x not in LAYOUTS]
    if bad:
        raise ValueError("--layouts: unknown %s (known: %s)" % (", ".join(bad), ", ".join(LAYOUTS)))
    axes = {"layout": layouts, "workers": csv_list(args.workers, int, "workers"),
            "ps": csv_list(args.ps, int, "ps"),
            "batch_size": csv_list(args.batch_sizes, int, "batch_sizes"),
            "mode": csv_list(args.modes, str, "modes"), "rate": csv_list(args.rates, str, "rates"),
            "model": csv_list(args.models or args.model, str, "models"),
            "model_width": csv_list(args.widths, float, "widths"),
            "dataset": csv_list(args.datasets, str, "datasets"),
            "epochs": csv_list(args.epochs, float, "epochs") if args.epochs else [0],
            "optimizer": csv_list(args.optimizers, str, "optimizers"),
            "scale": csv_list(args.scales, float, "scales")}
    if any(m not in ("sync", "async") and not (m.startswith("ssp") and m[3:].isdigit())
           for m in axes["mode"]):
        raise ValueError("--modes=%s: expected sync, async and/or sspS (S = staleness, "
                         "e.g. ssp3)" % args.modes)
    for d in axes["dataset"]:
        n = d[6:] if d.startswith(("subset", "repeat")) else None
        if d != "full" and not (n and n.isdigit() and int(n) > 0):
            raise ValueError("--datasets: %r is not full, subsetN or repeatN (N > 0)" % d)
    bad = [o for o in axes["optimizer"] if o not in ("sgd", "momentum", "adam", "adagrad", "rmsprop")]
    if bad:
        raise ValueError("--optimizers: unknown %s (sgd, momentum, adam, adagrad, rmsprop)" %
                         ", ".join(bad))
    if args.steps < 1 or args.repeats < 1 or args.timeout < 1 or args.eval_every < 0:
        raise ValueError("--steps, --repeats and --timeout must be positive")
    if not 0 <= args.target_accuracy <= 1:
        raise ValueError("--target_accuracy=%g: must be in [0, 1]" % args.target_accuracy)
    if args.hosts not in ("packed", "per_task"):
        raise ValueError("--hosts=%s: expected packed or per_task" % args.hosts)
    if min(axes["scale"]) < 1:
        raise ValueError("--scales=%s: a scale F is 1 or more (hosts get 1/F of --cpus and the "
                         "link rate)" % args.scales)
    if (args.host_examples_per_sec is None) != (args.examples_per_cpu is None):
        raise ValueError("--host_examples_per_sec and --examples_per_cpu go together")
    if args.host_examples_per_sec is not None:  # a named compute-to-link ratio
        if args.cpus is not None:
            raise ValueError("give --cpus or --host_examples_per_sec, not both")
        if min(args.host_examples_per_sec, args.examples_per_cpu) <= 0 or "none" in axes["rate"]:
            raise ValueError("--host_examples_per_sec and --examples_per_cpu must be positive, "
                             "and every --rates entry a link rate (the ratio is to the link)")
        args.cpus = args.host_examples_per_sec / args.examples_per_cpu
    if args.cpus is None and axes["scale"] != [1.0]:
        raise ValueError("--scales needs --cpus (the CPU share of a host at scale 1)")
    args.nodes_list = []
    if args.nodes or args.nodes_file:
        if args.nodes and args.nodes_file:
            raise ValueError("give --nodes or --nodes_file, not both")
        if axes["rate"] != ["none"] or axes["scale"] != [1.0] or args.cpus is not None:
            raise ValueError("--nodes runs on real machines: no emulated links or CPU shares "
                             "(leave --rates, --scales and --cpus out)")
        if args.nodes_file:
            try:
                with open(args.nodes_file) as f:
                    args.nodes_list = [ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()]
            except OSError as e:
                raise ValueError("--nodes_file=%s: %s" % (args.nodes_file, e.strerror))
        else:
            args.nodes_list = csv_list(args.nodes, str, "nodes")
    return axes


def combinations(axes, args):
    """Every combination of the axes (dicts over KEY, "skip" naming why where a layout cannot
    take it), then the single-process baselines when asked."""
    combos = []
    names = ["layout", "workers", "ps", "batch_size", "mode", "rate", "model", "model_width",
             "dataset", "epochs", "optimizer", "scale"]
    for values in itertools.product(*(axes[n] for n in names)):
        c = dict(zip(names, values))
        hosts, why = hosts_for(c["layout"], c["workers"], c["ps"], args.hosts == "per_task")
        if why is None and args.nodes_list and hosts > len(args.nodes_list):
            why = "needs %d nodes, --nodes lists %d" % (hosts, len(args.nodes_list))
        c.update(hosts=hosts or 0, cpus=args.cpus or 0, skip=why)
        combos.append(c)
    if args.single_baseline:
        seen = set()
        for c in list(combos):
            b = dict(c, layout=SINGLE_PROCESS, workers=1, ps=0, hosts=1, mode="none", skip=None)
            k = tuple(b[n] for n in KEY)
            if k not in seen:
                seen.add(k)
                combos.append(b)
    return combos


def host_share(args, scale):
    """netns_hosts.sh options for the CPU share at a scale."""
    if args.cpus is None:
        return []
    share = (["--host_examples_per_sec", "%g" % args.host_examples_per_sec,
              "--examples_per_cpu", "%g" % args.examples_per_cpu]
             if args.host_examples_per_sec is not None else ["--cpus", "%g" % args.cpus])
    return share + ["--scale", "%g" % scale, "--cpu_period_us", str(args.cpu_period_us)]


def dry_run(combos, todo, args):
    """Lists every run and an estimate of the sweep's time: the median time of the runs an
    earlier sweep into --out recorded (its runs.csv), or, without one, only the bound
    (runs x --timeout)."""
    for c in combos:
        if c["skip"]:
            print("skip %s: %s" % (run_name(c, 1).rsplit("_r", 1)[0], c["skip"]))
    for c in todo:
        for r in range(1, args.repeats + 1):
            print("run  %s" % run_name(c, r))
    total = len(todo) * args.repeats
    seconds = []
    try:
        with open(os.path.join(args.out, "runs.csv"), newline="") as f:
            seconds = [float(row["train_seconds"]) for row in csv.DictReader(f)
                       if row.get("status") == "ok" and row.get("train_seconds")]
    except (OSError, ValueError, KeyError):
        pass
    if seconds:
        each = sorted(seconds)[len(seconds) // 2] + RUN_OVERHEAD_S
        print("sweep: %d run(s); about %.0f s (%.0f s each: the median training time of %d "
              "earlier run(s) in %s plus %d s to start and end a cluster)" %
              (total, total * each, each, len(seconds), args.out, RUN_OVERHEAD_S))
    else:
        print("sweep: %d run(s); no earlier runs in %s to estimate from: at most %d s "
              "(--timeout each)" % (total, args.out, total * args.timeout))
    return 0


def main():
    args = parse_options(__doc__)
    try:
        axes = parse_axes(args)
    except ValueError as e:
        print("sweep: %s" % e, file=sys.stderr)
        return 2
    if args.dry_run:  # needs neither root nor the binaries
        combos = combinations(axes, args)
        return dry_run(combos, [c for c in combos if not c["skip"]], args)
    if fulcrum_report is None:
        print("sweep: cannot draw the pages (%s): install python3-matplotlib (scripts/setup.sh)"
              " and run Debian's /usr/bin/python3" % RENDERER_ERROR, file=sys.stderr)
        return 2
    if os.geteuid() != 0 and not args.nodes_list:
        print("sweep: the emulated hosts need root (network namespaces); run as root",
              file=sys.stderr)
        return 2
    bin_dir = os.environ.get("BIN_DIR", os.path.join(ROOT, "build", "bin"))
    for b in ("ps", "worker", "chief"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            print("sweep: %s/%s not found: build first" % (bin_dir, b), file=sys.stderr)
            return 2
    combos = combinations(axes, args)
    todo = [c for c in combos if not c["skip"]]
    if args.nodes_list and not todo:
        print("sweep: no combination fits the %d node(s) of --nodes: %s" %
              (len(args.nodes_list), "; ".join(sorted({c["skip"] for c in combos}))),
              file=sys.stderr)
        return 2
    groups = sorted({(c["rate"], c["scale"]) for c in todo})
    if not args.nodes_list:
        # Every set of hosts is checked before the first run (netns_hosts.sh up --check: an
        # impossible CPU share exits 2 naming it), not only when its turn comes.
        for rate, scale in groups:
            hosts = max(c["hosts"] for c in todo if (c["rate"], c["scale"]) == (rate, scale))
            code, out = sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "up", str(hosts), "--rate",
                            rate, "--prefix", args.prefix, "--check"] + host_share(args, scale),
                           60)
            if code != 0:
                print("sweep: %d host(s) at rate %s, scale 1/%g: %s" %
                      (hosts, rate, scale, out.strip()), file=sys.stderr)
                return 2
    os.makedirs(args.out, exist_ok=True)
    total = len(todo) * args.repeats
    print("sweep: %d combination(s) (%d skipped), %d run(s) -> %s" %
          (len(combos), len(combos) - len(todo), total, args.out), file=sys.stderr)
    source = {"commit": provenance.repo_commit(ROOT),
              "binaries": provenance.binaries_hash(bin_dir)}
    print("sweep: commit %s, binaries %s" % (source["commit"], source["binaries"]),
          file=sys.stderr)
    runs, done, fresh, fresh_seconds = [], 0, 0, 0.0
    to_run = sum(1 for c in todo for r in range(1, args.repeats + 1)
                 if not finished_run(c, r, args, args.out)[2])
    for rate, scale in groups:
        group = [c for c in todo if (c["rate"], c["scale"]) == (rate, scale)]
        hosts = max(c["hosts"] for c in group)
        if not args.nodes_list:
            sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "down", "--prefix", args.prefix], 60)
            code, out = sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "up", str(hosts), "--rate",
                            rate, "--prefix", args.prefix] + host_share(args, scale), 120)
            if code != 0:
                print("sweep: cannot make %d host(s) at rate %s, scale 1/%g:\n%s" %
                      (hosts, rate, scale, out), file=sys.stderr)
                if code == 2:
                    return 2
                for c in group:
                    for r in range(1, args.repeats + 1):
                        runs.append(dict(c, repeat=r, status="failed", exit_code=code))
                continue
        try:
            for c in group:
                for r in range(1, args.repeats + 1):
                    begun = time.time()
                    row, reused = run_one(c, r, args, args.out, bin_dir, source)
                    runs.append(row)
                    done += 1
                    if not reused:
                        fresh, fresh_seconds = fresh + 1, fresh_seconds + time.time() - begun
                        to_run = max(0, to_run - 1)
                    print("sweep: [%d/%d] %s: %s%s, %s" %
                          (done, total, run_name(c, r), row["status"],
                           " (from an earlier sweep, commit %s)" % row["commit"] if reused
                           else " in %.0f s" % (time.time() - begun),
                           eta(fresh, fresh_seconds, total - done, to_run)), file=sys.stderr)
                    write_csv(os.path.join(args.out, "runs.csv"), runs, RUN_FIELDS)
        finally:
            if not args.nodes_list:
                sh([os.path.join(SCRIPTS, "netns_hosts.sh"), "down", "--prefix", args.prefix], 60)
    results = summarize(combos, runs)
    fields = (list(KEY) + ["status", "repeats_ok", "repeats_failed"] + NUMERIC + SPREAD +
              ["other_cpus_max", "commits", "binaries"])
    write_csv(os.path.join(args.out, "runs.csv"), runs, RUN_FIELDS)
    for warning in (provenance.mixed_warning(runs, source),
                    provenance.busy_warning(runs, args.max_other_cpus)):
        if warning:
            print(warning, file=sys.stderr)
    write_csv(os.path.join(args.out, "results.csv"), results, fields)
    write_index(args.out, [{f: r.get(f) for f in fields} for r in results], runs)
    failed = sum(1 for r in runs if r.get("status") != "ok")
    print("sweep: done, %d run(s), %d failed; %s" %
          (len(runs), failed, os.path.join(args.out, "results.csv")), file=sys.stderr)
    if failed:  # everything is written, but the sweep is not whole: a caller must see it
        print("sweep: %d run(s) failed (runs.csv's status and exit_code, each run's cluster.log);"
              " the same command again reruns them" % failed, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
