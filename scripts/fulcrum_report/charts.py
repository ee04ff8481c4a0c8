"""The two chart kinds every page uses, drawn by matplotlib and returned as SVG.

line_chart: one line per named series against a numeric x, ticks in the y unit, legend below
the plot (never over the data). bar_chart: horizontal stacked bars, one row per bar, a note
after each bar. Both return a Chart, or None when there is nothing to draw. Text in an SVG is
kept as <text> (svg.fonttype none), so the page is searchable and small; matplotlib escapes it.
"""

import io
import math
import re
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # no display; must precede any pyplot-using import elsewhere
from matplotlib import ticker  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from .html import escape  # noqa: E402

matplotlib.rcParams.update({
    "svg.fonttype": "none",      # <text>, not glyph paths
    "text.parse_math": False,    # a "$" in a task name is text, not TeX
    "text.usetex": False,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,      # grid lines behind bars and lines
    "grid.color": "#e6e6e6",
    "legend.fontsize": 8,
    "legend.frameon": False,
})

# Tableau 10: distinguishable, and still readable for the common color-vision deficiencies.
COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
          "#ff9da7", "#9c755f", "#bab0ac")
WIDTH_IN = 6.4  # inches; 72 pt each


def color(i):
    return COLORS[i % len(COLORS)]


@dataclass
class Series:
    name: str
    x: list
    y: list
    color: str = ""
    dashed: bool = False


@dataclass
class Bar:
    label: str
    parts: list            # stacked left to right
    note: str = ""         # shown after the bar; empty: the total in the chart's format


@dataclass
class Chart:
    title: str
    svg: str               # a standalone SVG document (for a file of its own)

    def inline(self, chart_id):
        """The SVG for inlining in HTML: no XML prolog, ids unique per chart, a <title>."""
        return inline_svg(self.svg, chart_id, self.title)


def _legend_label(name):
    # matplotlib leaves labels starting with "_" out of the legend.
    return "\u200b" + name if name.startswith("_") else name


def _plottable(v):
    # Beyond 1e300 no measurement lies; such values would overflow the axis arithmetic.
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and
            abs(v) < 1e300)


def _finite_pairs(s):
    """(x, y) per point; a point with a missing, non-numeric or absurd value is (nan, nan),
    which matplotlib draws as a gap."""
    pairs = []
    for x, y in zip(s.x, s.y):
        ok = _plottable(x) and _plottable(y)
        pairs.append((float(x), float(y)) if ok else (math.nan, math.nan))
    return pairs


def _formatter(fmt):
    return ticker.FuncFormatter(lambda v, _pos: fmt(v))


def _finish(fig, ax, title, note, pad=6):
    ax.set_title(title, pad=pad + (10 if note else 0))
    if note:
        ax.text(0.5, 1.01, note, transform=ax.transAxes, ha="center", va="bottom",
                fontsize=8, color="#666666")
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", pad_inches=0.08,
                metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    return out.getvalue()


def line_chart(title, x_label, y_label, series, y_fmt, x_fmt=None, note="", y2=None,
               x_integer=False):
    """A line chart, or None when no series has a finite point.

    series: [Series]; y_fmt/x_fmt: value -> tick text with its unit; x_integer: ticks only
    at whole numbers (worker counts). y2: optional
    (label, [Series], fmt) drawn against a second y axis on the right (e.g. loss beside
    accuracy). Sparse series (up to 30 points) get a marker per point, so one point shows.
    """
    groups = [(series, y_fmt)] + ([(y2[1], y2[2])] if y2 else [])
    drawable = [s for g, _ in groups for s in g
                if any(math.isfinite(p[0]) for p in _finite_pairs(s))]
    if not drawable:
        return None
    fig = Figure(figsize=(WIDTH_IN, 3.4))
    ax = fig.add_subplot()
    axes = [ax] + ([ax.twinx()] if y2 else [])
    handles = []
    for k, (a, (group, fmt)) in enumerate(zip(axes, groups)):
        for i, s in enumerate(group):
            pairs = _finite_pairs(s)
            xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
            n = sum(1 for p in pairs if math.isfinite(p[0]))
            if n == 0:
                continue  # nothing to draw: no legend entry either
            (h,) = a.plot(xs, ys, color=s.color or color(i + k * len(groups[0][0])),
                          linestyle="--" if s.dashed else "-", linewidth=1.5,
                          marker="o" if n <= 30 else None, markersize=3,
                          label=_legend_label(s.name))
            handles.append(h)
        a.yaxis.set_major_formatter(_formatter(fmt))
        a.yaxis.set_major_locator(ticker.MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
        if a is not ax:
            a.grid(False)
            a.spines["right"].set_visible(True)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    if y2:
        axes[1].set_ylabel(y2[0])
    if x_fmt:
        ax.xaxis.set_major_formatter(_formatter(x_fmt))
    if x_integer:
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    for a, (group, _) in zip(axes, groups):
        ys = [p[1] for s in group for p in _finite_pairs(s) if math.isfinite(p[1])]
        if ys and min(ys) >= 0:  # rates, bytes, CPU: the axis starts at 0
            a.set_ylim(bottom=0)
    # As many columns as the longest name leaves room for, at most 3.
    longest = max(len(h.get_label()) for h in handles)
    ncol = max(1, min(len(handles), 3, 72 // max(longest + 6, 1)))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol)
    return Chart(title, _finish(fig, ax, title, note))


def bar_chart(title, part_names, bars, fmt, x_label=""):
    """Horizontal stacked bars (top to bottom in list order), or None when all are empty.

    Non-finite and negative parts count as 0. The legend names the parts when there are two
    or more; each bar is followed by its note (or its total in fmt).
    """
    def clean(v):
        return float(v) if _plottable(v) and v > 0 else 0.0

    rows = [(b.label, [clean(v) for v in b.parts], b.note) for b in bars]
    max_total = max([sum(parts) for _, parts, _ in rows] + [0.0])
    if not rows or max_total <= 0:
        return None
    fig = Figure(figsize=(WIDTH_IN, 1.1 + 0.28 * len(rows) + (0.25 if len(part_names) > 1 else 0)))
    ax = fig.add_subplot()
    ys = list(range(len(rows)))
    left = [0.0] * len(rows)
    for i, name in enumerate(part_names):
        widths = [parts[i] if i < len(parts) else 0.0 for _, parts, _ in rows]
        ax.barh(ys, widths, left=left, height=0.7, color=color(i), label=_legend_label(name))
        left = [a + b for a, b in zip(left, widths)]
    longest = max(len(note or fmt(total)) for (_, _, note), total in zip(rows, left))
    for y, ((_, _, note), total) in enumerate(zip(rows, left)):
        ax.annotate(note or fmt(total), (total, y), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=8)
    # The longest bar leaves room for the longest note after it (about 5 pt a character).
    room = min(0.8, longest * 5.0 / (WIDTH_IN * 72 * 0.62))
    ax.set_xlim(0, max_total / (1.0 - room))
    ax.set_yticks(ys, [label for label, _, _ in rows])
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.xaxis.set_major_formatter(_formatter(fmt))
    ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    if x_label:
        ax.set_xlabel(x_label)
    if len(part_names) > 1:
        ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=len(part_names),
                  borderaxespad=0.2)
    return Chart(title, _finish(fig, ax, title, "", pad=20 if len(part_names) > 1 else 6))


_ID = re.compile(r'(\bid="|href="#|url\(#)')


def inline_svg(svg, chart_id, title):
    """A standalone SVG made fit to sit in a page beside others (see Chart.inline)."""
    start = svg.find("<svg")
    body = svg[start:] if start >= 0 else svg
    # Only inside tags: text (a task name) is never rewritten.
    body = re.sub(r"<[^<>]*>",
                  lambda tag: _ID.sub(lambda m: m.group(1) + chart_id + "-", tag.group(0)), body)
    open_end = body.find(">") + 1
    return (body[:open_end].replace("<svg ", '<svg role="img" ', 1) + "<title>" +
            escape(title) + "</title>" + body[open_end:])
