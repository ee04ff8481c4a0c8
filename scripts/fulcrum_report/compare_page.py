"""compare.html: several runs overlaid on one page (scripts/compare_runs.py draws it).

Each run is a cluster run's report.json or a single-mode run's summary.json. Every run keeps
one color on every chart: training loss and throughput per global step (the first worker of
each run), the chief's test accuracy per global step, and a table of each run's settings and
headline figures. Steps, not time, are the common axis: runs of different speeds line up.
A chart whose data no run has says "no data".
"""

import math

from . import values as v
from .charts import Series, color, line_chart
from .html import card, escape, figures, page, table

SETTINGS = ("model", "mode", "num_ps", "num_workers", "batch_size", "optimizer", "learning_rate")
FIGURES = (("final_test_accuracy", "final test accuracy", lambda x: "%.4f" % x),
           ("examples_per_sec", "examples/s", v.fmt_count),
           ("train_seconds", "train time", v.fmt_seconds),
           ("global_step", "global step", v.fmt_count))


class Run:
    """One run to overlay: its label and its report (a cluster run) or summary (single)."""

    def __init__(self, label, data):
        self.label, self.data = label, data if isinstance(data, dict) else {}

    def first_worker(self):
        """The summary whose step series stands for the run: the first worker's, or the
        single-mode summary itself."""
        workers = [w for w in v.array(self.data, "workers") if isinstance(w, dict)]
        workers.sort(key=lambda w: v.num(w, "task_index", 0.0))
        return workers[0] if workers else self.data

    def steps(self):
        return v.dict_at(v.dict_at(self.first_worker(), "series"), "steps")

    def figure(self, key):
        x = v.num(self.data, key)
        if x is None and key == "examples_per_sec":
            x = v.num(self.first_worker(), key)
        return x


def _step_chart(runs, key, title, y_label, y_fmt):
    series = []
    for i, r in enumerate(runs):
        steps = r.steps()
        if v.get(steps, key) is None:
            continue
        series.append(Series(r.label, v.numbers(steps, "global_step"), v.numbers(steps, key),
                             color(i)))
    return line_chart(title, "global step", y_label, series, y_fmt, x_fmt=v.fmt_count)


def _accuracy_chart(runs):
    series = []
    for i, r in enumerate(runs):
        evals = v.array(r.data, "evals")
        xs = [v.num(e, "global_step", math.nan) for e in evals]
        ys = [v.num(e, "test_accuracy", math.nan) for e in evals]
        if evals:
            series.append(Series(r.label, xs, ys, color(i)))
    return line_chart("Test accuracy (the chief's evaluations)", "global step", "test accuracy",
                      series, lambda x: v.short(x, 3), x_fmt=v.fmt_count)


def _table(runs):
    rows = []
    for r in runs:
        cells = [r.label]
        for key in SETTINGS:
            x = v.get(r.data, key)
            cells.append("" if x is None else v.text(x))
        for key, _, fmt in FIGURES:
            x = r.figure(key)
            cells.append("n/a" if x is None else fmt(x))
        rows.append(tuple(cells))
    head = ("run",) + SETTINGS + tuple(name for _, name, _ in FIGURES)
    return "<h2>Runs</h2>" + table(head, rows)


def render_compare_page(runs):
    """runs: [(label, parsed report.json or summary.json)] -> the page's HTML text."""
    runs = [Run(label, data) for label, data in runs]
    charts = [
        ("loss", "Training loss",
         _step_chart(runs, "loss", "Training loss (first worker of each run)", "loss",
                     lambda x: v.short(x, 3))),
        ("rate", "Throughput per step",
         _step_chart(runs, "examples_per_sec", "Throughput per step (first worker of each run)",
                     "examples/s", v.fmt_count)),
        ("accuracy", "Test accuracy", _accuracy_chart(runs))]
    cards = [card(r.label, "n/a" if r.figure("final_test_accuracy") is None
                  else "%.4f" % r.figure("final_test_accuracy")) for r in runs]
    body = ("<h1>Fulcrum: %d runs compared</h1><p class=\"sub\">final test accuracy</p>"
            "<div class=\"cards\">%s</div>" % (len(runs), "".join(cards)))
    return page("Fulcrum: runs compared", body + figures(charts) + _table(runs))
