"""Fulcrum's one report renderer: run pages (report.html) and sweep pages (index.html).

Both are self-contained HTML: charts drawn by matplotlib (Debian's python3-matplotlib, the
Agg/SVG backend, no display) and inlined as SVG, tables, no script, no external file.

  render_run_page(report)            -> HTML text of a run's report.json (dict or anything)
  render_sweep_page(results, layouts, runs) -> (HTML text, [Chart]) of a sweep (bench/sweep.py)
  render_compare_page([(label, run)]) -> HTML text overlaying several runs
                                       (scripts/compare_runs.py)
  write_atomically(path, text)       -> writes path.tmp, flushes it, renames it onto path

Command line: scripts/render_report.py REPORT_JSON OUT_HTML (the chief runs it from next to
its binary, build/bin/render_report.py, after it writes report.json). Pure functions; no
global state besides matplotlib's rcParams, set once on import.
"""

from .compare_page import render_compare_page
from .html import write_atomically
from .run_page import render_run_page
from .sweep_page import render_sweep_page

__all__ = ["render_compare_page", "render_run_page", "render_sweep_page", "write_atomically"]
