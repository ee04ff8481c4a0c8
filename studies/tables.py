#!/usr/bin/python3
"""The seed studies' tables and plots, from the runs of studies/*/run.sh.

  studies/tables.py wang RESULTS_CSV OUT_DIR     # bench/sweep.py's results.csv
  studies/tables.py hkust SWEEP_DIR OUT_DIR [stn] # a sweep's folder (runs.csv and runs/)
  studies/tables.py cs744 STUDY_DIR OUT_DIR      # studies/cs744/run.sh's folder
  studies/tables.py touchstone RUNS_DIR OUT_DIR  # the touchstone run folders
  studies/tables.py lu STUDY_DIR OUT_DIR         # studies/lu-osu/run.sh's folder
  studies/tables.py in_graph STUDY_DIR OUT_DIR   # studies/wang-et-al/in_graph.sh's folder

Writes OUT_DIR/<study>.csv and SVG plots (Debian's python3-matplotlib), and prints the CSV as
a markdown table. Exit code 2 on a missing input.
"""
import csv
import glob
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from study_records import point_source, write_csv  # noqa: E402



def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def write(path, rows, fields):
    """The CSV, and the same rows as a markdown table on stdout."""
    write_csv(path, rows, fields)
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


def hkust_rows(sweep_dir):
    """Per run and host: model, layout, width, dataset, repeat, CPU, loopback and external
    bytes, loss; the single-process baseline (the worker alone) as its one host."""
    table = []
    for r in csv.DictReader(open(os.path.join(sweep_dir, "runs.csv"))):
        if r["status"] != "ok":
            continue
        run = os.path.join(sweep_dir, r["run_dir"], "run")
        base = {"model": r.get("model"), "layout": r["layout"], "ps": int(r["ps"]),
                "model_width": r["model_width"], "dataset": r["dataset"],
                "repeat": int(r.get("repeat") or 1),
                "examples_per_sec": num(r["examples_per_sec"])}
        if r["layout"] == "single-process":
            s = json.load(open(os.path.join(run, "summary.json")))
            table.append(dict(base, final_loss=num(s.get("final_test_loss",
                                                         s.get("final_train_loss"))),
                              host="h1", cpu_percent=num(s.get("cpu_percent_mean")),
                              loopback_bytes_sent=num(s.get("network_loopback_bytes_sent")),
                              external_bytes_sent=num(s.get("network_external_bytes_sent")),
                              external_bytes_received=num(
                                  s.get("network_external_bytes_received"))))
            continue
        report = json.load(open(os.path.join(run, "report.json")))
        loss = report.get("final_test_loss", report.get("final_train_loss"))
        for h in report.get("hosts", []):
            table.append(dict(base, final_loss=num(loss), host=h.get("host"),
                              cpu_percent=num(h.get("cpu_percent_mean")),
                              loopback_bytes_sent=num(h.get("loopback_bytes_sent")),
                              external_bytes_sent=num(h.get("external_bytes_sent")),
                              external_bytes_received=num(h.get("external_bytes_received"))))
    return table


def hkust(sweep_dir, out, name="hkust"):
    """hkust.csv (a row per run and host) and the external bytes per run, the median over the
    repeats, by layout, one group per model x width x dataset."""
    table = hkust_rows(sweep_dir)
    fields = ["model", "layout", "ps", "model_width", "dataset", "repeat", "examples_per_sec",
              "final_loss", "host", "cpu_percent", "loopback_bytes_sent", "external_bytes_sent",
              "external_bytes_received"]
    write(os.path.join(out, name + ".csv"), table, fields)
    per_run = {}
    for t in table:
        k = (t["layout"], t["ps"], t["model"], t["model_width"], t["dataset"], t["repeat"])
        per_run[k] = per_run.get(k, 0.0) + (t["external_bytes_sent"] or 0.0)
    runs = {}
    for k, v in per_run.items():
        runs.setdefault(k[:5], []).append(v)
    runs = {k: sorted(v)[len(v) // 2] for k, v in runs.items()}
    settings = sorted({k[2:] for k in runs})
    layouts = sorted({k[:2] for k in runs})
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / max(1, len(layouts))
    for i, lay in enumerate(layouts):
        xs = [j + i * width for j in range(len(settings))]
        ax.bar(xs, [runs.get(lay + s, 0) / 1e6 for s in settings], width,
               label="%s, %d ps" % lay)
    ax.set_xticks([j + width * (len(layouts) - 1) / 2 for j in range(len(settings))])
    ax.set_xticklabels(["%s x%s, %s" % s for s in settings], fontsize=7)
    ax.set_ylabel("external bytes sent, all hosts (MB)")
    ax.set_title("Cross-host traffic by layout (sync, 2 workers; median of the repeats)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name + "_external_bytes.svg"))


def touchstone(runs_dir, out):
    keys = ["Job Execution Time", "Total CPU Usage", "Total Memory used",
            "Total bytes sent over network", "Total bytes received over network",
            "final_test_accuracy", "examples_per_sec"]
    table = []
    paths = (glob.glob(os.path.join(runs_dir, "single", "summary.json")) +
             glob.glob(os.path.join(runs_dir, "cluster", "*", "summary.json")))
    for path in sorted(paths):
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
    touchstone_models(runs_dir, out)


# Touchstone's seven keys, its own names.
TOUCHSTONE_KEYS = ["Job Execution Time", "Total CPU Usage", "Total CPU usage per core",
                   "Total Memory used", "Total bytes sent over network",
                   "Total bytes received over network", "System Information"]


def touchstone_models(runs_dir, out):
    """Touchstone's loop: per model run (OUT/models/<model>/summary.json) a JSON of the seven
    keys, OUT/models/<model>.json, and one table of them, touchstone_models.csv (the per-core
    CPU and the system information as JSON text; the model's batch, steps and examples/s
    beside them)."""
    table = []
    for path in sorted(glob.glob(os.path.join(runs_dir, "models", "*", "summary.json"))):
        model = os.path.basename(os.path.dirname(path))
        s = json.load(open(path))
        keys = {k: s.get(k) for k in TOUCHSTONE_KEYS}
        with open(os.path.join(runs_dir, "models", model + ".json"), "w") as f:
            json.dump(keys, f, indent=1)
        row = {"model": model, "batch_size": s.get("batch_size"), "steps": s.get("steps"),
               "examples_per_sec": s.get("examples_per_sec"),
               "source": point_source(runs_dir, "model_" + model)}
        row.update({k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v
                    for k, v in keys.items()})
        table.append(row)
    write(os.path.join(out, "touchstone_models.csv"), table,
          ["model", "batch_size", "steps", "examples_per_sec"] + TOUCHSTONE_KEYS + ["source"])


def in_graph(study_dir, out):
    """Wang et al. §3.4 on CPUs (studies/wang-et-al/in_graph.sh's runs): examples/s per batch
    size of two replicas and of one device, median and spread, and their ratio."""
    groups = {}
    for path in glob.glob(os.path.join(study_dir, "runs", "*", "summary.json")):
        name = os.path.basename(os.path.dirname(path))
        kind, batch, _ = name.rsplit("_", 2)
        groups.setdefault((int(batch[1:]), kind), []).append(
            (json.load(open(path)).get("examples_per_sec"), point_source(study_dir, name)))
    rows = []
    for (batch, kind), runs in sorted(groups.items()):
        xs = [x for x, _ in runs if isinstance(x, (int, float))]
        rows.append({"batch_size": batch, "how": kind, "repeats": len(xs),
                     "sources": "+".join(sorted({src for _, src in runs})),
                     "examples_per_sec": statistics.median(xs) if xs else None,
                     "examples_per_sec_min": min(xs) if xs else None,
                     "examples_per_sec_max": max(xs) if xs else None})
    for r in rows:
        one = [o for o in rows if o["batch_size"] == r["batch_size"] and o["how"] == "one_device"]
        r["vs_one_device"] = (r["examples_per_sec"] / one[0]["examples_per_sec"]
                              if one and one[0]["examples_per_sec"] and r["examples_per_sec"]
                              else None)
    write(os.path.join(out, "in_graph.csv"), rows,
          ["batch_size", "how", "repeats", "sources", "examples_per_sec", "examples_per_sec_min",
           "examples_per_sec_max", "vs_one_device"])


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[1] not in ("wang", "hkust", "cs744",
                                                            "touchstone", "lu", "in_graph"):
        print(__doc__, file=sys.stderr)
        return 2
    study, src, out = sys.argv[1:4]
    if not os.path.exists(src):
        print("tables: %s: not found" % src, file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    if study in ("lu", "cs744"):  # these studies' tables are modules of their own
        module = __import__("tables_" + study)
        getattr(module, study)(src, out)
        return 0
    if study == "hkust" and len(sys.argv) == 5:  # the STN half: hkust_stn.csv
        hkust(src, out, "hkust_" + sys.argv[4])
        return 0
    globals()[study](src, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
