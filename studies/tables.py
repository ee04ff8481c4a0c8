#!/usr/bin/python3
"""The seed studies' tables and plots, from the runs of studies/*/run.sh.

  studies/tables.py wang RESULTS_CSV OUT_DIR     # bench/sweep.py's results.csv
  studies/tables.py hkust SWEEP_DIR OUT_DIR      # a sweep's folder (results.csv and runs/)
  studies/tables.py cs744 RUNS_DIR OUT_DIR       # the cs744 run folders
  studies/tables.py touchstone RUNS_DIR OUT_DIR  # the touchstone run folders

Writes OUT_DIR/<study>.csv and SVG plots (Debian's python3-matplotlib), and prints the CSV as
a markdown table. Exit code 2 on a missing input.
"""
import csv
import glob
import json
import os
import sys

import importlib.util

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# bench/sweep.py's readers of a run's report.json and summary.json.
_spec = importlib.util.spec_from_file_location(
    "sweep", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench",
                          "sweep.py"))
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def write(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    print("| " + " | ".join(fields) + " |")
    print("|" + " --- |" * len(fields))
    for r in rows:
        print("| " + " | ".join(fmt(r.get(k)) for k in fields) + " |")


def fmt(x):
    if isinstance(x, float):
        return "%.3g" % x if abs(x) < 10 else "%.0f" % x
    return "" if x is None else str(x)


def wang_series(rows, rate):
    """{(ps, batch): rows by workers} of one link rate."""
    series = {}
    for r in rows:
        if r["rate"] == rate:
            series.setdefault((int(r["ps"]), int(r["batch_size"])), []).append(r)
    return {k: sorted(v, key=lambda r: int(r["workers"])) for k, v in sorted(series.items())}


def wang(results_csv, out):
    """Examples/s against workers, a panel per link rate and a line per (ps, batch), the
    medians with their spread (min to max over the repeats) as error bars; wang.csv beside."""
    rows = [r for r in csv.DictReader(open(results_csv)) if r["status"] == "ok"]
    table = []
    rates = [x for x in ("1gbit", "10gbit") if any(r["rate"] == x for r in rows)] or ["1gbit"]
    fig, axes = plt.subplots(1, len(rates), figsize=(5 * len(rates), 4), squeeze=False)
    for ax, rate in zip(axes[0], rates):
        for (n_ps, batch), mine in wang_series(rows, rate).items():
            base = num(mine[0]["examples_per_sec"]) / int(mine[0]["workers"])
            xs = [int(r["workers"]) for r in mine]
            ys = [num(r["examples_per_sec"]) for r in mine]
            low = [y - (num(r.get("examples_per_sec_min")) or y) for y, r in zip(ys, mine)]
            high = [(num(r.get("examples_per_sec_max")) or y) - y for y, r in zip(ys, mine)]
            line = ax.errorbar(xs, ys, yerr=[low, high], fmt="o-" if n_ps == 1 else "s-",
                               capsize=3, label="%d ps, batch %d" % (n_ps, batch))
            if n_ps == 1:
                ax.plot(xs, [base * x for x in xs], "--", color=line[0].get_color(), alpha=0.5,
                        label="ideal linear, batch %d" % batch)
            for r in mine:
                w, ex = int(r["workers"]), num(r["examples_per_sec"])
                table.append({"rate": rate, "scale": r["scale"], "cpus_at_scale_1": r["cpus"],
                              "ps": n_ps, "workers": w, "batch_size": batch,
                              "examples_per_sec": ex,
                              "examples_per_sec_min": num(r.get("examples_per_sec_min")),
                              "examples_per_sec_max": num(r.get("examples_per_sec_max")),
                              "repeats": r.get("repeats_ok"),
                              "speedup": ex / base if base else None,
                              "efficiency": ex / (base * w) if base else None,
                              "external_bytes_sent": num(r["external_bytes_sent"]),
                              "commits": r.get("commits", "")})
        scales = sorted({r["scale"] for r in rows if r["rate"] == rate})
        ax.set_title("%s links (emulated at scale 1/%s)" % (rate.replace("gbit", " Gbit/s"),
                                                           ", 1/".join(scales) or "?"))
        ax.set_xlabel("workers")
        ax.set_ylabel("examples/s (all workers; median, min-max)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle("cifar10_cnn, sync, PS-W-W, a host per task")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "wang_throughput.svg"))
    write(os.path.join(out, "wang.csv"), table,
          ["rate", "scale", "cpus_at_scale_1", "ps", "workers", "batch_size", "examples_per_sec",
           "examples_per_sec_min", "examples_per_sec_max", "repeats", "speedup", "efficiency",
           "external_bytes_sent", "commits"])


def hkust(sweep_dir, out):
    """Per run and host: layout, width, dataset, CPU, loopback and external bytes, loss."""
    table = []
    for r in csv.DictReader(open(os.path.join(sweep_dir, "runs.csv"))):
        if r["status"] != "ok":
            continue
        report = json.load(open(os.path.join(sweep_dir, r["run_dir"], "run", "report.json")))
        loss = report.get("final_test_loss", report.get("final_train_loss"))
        for h in report.get("hosts", []):
            table.append({"layout": r["layout"], "ps": int(r["ps"]), "model_width": r["model_width"],
                          "dataset": r["dataset"], "examples_per_sec": num(r["examples_per_sec"]),
                          "final_loss": num(loss), "host": h.get("host"),
                          "cpu_percent": num(h.get("cpu_percent_mean")),
                          "loopback_bytes_sent": num(h.get("loopback_bytes_sent")),
                          "external_bytes_sent": num(h.get("external_bytes_sent")),
                          "external_bytes_received": num(h.get("external_bytes_received"))})
    fields = ["layout", "ps", "model_width", "dataset", "examples_per_sec", "final_loss", "host",
              "cpu_percent", "loopback_bytes_sent", "external_bytes_sent",
              "external_bytes_received"]
    write(os.path.join(out, "hkust.csv"), table, fields)
    # External bytes per run (all hosts), by layout, one group per width x dataset.
    runs = {}
    for t in table:
        k = (t["layout"], t["ps"], t["model_width"], t["dataset"])
        runs[k] = runs.get(k, 0.0) + (t["external_bytes_sent"] or 0.0)
    settings = sorted({k[2:] for k in runs})
    layouts = sorted({k[:2] for k in runs})
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / max(1, len(layouts))
    for i, lay in enumerate(layouts):
        xs = [j + i * width for j in range(len(settings))]
        ax.bar(xs, [runs.get(lay + s, 0) / 1e6 for s in settings], width,
               label="%s, %d ps" % lay)
    ax.set_xticks([j + width * (len(layouts) - 1) / 2 for j in range(len(settings))])
    ax.set_xticklabels(["width %s, %s" % s for s in settings])
    ax.set_ylabel("external bytes sent, all hosts (MB)")
    ax.set_title("Cross-host traffic by layout (autoencoder, sync, 2 workers)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "hkust_external_bytes.svg"))


def cs744(runs_dir, out):
    # A cluster's report.json and a lone worker's summary.json, read as bench/sweep.py reads
    # its runs (a lone worker writes a report.json too: its summary.json is the row).
    table = []
    for file, mode, read in (("report.json", None, sweep.figures),
                             ("summary.json", "single-process", sweep.single_figures)):
        for path in sorted(glob.glob(os.path.join(runs_dir, "*", file))):
            folder = os.path.dirname(path)
            if file == "report.json" and os.path.exists(os.path.join(folder, "summary.json")):
                continue
            name = os.path.basename(folder)
            r = json.load(open(path))
            figures = read(r)
            row = {k: num(v) for k, v in figures.items()}
            row.update(run=name, mode=mode or r.get("mode") or name.rsplit("-", 1)[-1],
                       stop_reason=r.get("stop_reason"), global_step=figures["global_step"])
            table.append(row)
    fields = ["run", "mode", "stop_reason", "time_to_target_accuracy_seconds", "global_step",
              "final_test_accuracy", "examples_per_sec", "train_seconds", "cpu_percent_mean",
              "peak_rss_bytes", "external_bytes_sent"]
    write(os.path.join(out, "cs744.csv"), table, fields)
    shown = [t for t in table if t["time_to_target_accuracy_seconds"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh([t["run"] for t in shown], [t["time_to_target_accuracy_seconds"] for t in shown],
            color=["tab:orange" if t["mode"] == "async" else "tab:blue" for t in shown])
    ax.set_xlabel("seconds to the target test accuracy (orange: async, blue: sync)")
    ax.set_title("CS744: time to accuracy, logreg")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "cs744_time_to_accuracy.svg"))


def touchstone(runs_dir, out):
    keys = ["Job Execution Time", "Total CPU Usage", "Total Memory used",
            "Total bytes sent over network", "Total bytes received over network",
            "final_test_accuracy", "examples_per_sec"]
    table = []
    for path in sorted(glob.glob(os.path.join(runs_dir, "**", "summary.json"), recursive=True)):
        s = json.load(open(path))
        row = {"run": os.path.relpath(os.path.dirname(path), runs_dir)}
        row.update({k: s.get(k) for k in keys})
        table.append(row)
    write(os.path.join(out, "touchstone.csv"), table, ["run"] + keys)
    fig, (cpu, mem) = plt.subplots(1, 2, figsize=(10, 3.5))
    names = [t["run"] for t in table]
    cpu.barh(names, [num(t["Total CPU Usage"]) or 0 for t in table])
    cpu.set_xlabel("Total CPU Usage (% of a core)")
    mem.barh(names, [(num(t["Total Memory used"]) or 0) / 1e6 for t in table])
    mem.set_xlabel("Total Memory used (MB)")
    mem.set_yticklabels([])
    fig.suptitle("Touchstone's keys per task: logreg, SGD 0.01, batch 256, 1000 steps")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "touchstone_cpu_memory.svg"))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("wang", "hkust", "cs744", "touchstone"):
        print(__doc__, file=sys.stderr)
        return 2
    study, src, out = sys.argv[1:]
    if not os.path.exists(src):
        print("tables: %s: not found" % src, file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    globals()[study](src, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
