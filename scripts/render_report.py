#!/usr/bin/python3
"""Draws a run's report.html from its report.json (the chief runs this after a run).

  scripts/render_report.py REPORT_JSON OUT_HTML

Writes OUT_HTML atomically (OUT_HTML.tmp, then a rename); never changes REPORT_JSON. Exit
codes: 0 written, 1 the input cannot be read or parsed or the page cannot be written, 2 bad
usage. The drawing lives in the fulcrum_report package beside this file (one renderer for run
and sweep pages); it needs Debian's python3-matplotlib, hence Debian's /usr/bin/python3.
A build copies both next to the binaries (build/bin), where the chief looks for them.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv):
    if len(argv) != 3 or argv[1].startswith("-"):
        print("usage: render_report.py REPORT_JSON OUT_HTML", file=sys.stderr)
        return 2
    try:
        import fulcrum_report
    except ImportError as e:
        print("render_report: cannot load the renderer (%s); install python3-matplotlib "
              "(scripts/setup.sh) and run Debian's /usr/bin/python3" % e, file=sys.stderr)
        return 1
    try:
        with open(argv[1], encoding="utf-8", errors="replace") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print("render_report: cannot read %s: %s" % (argv[1], e), file=sys.stderr)
        return 1
    try:
        fulcrum_report.write_atomically(argv[2], fulcrum_report.render_run_page(report))
    except OSError as e:
        print("render_report: cannot write %s: %s" % (argv[2], e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
