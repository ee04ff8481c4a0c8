#!/usr/bin/python3
"""Overlays several runs on one page: training loss and throughput per global step, test
accuracy, and a table of each run's settings and figures.

  scripts/compare_runs.py RUN [RUN ...] -o OUT_HTML [--label NAME ...]

RUN is a run directory (its report.json, or a single-mode run's summary.json) or one of
those files. Labels default to the run directories' names. Writes OUT_HTML atomically.
Exit codes: 0 written; 2 bad usage or a RUN without report.json/summary.json or that does
not parse (named); 1 the page cannot be written. Needs Debian's python3-matplotlib.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def load(path):
    """(label, parsed JSON) of one RUN argument; raises ValueError naming what is wrong."""
    if os.path.isdir(path):
        for name in ("report.json", "summary.json"):
            if os.path.isfile(os.path.join(path, name)):
                label = os.path.basename(os.path.normpath(path))
                path = os.path.join(path, name)
                break
        else:
            raise ValueError("%s: no report.json or summary.json in it" % path)
    else:
        label = os.path.basename(os.path.dirname(os.path.abspath(path)))
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError("%s: cannot be read as JSON (%s)" % (path, e))
    if not isinstance(data, dict):
        raise ValueError("%s: not a report or summary (a JSON object)" % path)
    return label, data


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN")
    parser.add_argument("-o", "--out", required=True, metavar="OUT_HTML")
    parser.add_argument("--label", action="append", default=[],
                        help="a name per RUN, in order (default: the run directory's name)")
    args = parser.parse_intermixed_args(argv[1:])
    if args.label and len(args.label) != len(args.runs):
        print("compare_runs: %d --label for %d runs: give one per run or none"
              % (len(args.label), len(args.runs)), file=sys.stderr)
        return 2
    runs = []
    for i, path in enumerate(args.runs):
        try:
            label, data = load(path)
        except ValueError as e:
            print("compare_runs: %s" % e, file=sys.stderr)
            return 2
        runs.append((args.label[i] if args.label else label, data))
    import fulcrum_report
    try:
        fulcrum_report.write_atomically(args.out, fulcrum_report.render_compare_page(runs))
    except OSError as e:
        print("compare_runs: cannot write %s: %s" % (args.out, e), file=sys.stderr)
        return 1
    print("compare_runs: %s (%d runs)" % (args.out, len(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
