"""studies/tables.py cs744: the CS744 study's CSVs and plots, from the folder of
studies/cs744/run.sh (OUT/runs/<point>/: alone, t34_*, f610_*, alexnet_*).

Each point's figures come from its report.json (a cluster) or summary.json (the worker
alone); the repeats of a setting become one row: the median and, beside it, the least and
the most (`_min`, `_max`) of every figure. Per-node figures are the mean over the run's hosts
(report.json `hosts`): CPU, peak RSS, and the external interface's rx/tx bytes and packets per
second of the tasks' lives."""
import glob
import json
import os
import re
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from study_records import load_json, point_source, write_csv  # noqa: E402

NAME = re.compile(r"^(t34|f610|alexnet)_(single|cluster2|cluster)_(?:(sync|async)_)?"
                  r"(steps|tta|b\d+)_r(\d+)$")
SETUPS = {"single": "Single (1 ps + 1 worker, 1 host)", "cluster": "Cluster (1 ps + 2 workers, 2 hosts)",
          "cluster2": "Cluster2 (1 ps + 3 workers, 3 hosts)"}


def _mean(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.mean(xs) if xs else None


def run_figures(run_dir):
    """The figures of one cluster run, or None when it left no report."""
    r = load_json(os.path.join(run_dir, "report.json"))
    if r is None:
        return None
    hosts = r.get("hosts", [])
    tasks = r.get("tasks", [])
    life = {t.get("task"): t.get("job_execution_seconds") for t in tasks}
    w0 = load_json(os.path.join(run_dir, "worker-0", "summary.json")) or {}
    row = {"time_to_target_accuracy_seconds": r.get("time_to_target_accuracy_seconds"),
           "global_step": r.get("global_step"), "final_test_accuracy": r.get("final_test_accuracy"),
           "final_train_loss": w0.get("final_train_loss"),
           "examples_per_sec": r.get("workers_examples_per_sec"),
           "s_per_batch": (w0.get("step_time_p50_ms") or 0) / 1000 or None,
           "train_seconds": r.get("train_seconds"),
           "cpu_percent_all_tasks": r.get("cluster", {}).get("cpu_percent_mean"),
           "max_cpu_percent_of_a_task": max((t.get("cpu_percent_max") or 0 for t in tasks),
                                            default=None),
           "peak_rss_mb_all_tasks": (r.get("cluster", {}).get("peak_rss_bytes") or 0) / 1e6}
    per_node = {"cpu": [], "rss": [], "rx": [], "tx": [], "rxp": [], "txp": []}
    for h in hosts:
        seconds = max((life.get(t) or 0 for t in h.get("tasks", [])), default=0) or None
        ext = [i for i in h.get("interfaces", []) if not i.get("loopback")]
        per_node["cpu"].append(h.get("cpu_percent_mean"))
        per_node["rss"].append((h.get("peak_rss_bytes") or 0) / 1e6)
        if seconds:
            per_node["rx"].append((h.get("external_bytes_received") or 0) / 1e6 / seconds)
            per_node["tx"].append((h.get("external_bytes_sent") or 0) / 1e6 / seconds)
            per_node["rxp"].append(sum(i.get("rx_packets", 0) for i in ext) / seconds)
            per_node["txp"].append(sum(i.get("tx_packets", 0) for i in ext) / seconds)
    row.update(node_cpu_percent=_mean(per_node["cpu"]), node_peak_rss_mb=_mean(per_node["rss"]),
               node_rx_mb_per_s=_mean(per_node["rx"]), node_tx_mb_per_s=_mean(per_node["tx"]),
               node_rx_packets_per_s=_mean(per_node["rxp"]),
               node_tx_packets_per_s=_mean(per_node["txp"]))
    return row


FIGURES = ["time_to_target_accuracy_seconds", "global_step", "final_test_accuracy",
           "final_train_loss", "examples_per_sec", "s_per_batch", "train_seconds",
           "cpu_percent_all_tasks", "max_cpu_percent_of_a_task", "peak_rss_mb_all_tasks",
           "node_cpu_percent", "node_peak_rss_mb", "node_rx_mb_per_s", "node_tx_mb_per_s",
           "node_rx_packets_per_s", "node_tx_packets_per_s"]


def grouped(runs_dir):
    """{(part, setup, mode, setting): [figures of each repeat]}."""
    groups = {}
    for run_dir in sorted(glob.glob(os.path.join(runs_dir, "runs", "*"))):
        m = NAME.match(os.path.basename(run_dir))
        if not m or not os.path.isdir(run_dir):
            continue
        part, setup, mode, setting = m.group(1), m.group(2), m.group(3) or "sync", m.group(4)
        figures = run_figures(run_dir)
        if figures is not None:
            figures["source"] = point_source(runs_dir, os.path.basename(run_dir))
            groups.setdefault((part, setup, mode, setting), []).append(figures)
    return groups


def summary_rows(groups, part):
    rows = []
    order = {"single": 0, "cluster": 1, "cluster2": 2}
    for (p, setup, mode, setting), runs in sorted(
            groups.items(), key=lambda kv: (kv[0][0], kv[0][3].lstrip("b").zfill(6),
                                            order[kv[0][1]], kv[0][2])):
        if p != part:
            continue
        row = {"setup": setup, "mode": mode,
               "batch_size" if setting.startswith("b") else "run": setting.lstrip("b"),
               "repeats": len(runs),
               "sources": "+".join(sorted({r["source"] for r in runs}))}
        for k in FIGURES:
            values = [r[k] for r in runs if isinstance(r.get(k), (int, float))]
            row[k] = statistics.median(values) if values else None
            row[k + "_min"] = min(values) if values else None
            row[k + "_max"] = max(values) if values else None
        rows.append(row)
    return rows


def _write(path, rows, first):
    write_csv(path, rows, first + ["repeats"] +
              [k + s for k in FIGURES for s in ("", "_min", "_max")] + ["sources"])


def batch_plot(rows, out, name, title, panels, setups):
    """One panel per figure against the batch size, a line per set-up and mode (median, the
    least and the most of the repeats as error bars), into OUT/NAME."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6))
    for ax, (key, label) in zip(axes, panels):
        for setup in setups:
            for mode, style in (("sync", "o-"), ("async", "s--")):
                mine = [r for r in rows if r["setup"] == setup and r["mode"] == mode]
                if not mine:
                    continue
                xs = [int(r["batch_size"]) for r in mine]
                ys = [r[key] or 0 for r in mine]
                err = [[y - (r[key + "_min"] or y) for y, r in zip(ys, mine)],
                       [(r[key + "_max"] or y) - y for y, r in zip(ys, mine)]]
                ax.errorbar(xs, ys, yerr=err, fmt=style, capsize=2, label="%s %s" % (setup, mode))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size per worker")
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name))


def figs6_10_plot(rows, out):
    batch_plot(rows, out, "cs744_figs6_10.svg",
               "CS744 Figs. 6-10: logreg, 1 epoch per worker (median, min-max)",
               [("train_seconds", "runtime (s)"), ("node_peak_rss_mb", "peak RSS per node (MB)"),
                ("max_cpu_percent_of_a_task", "max CPU load of a task (% of a core)"),
                ("node_rx_mb_per_s", "rx MB/s per node"), ("node_tx_mb_per_s", "tx MB/s per node")],
               ("cluster", "cluster2"))


def alexnet_plot(rows, out):
    batch_plot(rows, out, "cs744_alexnet.svg",
               "CS744 Tables 5-6: AlexNet, sync, 50 steps (median, min-max)",
               [("examples_per_sec", "examples/s (all workers)"), ("s_per_batch", "s per batch"),
                ("node_cpu_percent", "CPU per node (% of a core)"),
                ("node_peak_rss_mb", "peak RSS per node (MB)"),
                ("node_rx_packets_per_s", "rx packets/s per node")],
               ("single", "cluster", "cluster2"))


def tta_plot(rows, out):
    shown = [r for r in rows if r.get("run") == "tta" and r["time_to_target_accuracy_seconds"]]
    if not shown:
        return
    fig, ax = plt.subplots(figsize=(8, 4))
    ys = [r["time_to_target_accuracy_seconds"] for r in shown]
    err = [[y - r["time_to_target_accuracy_seconds_min"] for y, r in zip(ys, shown)],
           [r["time_to_target_accuracy_seconds_max"] - y for y, r in zip(ys, shown)]]
    ax.barh(["%s %s" % (r["setup"], r["mode"]) for r in shown], ys, xerr=err, capsize=3,
            color=["tab:orange" if r["mode"] == "async" else "tab:blue" for r in shown])
    ax.set_xlabel("seconds to test accuracy 0.80 (median, min-max; orange: async)")
    ax.set_title("CS744 Tables 3-4: time to accuracy, logreg")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "cs744_time_to_accuracy.svg"))


def cs744(runs_dir, out):
    groups = grouped(runs_dir)
    t34 = summary_rows(groups, "t34")
    _write(os.path.join(out, "cs744_tables34.csv"), t34, ["setup", "mode", "run"])
    tta_plot(t34, out)
    f610 = summary_rows(groups, "f610")
    _write(os.path.join(out, "cs744_figs6_10.csv"), f610, ["setup", "mode", "batch_size"])
    if f610:
        figs6_10_plot(f610, out)
    alex = summary_rows(groups, "alexnet")
    _write(os.path.join(out, "cs744_alexnet.csv"), alex, ["setup", "mode", "batch_size"])
    if alex:
        alexnet_plot(alex, out)
    alone = load_json(os.path.join(runs_dir, "runs", "alone", "summary.json"))
    if alone:
        with open(os.path.join(out, "cs744_alone.json"), "w") as f:
            json.dump({k: alone.get(k) for k in ("final_test_accuracy", "examples_per_sec",
                                                 "train_seconds", "cpu_percent_mean",
                                                 "peak_rss_bytes", "steps")}, f, indent=1)
    print("cs744: %d + %d + %d rows -> %s" % (len(t34), len(f610), len(alex), out))
