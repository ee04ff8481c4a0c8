"""index.html of a sweep (bench/sweep.py): its figures per combination, then the table.

Charts: examples/s vs workers with the ideal-linear line, loopback vs cross-host bytes, CPU,
peak RSS, training time and (when measured) time to target accuracy per combination; from
each layout's representative run: CPU and peak RSS per task, bytes per host, worker 0's loss
vs global step and vs time for sync and async. Same chart code as the run page (charts.py).
"""

import sys
import traceback

from . import values as v
from .charts import Bar, Series, bar_chart, color, line_chart
from .html import escape, fallback_page, figures, page, table


# The sweep's other axes (bench/sweep.py); a label names those that differ between rows.
_MORE_AXES = (("model", "%s"), ("model_width", "x%s"), ("dataset", "%s"), ("epochs", "e%s"),
              ("optimizer", "%s"), ("scale", "1/%s"))


def _varying(rows):
    return [(k, f) for k, f in _MORE_AXES if len({str(r.get(k)) for r in rows}) > 1]


def _more(r, axes):
    return "".join(" " + f % r.get(k) for k, f in axes)


def _label(r, axes=()):
    return "%s w%s ps%s b%s %s %s%s" % (r.get("layout"), r.get("workers"), r.get("ps"),
                                        r.get("batch_size"), r.get("mode"), r.get("rate"),
                                        _more(r, axes))


def _scaling_chart(ok):
    """Examples/s against workers per group of the other settings, dashed: ideal linear."""
    axes = _varying(ok)
    groups = {}
    for r in ok:
        key = tuple(str(r.get(k)) for k in ("layout", "ps", "batch_size", "mode", "rate"))
        groups.setdefault(key + (_more(r, axes),), []).append(r)
    series = []
    for g, (key, rows) in enumerate(sorted(groups.items())):
        rows = sorted(rows, key=lambda r: v.num(r, "workers", 0.0))
        name = "%s %sps b%s %s %s%s" % key
        xs = [v.num(r, "workers", float("nan")) for r in rows]
        series.append(Series(name, xs, [v.num(r, "examples_per_sec", float("nan"))
                                        for r in rows], color(g)))
        base_rate, base_workers = v.num(rows[0], "examples_per_sec"), v.num(rows[0], "workers")
        if len(rows) > 1 and base_rate and base_workers:
            per = base_rate / base_workers
            series.append(Series(name + " ideal", xs, [per * x for x in xs], color(g), True))
    return line_chart("Examples/s vs workers (dashed: ideal linear)", "workers", "examples/s",
                      series, v.fmt_count, x_integer=True)


def _per_combination(ok):
    axes = _varying(ok)

    def bars(keys):
        return [Bar(_label(r, axes), [v.num(r, k) for k in keys]) for r in ok]

    charts = [
        ("Network bytes sent: same host (lo) vs across hosts", lambda: bar_chart(
            "Network bytes sent: same host (lo) vs across hosts", ["loopback", "external"],
            bars(["loopback_bytes_sent", "external_bytes_sent"]), v.axis_bytes)),
        ("Cluster CPU", lambda: bar_chart(
            "Cluster CPU (sum of task means, 100% = one core)", ["CPU"],
            bars(["cpu_percent_mean"]), v.axis_pct)),
        ("Peak RSS, all tasks", lambda: bar_chart(
            "Peak RSS, all tasks", ["RSS"], bars(["peak_rss_bytes"]), v.axis_bytes)),
        ("Training time", lambda: bar_chart(
            "Training time", ["train"], bars(["train_seconds"]), v.axis_seconds)),
    ]
    if any(v.num(r, "time_to_target_accuracy_seconds") is not None for r in ok):
        charts.append(("Time to target accuracy", lambda: bar_chart(
            "Time to target accuracy", ["time"], bars(["time_to_target_accuracy_seconds"]),
            v.axis_seconds)))
    return charts


def _representative_charts(layouts):
    """Per task and per host bars, and loss curves, from each layout's representative run.

    layouts: [{"layout", "workers", "ps", "mode", "reports": {mode: report dict or None}}].
    """
    tasks, hosts, by_step, by_time = [], [], [], []
    for g, lay in enumerate(layouts):
        reports = v.dict_at(lay, "reports") or {}
        tag = "%s w%s ps%s %s" % (lay.get("layout"), lay.get("workers"), lay.get("ps"),
                                  lay.get("mode"))
        own = v.dict_at(reports, lay.get("mode"))
        for t in v.array(own, "tasks"):
            tasks.append(("%s %s@%s" % (tag, v.string(t, "task"), v.string(t, "host")),
                          v.num(t, "cpu_percent_mean"), v.num(t, "peak_rss_bytes")))
        for h in v.array(own, "hosts"):
            hosts.append(Bar("%s %s" % (tag, v.string(h, "host")),
                             [v.num(h, k) for k in ("loopback_bytes_sent", "external_bytes_sent",
                                                    "external_bytes_received")]))
        for mode, dashed in (("sync", False), ("async", True)):
            workers = v.array(v.dict_at(reports, mode), "workers")
            first = workers[0] if workers else None
            steps = v.dict_at(v.dict_at(first, "series"), "steps")
            if steps is None:
                continue
            name = "%s w%s %s" % (lay.get("layout"), lay.get("workers"), mode)
            loss, t = v.numbers(steps, "loss"), v.numbers(steps, "unix_s")
            by_step.append(Series(name, v.numbers(steps, "global_step"), loss, color(g), dashed))
            t0 = t[0] if t else 0.0
            by_time.append(Series(name, [x - t0 for x in t], loss, color(g), dashed))
    return [
        ("CPU per task", lambda: bar_chart(
            "CPU per task (mean, 100% = one core), most workers per layout", ["CPU"],
            [Bar(n, [c]) for n, c, _ in tasks], v.axis_pct)),
        ("Peak RSS per task", lambda: bar_chart(
            "Peak RSS per task", ["RSS"], [Bar(n, [m]) for n, _, m in tasks], v.axis_bytes)),
        ("Bytes per host", lambda: bar_chart(
            "Per host: loopback out, external out, external in", ["lo out", "ext out", "ext in"],
            hosts, v.axis_bytes)),
        ("Loss vs global step", lambda: line_chart(
            "Training loss (worker 0) vs global step: sync solid, async dashed", "global step",
            "training loss", by_step, lambda x: v.short(x, 3), x_fmt=v.fmt_count)),
        ("Loss vs time", lambda: line_chart(
            "Training loss (worker 0) vs time: sync solid, async dashed", "time since start (s)",
            "training loss", by_time, lambda x: v.short(x, 3))),
    ]


def _cell(field, x):
    """A results cell for people: bytes, seconds, percentages and rates in their units."""
    if x is None:
        return ""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return v.text(x)
    if "bytes" in field:
        return v.fmt_bytes(x)
    if "seconds" in field:
        return v.fmt_seconds(x)
    if "percent" in field:
        return v.fmt_pct(x)
    if "per_sec" in field or field in ("global_step", "batch_size"):
        return v.fmt_count(x)
    if "accuracy" in field:
        return "%.4f" % x
    return "%.4g" % x if isinstance(x, float) else str(x)


def _runs_table(runs):
    """One row per run, its name linking to its own report.html (runs/NAME/run/)."""
    if not runs:
        return ""
    out = ["<h2>Runs</h2><table><tr><th>run</th><th>repeat</th><th>status</th>"
           "<th>examples/s (workers)</th></tr>"]
    for r in runs:
        run_dir = v.string(r, "run_dir", "")
        name = escape(run_dir.split("/")[-1] or "?")
        report = "report.html" if v.num(r, "workers") else "summary.json"
        link = ('<a href="%s/run/%s">%s</a>' % (escape(run_dir), report, name)
                if run_dir.startswith("runs/") and ".." not in run_dir else name)
        rate = v.num(r, "examples_per_sec")
        out.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
            link, escape(v.text(r.get("repeat"))), escape(v.string(r, "status", "?")),
            "" if rate is None else escape(v.fmt_count(rate))))
    out.append("</table>")
    return "".join(out)


def _draw(title, draw):
    try:
        return title, draw()
    except Exception as e:  # noqa: BLE001 - one bad chart never costs the page
        print("sweep page: chart '%s' not drawn: %s" % (title, e), file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return title, "%s: %s" % (type(e).__name__, e)


def render_sweep_page(results, layouts, runs=()):
    """(HTML text, [Chart]) of a sweep: results are the rows of results.csv (dicts, numbers
    or None), layouts as _representative_charts takes them, runs the rows of runs.csv (each
    linked to its report). The Charts are the drawn ones, in page order, for a file each."""
    try:
        ok = [r for r in results if isinstance(r, dict) and r.get("status") == "ok"]
        specs = ([("Examples/s vs workers", lambda: _scaling_chart(ok))] + _per_combination(ok) +
                 _representative_charts(layouts))
        drawn = [_draw(title, draw) for title, draw in specs]
        numbered = [("c%d" % (i + 1), title, chart) for i, (title, chart) in enumerate(drawn)]
        fields = list(results[0].keys()) if results else []
        body = ("<h1>Fulcrum sweep</h1>%s<h2>Results (medians over repeats)</h2>%s%s"
                % (figures(numbered),
                   table(fields, [[_cell(f, r.get(f)) for f in fields] for r in results]),
                   _runs_table([r for r in runs if isinstance(r, dict)])))
        charts = [c for _, c in drawn if c is not None and not isinstance(c, str)]
        return page("Fulcrum sweep", body), charts
    except Exception as e:  # noqa: BLE001 - the sweep still gets a page
        traceback.print_exc(file=sys.stderr)
        return fallback_page("%s: %s" % (type(e).__name__, e)), []
