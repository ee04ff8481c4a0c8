#!/usr/bin/python3
"""Plots a grpc_bench run (its --json file) with the project's one chart renderer.

  bench/plot_grpc_bench.py RUN.json --out=DIR [--title="loopback, 2 cores"]
  bench/plot_grpc_bench.py RUN.json --markdown      # the run as compact markdown tables

Writes DIR/NN-<name>.svg per chart and DIR/index.html (the charts inline), drawn by
scripts/fulcrum_report (matplotlib, Agg/SVG; the renderer of report.html and bench/sweep.py's
pages). Charts: small-message latency (p50) and echo throughput against message size per
mode, single-buffer and multi-buffer; one-way bandwidth against size; latency of the payload
schemes; ps_throughput's aggregate MB/s per layout; the PS path's MB/s against model size
beside raw TCP and raw gRPC. Message size is drawn on a log2 axis (ticks are sizes). Needs
Debian's /usr/bin/python3 with python3-matplotlib (not for --markdown, which prints one row per
payload or layout with the modes side by side, as docs/transport.md shows them). Exit code 2
on bad input.
"""
import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    from fulcrum_report import charts, html, values  # noqa: E402
except ImportError as error:  # python3-matplotlib missing
    charts = None
    IMPORT_ERROR = error
    from fulcrum_report import values  # noqa: E402  (plain Python, no matplotlib)

MODES = ("tcp", "serialized", "bytebuffer", "fulcrum_ps")
MODE_NAMES = {"tcp": "raw TCP", "serialized": "gRPC serialized", "bytebuffer": "gRPC ByteBuffer",
              "fulcrum_ps": "Fulcrum PS push+pull"}
SMALL_LIMIT = 64 * 1024  # the latency chart's largest message: beyond it time is bandwidth


def size_label(log2_bytes):
    b = 2 ** log2_bytes
    for unit, m in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= m:
            return values.short(b / m, 1) + " " + unit
    return values.short(b, 0) + " B"


def mb_label(v):
    return values.short(v, 0 if abs(v) >= 100 else 1) + " MB/s"


def us_label(v):
    return values.short(v, 1) + " µs"


def rows_of(run, benchmark, **where):
    out = []
    for r in values.array(run, "rows"):
        if values.get(r, "benchmark") == benchmark and all(
                values.get(r, k) == v for k, v in where.items()):
            out.append(r)
    return out


def by_mode_series(rows, y_key, y_fn=None, limit=None):
    """One Series per mode: y against log2(message_bytes), sorted by size."""
    series = []
    for i, mode in enumerate(MODES):
        pts = [r for r in rows if r.get("mode") == mode and values.num(r, "message_bytes")]
        if limit:
            pts = [r for r in pts if r["message_bytes"] <= limit]
        pts.sort(key=lambda r: r["message_bytes"])
        if not pts:
            continue
        ys = [y_fn(r) if y_fn else values.num(r, y_key, float("nan")) for r in pts]
        series.append(charts.Series(MODE_NAMES[mode], [math.log2(r["message_bytes"]) for r in pts],
                                    ys, charts.color(i)))
    return series


def echo_mb(r):
    """Echo throughput at the median: both ways' bytes per p50 round trip."""
    p50 = values.num(r, "p50_us")
    return 2 * r["message_bytes"] / p50 if p50 else float("nan")


def size_charts(run, buffers_filter, tag):
    lat = [r for r in rows_of(run, "latency", scheme="size") if buffers_filter(r)]
    bw = [r for r in rows_of(run, "bandwidth", scheme="size") if buffers_filter(r)]
    return [
        ("latency-%s" % tag, charts.line_chart(
            "Echo round trip p50, %s, up to %s" % (tag, size_label(math.log2(SMALL_LIMIT))),
            "message size", "p50 round trip", by_mode_series(lat, "p50_us", limit=SMALL_LIMIT),
            us_label, x_fmt=size_label)),
        ("echo-throughput-%s" % tag, charts.line_chart(
            "Echo throughput at p50 (2 x size / p50), %s" % tag, "message size", "MB/s",
            by_mode_series(lat, None, echo_mb), mb_label, x_fmt=size_label)),
        ("bandwidth-%s" % tag, charts.line_chart(
            "One-way bandwidth, messages in flight, %s" % tag, "message size", "MB/s",
            by_mode_series(bw, "mb_per_s"), mb_label, x_fmt=size_label)),
    ]


def scheme_chart(run):
    bars = []
    for r in rows_of(run, "latency"):
        if r.get("scheme") != "size":
            bars.append(charts.Bar("%s %s" % (r.get("payload"), MODE_NAMES.get(r.get("mode"), "")),
                                   [values.num(r, "p50_us", 0.0)], us_label(values.num(r, "p50_us", 0.0))))
    return ("latency-schemes", charts.bar_chart("Echo p50 of the payload schemes", ["p50"], bars,
                                                us_label, "p50 round trip"))


def ps_throughput_chart(run):
    bars = []
    for r in rows_of(run, "ps_throughput"):
        label = "%s M=%s N=%s %s" % (r.get("payload"), r.get("servers"), r.get("clients"),
                                     MODE_NAMES.get(r.get("mode"), r.get("mode")))
        bars.append(charts.Bar(label, [values.num(r, "mb_per_s", 0.0)]))
    return ("ps-throughput", charts.bar_chart(
        "PS throughput: N clients x M servers, push+pull, aggregate", ["MB/s"], bars, mb_label,
        "MB/s (both ways)"))


def ps_path_chart(run):
    rows = rows_of(run, "ps_path")
    return ("ps-path", charts.line_chart(
        "Model push+pull: Fulcrum PS vs raw round trips of the same bytes", "model size",
        "MB/s (both ways)", by_mode_series(rows, "mb_per_s"), mb_label, x_fmt=size_label))


def all_charts(run):
    out = size_charts(run, lambda r: r.get("buffers") == 1, "single-buffer")
    out += size_charts(run, lambda r: (r.get("buffers") or 0) > 1, "multi-buffer")
    out += [scheme_chart(run), ps_throughput_chart(run), ps_path_chart(run)]
    return [(name, chart) for name, chart in out if chart is not None]


def _ratio(r, name):
    v = values.dict_at(values.dict_at(r, "ratios"), name)
    if not v:
        return ""
    return "%.2f (%.2f–%.2f)" % (v["median"], v["min"], v["max"])


def _us(v):
    return "%.0f" % v if v >= 100 else "%.1f" % v


def _pivot(rows, key):
    """{item key: {mode: row}} in first-seen order."""
    out = {}
    for r in rows:
        out.setdefault(key(r), {})[r.get("mode")] = r
    return out


def markdown(run):
    lines = []
    lat = _pivot(rows_of(run, "latency"), lambda r: (r["payload"], r["buffers"], r["message_bytes"]))
    lines += ["| payload | buffers | bytes | TCP p50 µs | gRPC p50 µs | gRPC-BB p50 µs | TCP p99 µs "
              "| gRPC p99 µs | gRPC-BB p99 µs | gRPC ×TCP | gRPC-BB ×TCP |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for (payload, buffers, size), m in lat.items():
        cells = [_us(m[k]["p50_us"]) if k in m else "" for k in ("tcp", "serialized", "bytebuffer")]
        cells += [_us(m[k]["p99_us"]) if k in m else "" for k in ("tcp", "serialized", "bytebuffer")]
        cells += [_ratio(m.get("serialized"), "time_vs_tcp"), _ratio(m.get("bytebuffer"), "time_vs_tcp")]
        lines.append("| %s | %d | %d | %s |" % (payload, buffers, size, " | ".join(cells)))
    bw = _pivot(rows_of(run, "bandwidth"), lambda r: (r["payload"], r["buffers"], r["message_bytes"], r["window"]))
    lines += ["", "| payload | buffers | bytes | window | TCP MB/s | gRPC MB/s | gRPC-BB MB/s | gRPC ×TCP "
              "| gRPC-BB ×TCP |", "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for (payload, buffers, size, window), m in bw.items():
        cells = ["%.0f" % m[k]["mb_per_s"] if k in m else "" for k in ("tcp", "serialized", "bytebuffer")]
        cells += [_ratio(m.get("serialized"), "speed_vs_tcp"), _ratio(m.get("bytebuffer"), "speed_vs_tcp")]
        lines.append("| %s | %d | %d | %d | %s |" % (payload, buffers, size, window, " | ".join(cells)))
    pt = _pivot(rows_of(run, "ps_throughput"), lambda r: (r["payload"], r["servers"], r["clients"], r["buffers"], r["message_bytes"]))
    lines += ["", "| scheme | M | N | buffers | set bytes | TCP MB/s | gRPC MB/s | gRPC-BB MB/s | TCP calls/s "
              "| gRPC calls/s | gRPC-BB calls/s | gRPC ×TCP | gRPC-BB ×TCP |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for (scheme, m_, n, buffers, size), m in pt.items():
        cells = ["%.0f" % m[k]["mb_per_s"] if k in m else "" for k in ("tcp", "serialized", "bytebuffer")]
        cells += ["%.0f" % m[k]["calls_per_s"] if k in m else "" for k in ("tcp", "serialized", "bytebuffer")]
        cells += [_ratio(m.get("serialized"), "speed_vs_tcp"), _ratio(m.get("bytebuffer"), "speed_vs_tcp")]
        lines.append("| %s | %d | %d | %d | %d | %s |" % (scheme, m_, n, buffers, size, " | ".join(cells)))
    pp = _pivot(rows_of(run, "ps_path"), lambda r: (r["payload"], r["message_bytes"]))
    lines += ["", "| model | bytes | PS p50 µs | TCP p50 µs | gRPC p50 µs | gRPC-BB p50 µs | PS MB/s "
              "| TCP MB/s | gRPC MB/s | gRPC-BB MB/s | PS/TCP speed (≥ 0.7) | PS/gRPC time (≤ 1.3) "
              "| PS/gRPC-BB time |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    modes = ("fulcrum_ps", "tcp", "serialized", "bytebuffer")
    for (model, size), m in pp.items():
        cells = [_us(m[k]["p50_us"]) if k in m else "" for k in modes]
        cells += ["%.0f" % m[k]["mb_per_s"] if k in m else "" for k in modes]
        ps = m.get("fulcrum_ps")
        cells += [_ratio(ps, "speed_vs_tcp"), _ratio(ps, "time_vs_serialized"), _ratio(ps, "time_vs_bytebuffer")]
        lines.append("| %s | %d | %s |" % (model, size, " | ".join(cells)))
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", help="a grpc_bench --json file")
    parser.add_argument("--out", help="folder for the SVGs and index.html")
    parser.add_argument("--markdown", action="store_true", help="print markdown tables instead")
    parser.add_argument("--title", default="", help="a note under the page title")
    args = parser.parse_args(argv)
    if not args.markdown and not args.out:
        parser.error("--out or --markdown is needed")
    if charts is None and not args.markdown:
        print("plot_grpc_bench: needs python3-matplotlib (%s)" % IMPORT_ERROR, file=sys.stderr)
        return 2
    try:
        with open(args.json, encoding="utf-8") as f:
            run = json.load(f)
    except (OSError, ValueError) as error:
        print("plot_grpc_bench: %s: %s" % (args.json, error), file=sys.stderr)
        return 2
    if not isinstance(run, dict) or not isinstance(run.get("rows"), list):
        print("plot_grpc_bench: %s has no rows (a skipped run?)" % args.json, file=sys.stderr)
        return 2
    if args.markdown:
        print(markdown(run))
        return 0
    os.makedirs(args.out, exist_ok=True)
    drawn = all_charts(run)
    for i, (name, chart) in enumerate(drawn):
        html.write_atomically(os.path.join(args.out, "%02d-%s.svg" % (i + 1, name)), chart.svg)
    meta = values.dict_at(run, "meta") or {}
    head = "<h1>grpc_bench %s</h1><p>%s</p><p><code>%s</code><br>%s; load %s &rarr; %s</p>" % (
        html.escape(values.string(meta, "date")), html.escape(args.title),
        html.escape(values.string(meta, "command")), html.escape(values.string(meta, "network")),
        html.escape(values.string(meta, "loadavg_before")),
        html.escape(values.string(meta, "loadavg_after")))
    body = head + html.figures([("c%d" % i, c.title, c) for i, (_, c) in enumerate(drawn)])
    html.write_atomically(os.path.join(args.out, "index.html"), html.page("grpc_bench", body))
    print("plot_grpc_bench: %d charts in %s" % (len(drawn), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
