"""report.html: a run's report.json as one page (docs/profiler.md documents the keys).

Charts: examples/s and loss per worker over time, the chief's evaluations, step phases,
CPU and RSS per task, network per interface per host (rx solid, tx dashed), bytes per peer.
Tables: run, tasks, hosts, cluster, placement. A chart whose data is missing or malformed is
skipped (the page says so); nothing in a report can make render_run_page raise.
"""

import math
import sys
import traceback

from . import values as v
from .charts import Bar, Series, bar_chart, color, line_chart
from .html import card, escape, fallback_page, figures, page, table

TIME_AXIS = "time since start (s)"


class Task:
    """One task summary of the report: its name ("worker-1") and the summary dict."""

    def __init__(self, name, summary):
        self.name, self.summary = name, summary


def _task_name(summary, job):
    index = v.num(summary, "task_index", 0.0)
    shown = "%d" % index if abs(index) < 1e9 else v.short(index, 0)
    return "%s-%s" % (v.string(summary, "job", job), shown)


def tasks_of(report):
    """Every task summary: chief first, then ps and workers in report order."""
    out = []
    chief = v.dict_at(report, "chief")
    if chief is not None:
        out.append(Task(_task_name(chief, "chief"), chief))
    for key, job in (("ps", "ps"), ("workers", "worker")):
        out += [Task(_task_name(s, job), s) for s in v.array(report, key) if isinstance(s, dict)]
    return out


def _series_part(summary, part):
    return v.dict_at(v.dict_at(summary, "series"), part)


def _time_zero(tasks):
    """The earliest unix time of any series: time zero of every time chart."""
    times = [u for t in tasks for part in ("samples", "steps")
             for u in v.numbers(_series_part(t.summary, part), "unix_s") if math.isfinite(u)]
    return min(times) if times else 0.0


def _time_series(tasks, t0, part, key):
    """A series per task that has part.key; a task keeps its color (its position) everywhere."""
    out = []
    for i, t in enumerate(tasks):
        p = _series_part(t.summary, part)
        if v.get(p, key) is None:
            continue
        xs = [u - t0 for u in v.numbers(p, "unix_s")]
        out.append(Series(t.name, xs, v.numbers(p, key), color(i)))
    return out


def _eval_chart(report):
    steps, acc, loss = [], [], []
    for e in v.array(report, "evals"):
        steps.append(v.num(e, "global_step", math.nan))
        acc.append(v.num(e, "test_accuracy", math.nan))
        loss.append(v.num(e, "test_loss", math.nan))
    return line_chart("Chief's evaluations on the test set", "global step", "test accuracy",
                      [Series("test accuracy", steps, acc, color(0))],
                      lambda x: v.short(x, 3), x_fmt=v.fmt_count,
                      y2=("test loss", [Series("test loss", steps, loss, color(1), True)],
                          lambda x: v.short(x, 3)))


def _host_samplers(report, tasks):
    """(host, task) whose samples speak for each host: all tasks of a host read the same
    interface counters. The hosts table names it (interfaces_from), else its first task."""
    def has_net(t):
        return v.dict_at(_series_part(t.summary, "samples"), "network") is not None

    out, seen = [], set()
    for h in v.array(report, "hosts"):
        host = v.string(h, "host", "?")
        names = [v.string(h, "interfaces_from")] + [v.text(n) for n in v.array(h, "tasks")]
        for name in names:
            match = [t for t in tasks if t.name == name and has_net(t)]
            if match and host not in seen:
                seen.add(host)
                out.append((host, match[0]))
    # Hosts the table lacks (an older report) come from the summaries' own host key.
    for t in tasks:
        host = v.string(t.summary, "host", "unknown")
        if has_net(t) and host not in seen:
            seen.add(host)
            out.append((host, t))
    return out


def _network_chart(host, task, t0):
    """rx and tx of every interface of one host: a color per interface, tx dashed. Interfaces
    that moved nothing are named in a note instead of drawn."""
    samples = _series_part(task.summary, "samples")
    xs = [u - t0 for u in v.numbers(samples, "unix_s")]
    lines, idle = [], []
    for name, d in v.dict_at(samples, "network").items():
        rx, tx = v.numbers(d, "rx_bytes_per_sec"), v.numbers(d, "tx_bytes_per_sec")
        if not any(abs(x) > 0 for x in rx + tx):
            idle.append(name)
            continue
        c = color(len(lines))
        if name == "lo":
            # Every byte on loopback is sent and received on it: rx and tx are one line.
            lines.append(Series("lo (loopback, rx = tx)", xs, tx, c))
            continue
        lines += [Series(name + " (external) rx", xs, rx, c),
                  Series(name + " (external) tx", xs, tx, c, True)]
    return line_chart("Network of host %s (as seen by %s)" % (host, task.name), TIME_AXIS,
                      "bytes/s per interface (rx solid, tx dashed; lo one line)", lines,
                      v.axis_bytes_per_sec, note="idle: " + ", ".join(idle) if idle else "")


def _peer_chart(report):
    """One bar per direction (from → to) and kind (training, warm-up, control), as long as the
    bytes of that transfer: the sender's count (the receiver's when the sender kept none).
    Both ends count the same transfer, so their counts are never added: the note gives both."""
    bars = []
    for t in v.array(report, "traffic"):
        sent = v.num(t, "bytes_counted_by_sender")
        got = v.num(t, "bytes_counted_by_receiver")

        def shown(x):
            return "not counted" if x is None else v.fmt_bytes(x)
        bars.append(Bar("%s → %s (%s)" % (v.string(t, "from", "?"), v.string(t, "to", "?"),
                                              v.string(t, "kind", "?")),
                        [sent if sent is not None else (got or 0.0)],
                        "sender %s / receiver %s" % (shown(sent), shown(got))))
    return bar_chart("Application bytes per direction (the sender's count; the note: both ends')",
                     ["bytes"], bars, v.axis_bytes)


PHASES = ("data", "pull", "forward", "backward", "push", "sync_wait")


def _phase_chart(tasks):
    bars = []
    for t in tasks:
        m = v.dict_at(t.summary, "step_phase_mean_ms")
        if m is None:
            continue
        parts = [v.num(m, p, 0.0) for p in PHASES]
        note = v.fmt_ms(sum(x for x in parts if x > 0))
        p50 = v.num(t.summary, "step_time_p50_ms")
        if p50 is not None:
            note += " (p50 %s, p99 %s)" % (v.fmt_ms(p50),
                                           v.fmt_ms(v.num(t.summary, "step_time_p99_ms", 0.0)))
        bars.append(Bar(t.name, parts, note))
    return bar_chart("Mean step time of each worker by phase (warm-up steps excluded)",
                     list(PHASES), bars, v.fmt_ms)


def _safe(title, draw):
    """(title, Chart | None | why it failed): one bad chart never costs the page."""
    try:
        return title, draw()
    except Exception as e:  # noqa: BLE001 - any failure of one chart is reported, not raised
        print("render_report: chart '%s' not drawn: %s" % (title, e), file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return title, "%s: %s" % (type(e).__name__, e)


def _histogram_bars(histograms, fmt):
    """Bars of a log2 histogram (docs/profiler.md: {"upper": [...], "counts": [...]}) summed
    per part: one bar per bucket from the first to the last non-empty one, its parts the
    counts of each of `histograms` ([(part, histogram)]); (part names, bars)."""
    parts = sorted({name for name, _ in histograms})
    counts, upper = {}, []
    for name, h in histograms:
        ups = v.array(h, "upper")
        if len(ups) > len(upper):
            upper = ups
        for i, c in enumerate(v.array(h, "counts")):
            if isinstance(c, (int, float)) and c > 0:
                counts[(i, name)] = counts.get((i, name), 0) + c
    used = sorted({i for i, _ in counts})
    bars = []
    for i in range(used[0], used[-1] + 1) if used else []:
        low = upper[i - 1] if 0 < i <= len(upper) else None
        high = upper[i] if i < len(upper) else None
        label = ("< %s" % fmt(high) if low is None else
                 "%s and up" % fmt(low) if high is None else "%s to %s" % (fmt(low), fmt(high)))
        bars.append(Bar(label, [counts.get((i, p), 0) for p in parts],
                        v.fmt_count(sum(counts.get((i, p), 0) for p in parts))))
    return parts, bars


def _step_time_chart(tasks):
    hists = [(t.name, t.summary.get("step_time_histogram_ms")) for t in tasks
             if isinstance(v.dict_at(t.summary, "step_time_histogram_ms"), dict)]
    parts, bars = _histogram_bars(hists, v.fmt_ms)
    return bar_chart("Step times of each worker (steady state): steps per time bucket", parts,
                     bars, v.fmt_count) if bars else None


def _payload_chart(tasks):
    """Every RPC message counted once, by its sender (a request by the client, a reply by the
    server), by size and method: the payload distribution of TF-gRPC-Bench."""
    hists = [(v.string(e, "method", "?"), e.get("sent_size_histogram")) for t in tasks
             for e in v.array(t.summary, "rpc_traffic")
             if isinstance(v.dict_at(e, "sent_size_histogram"), dict)]
    parts, bars = _histogram_bars(hists, v.fmt_bytes)
    return bar_chart("Message sizes: every RPC message counted once, by its sender", parts, bars,
                     v.fmt_count) if bars else None


def _charts(report):
    tasks = tasks_of(report)
    t0 = _time_zero(tasks)
    training = [
        _safe("Examples/s per worker", lambda: line_chart(
            "Examples/s per worker", TIME_AXIS, "examples/s",
            _time_series(tasks, t0, "steps", "examples_per_sec"), v.fmt_count)),
        _safe("Training loss per worker", lambda: line_chart(
            "Training loss per worker", TIME_AXIS, "training loss",
            _time_series(tasks, t0, "steps", "loss"), lambda x: v.short(x, 3))),
        _safe("Chief's evaluations", lambda: _eval_chart(report)),
        _safe("Step phases", lambda: _phase_chart(tasks)),
        _safe("Step times", lambda: _step_time_chart(tasks)),
    ]
    machine = [
        _safe("CPU per task", lambda: line_chart(
            "Process CPU per task (100% = one core)", TIME_AXIS, "CPU",
            _time_series(tasks, t0, "samples", "cpu_percent"), v.axis_pct)),
        _safe("Memory per task", lambda: line_chart(
            "Resident memory (RSS) per task", TIME_AXIS, "RSS",
            _time_series(tasks, t0, "samples", "rss_bytes"), v.axis_bytes)),
    ]
    network = []
    for host, task in _host_samplers(report, tasks):
        network.append(_safe("Network of host %s" % host,
                             lambda h=host, t=task: _network_chart(h, t, t0)))
    network.append(_safe("Bytes per peer", lambda: _peer_chart(report)))
    network.append(_safe("Message sizes", lambda: _payload_chart(tasks)))
    sections = (("Training", training), ("CPU and memory", machine), ("Network", network))
    html, n = [], 0
    for heading, charts in sections:
        numbered = []
        for title, chart in charts:
            n += 1
            numbered.append(("c%d" % n, title, chart))
        html.append("<h2>%s</h2>%s" % (escape(heading), figures(numbered)))
    return "".join(html)


# ---------------------------------------------------------------------------------------------
# Tables.

RUN_KEYS = ("run_id", "model", "dataset", "mode", "optimizer", "learning_rate", "batch_size",
            "num_ps", "num_workers", "placement", "train_steps", "global_step", "stop_reason",
            "final_test_accuracy", "final_test_loss", "time_to_target_accuracy_seconds",
            "train_seconds", "wall_seconds", "examples_per_sec", "workers_examples_per_sec")


def _run_value(key, x):
    """A run value with its unit, chosen by the key's name."""
    if not v.is_num(x):
        return v.text(x)
    if key.endswith("_seconds"):
        return v.fmt_seconds(x)
    if "examples_per_sec" in key:
        return v.fmt_count(x)
    if isinstance(x, int):
        return str(x)
    return "%.4g" % x


def _run_table(report):
    rows = []
    r = report if isinstance(report, dict) else {}
    for key in RUN_KEYS:
        if r.get(key) is not None:
            rows.append((key, _run_value(key, r[key])))
        elif key in r:
            rows.append((key, "n/a"))  # null: e.g. the target accuracy was never reached
    # Any other plain value the chief adds (seed, pushes_dropped, ...) follows.
    for key, x in r.items():
        if key not in RUN_KEYS and x is not None and not isinstance(x, (dict, list)):
            rows.append((key, _run_value(key, x)))
    return "<h2>Run</h2>" + table(("key", "value"), rows)


def _task_table(report):
    rows = []
    for t in v.array(report, "tasks"):
        def n(key):
            return v.num(t, key, 0.0)
        rate = v.num(t, "examples_per_sec")
        status = v.string(t, "status", "reported")
        if status == "vanished":
            status = "vanished (%s records left)" % v.string(t, "records", "no")
        shared = v.string(t, "same_process_as", "")
        if shared:
            status += " (in %s's process: CPU and memory counted there)" % shared
        rows.append((v.string(t, "task"), status, v.string(t, "host"),
                     v.fmt_seconds(n("cpu_seconds")),
                     v.fmt_pct(n("cpu_percent_mean")), v.fmt_pct(n("cpu_percent_max")),
                     v.fmt_bytes(n("peak_rss_bytes")), v.fmt_bytes(n("app_bytes_sent")),
                     v.fmt_bytes(n("app_bytes_received")),
                     v.fmt_bytes(n("app_bytes_sent_warmup") + n("app_bytes_received_warmup")),
                     v.fmt_count(n("rpcs")), "" if rate is None else v.fmt_count(rate)))
    return ("<h2>Tasks</h2><p>Per process: a task run in another's process (worker 0 as "
            "the chief) shows the same CPU and memory, counted once in the sums. Network "
            "interfaces are shared by the tasks of a host: their counters are in the hosts "
            "table.</p>" + table(
                ("task", "status", "host", "CPU time", "CPU mean", "CPU max", "peak RSS",
                 "app sent", "app received", "of which warm-up", "RPCs", "examples/s"), rows))


def _interfaces(host):
    """"eth0 1.2 MB in / 3.4 MB out" for each interface that moved anything."""
    parts = []
    for i in v.array(host, "interfaces"):
        rx, tx = v.num(i, "rx_bytes", 0.0), v.num(i, "tx_bytes", 0.0)
        if rx > 0 or tx > 0:
            parts.append("%s %s in / %s out" % (v.string(i, "name", "?"), v.fmt_bytes(rx),
                                                v.fmt_bytes(tx)))
    return "; ".join(parts)


def _processor(tasks, host):
    """The processor a host's tasks reported (System Information of the first with one)."""
    for t in tasks:
        info = v.dict_at(t.summary, "System Information")
        if info is not None and v.string(t.summary, "host") == host:
            return "%s (%s, %s %s)" % (v.string(info, "Processor"), v.string(info, "Machine"),
                                       v.string(info, "System"), v.string(info, "Release"))
    return ""


def _host_table(report):
    tasks, rows = tasks_of(report), []
    for h in v.array(report, "hosts"):
        host = v.string(h, "host")

        def split(where, d):
            all_ = v.num(h, "%s_bytes_%s" % (where, d), 0.0)
            ours = v.num(h, "fulcrum_%s_bytes_%s" % (where, d), 0.0)
            return "%s (Fulcrum %s, other %s)" % (v.fmt_bytes(all_), v.fmt_bytes(ours),
                                                 v.fmt_bytes(v.num(h, "other_%s_bytes_%s" % (where, d), 0.0)))
        rows.append((host, ", ".join(v.text(t) for t in v.array(h, "tasks")),
                     v.fmt_pct(v.num(h, "cpu_percent_mean", 0.0)),
                     v.fmt_bytes(v.num(h, "peak_rss_bytes", 0.0)),
                     split("loopback", "sent"), split("external", "sent"),
                     split("external", "received"), _interfaces(h), _processor(tasks, host)))
    return ("<h2>Hosts</h2><p>Interface counters of each host (its network namespace), split "
            "into Fulcrum's payload (from the tasks' per-peer counts) and other bytes: protocol "
            "headers and any other process's traffic.</p>" + table(
                ("host", "tasks", "CPU (sum)", "peak RSS (sum)", "loopback sent",
                 "external sent", "external received", "interfaces", "processor"), rows))


def _layers_table(report):
    """Each host's bytes at three layers (chief/layers.h), per path and direction that TCP
    carried: the runtime's payload, TCP's count (the overhead between them is the protocol's)
    and the interfaces' bytes less one header per packet (which should match TCP's)."""
    def ratio(x):
        return "%+.2f%%" % (100.0 * x) if v.is_num(x) else "-"
    rows = []
    for h in v.array(report, "hosts"):
        layers = v.get(h, "layers")
        for path in ("loopback", "external"):
            for d in ("sent", "received"):
                lay = v.get(v.get(layers, path), d)
                if not v.num(lay, "tcp_bytes", 0.0):
                    continue
                rows.append((v.string(h, "host"), path, d,
                             v.fmt_bytes(v.num(lay, "app_bytes", 0.0)),
                             v.fmt_bytes(v.num(lay, "tcp_bytes", 0.0)),
                             ratio(v.get(lay, "protocol_overhead")),
                             v.fmt_bytes(v.num(lay, "interface_payload_bytes", 0.0)),
                             ratio(v.get(lay, "interface_vs_tcp")),
                             v.fmt_count(v.num(v.get(layers, path), "retransmits", 0.0))))
    if not rows:
        return ""
    return ("<h2>Bytes at three layers</h2><p>The runtime's payload, TCP's own count of the "
            "run's connections (protocol overhead: gRPC and HTTP/2 framing, TLS) and the "
            "interfaces' bytes less one TCP/IP header per packet, which match TCP's when no "
            "other process uses the host's network; TCP retransmits per path.</p>" + table(
                ("host", "path", "direction", "application", "TCP", "protocol overhead",
                 "interface payload", "interface vs TCP", "retransmits"), rows))


def _whatif_table(report):
    """The chief's what-if predictions (chief/whatif.h): examples/s and step time per change,
    the changes it could not predict with why, and the most useful one."""
    w = v.get(report, "whatif")
    if not isinstance(w, dict):
        return ""
    if v.get(w, "error"):
        return "<h2>What-if</h2><p>No predictions: %s</p>" % escape(v.string(w, "error"))
    best = v.get(w, "most_useful")
    rows = [(v.string(s, "change") + (" (most useful)" if v.get(s, "name") == best else ""),
             v.fmt_count(v.num(s, "examples_per_sec", 0.0)),
             v.fmt_ms(v.num(s, "step_time_ms", 0.0)), "%.2f\u00d7" % v.num(s, "speedup", 0.0))
            for s in v.array(w, "scenarios")]
    rows += [(v.string(s, "name"), "not predicted: " + v.string(s, "why"), "", "")
             for s in v.array(w, "skipped")]
    run = v.get(w, "run")
    return ("<h2>What-if</h2><p>Predicted from this run's records (step %s = compute %s + "
            "communication; each change moves the busiest link's or ps's time per step; "
            "docs/profiler.md, \"What-if\").</p>" % (
                v.fmt_ms(v.num(run, "step_ms", 0.0)), v.fmt_ms(v.num(run, "compute_ms", 0.0))) +
            table(("change", "examples/s", "step time", "speedup"), rows))


def _cluster_table(report):
    c = v.dict_at(report, "cluster")
    if c is None:
        return ""

    def n(key):
        return v.num(c, key, 0.0)
    row = (v.fmt_count(n("tasks")), v.fmt_count(v.num(c, "processes", n("tasks"))),
           v.fmt_count(n("hosts")), v.fmt_seconds(n("cpu_seconds")),
           v.fmt_pct(n("cpu_percent_mean")), v.fmt_bytes(n("peak_rss_bytes")),
           v.fmt_bytes(n("net_bytes_sent")), v.fmt_bytes(n("net_bytes_received")),
           v.fmt_bytes(n("external_bytes_sent")), v.fmt_bytes(n("external_bytes_received")),
           v.fmt_bytes(n("app_bytes_sent")), v.fmt_bytes(n("app_bytes_received")),
           v.fmt_count(n("workers_examples_per_sec")))
    return "<h2>Cluster</h2>" + table(
        ("tasks", "processes", "hosts", "CPU time", "CPU (sum of means)", "peak RSS (sum)",
         "network sent",
         "network received", "external sent", "external received", "app sent", "app received",
         "examples/s (workers)"), [row])


def _placement_table(report):
    """Every variable with its ps, bytes and share of the model, then each ps's total: how
    uneven a model's variables are (a CNN's dense kernel against its biases) is read here."""
    entries = v.array(report, "placement_table")
    total = sum(v.num(p, "bytes", 0.0) for p in entries) or 1.0
    rows = [(v.string(p, "variable"), "ps-" + v.string(p, "ps", "?"),
             v.fmt_bytes(v.num(p, "bytes", 0.0)),
             "%.2f %%" % (100.0 * v.num(p, "bytes", 0.0) / total)) for p in entries]
    per_ps = {}
    for p in entries:
        key = "ps-" + v.string(p, "ps", "?")
        per_ps[key] = per_ps.get(key, 0.0) + v.num(p, "bytes", 0.0)
    totals = [("all variables", key, v.fmt_bytes(b), "%.2f %%" % (100.0 * b / total))
              for key, b in sorted(per_ps.items())]
    if not rows:
        return ""
    return "<h2>Placement</h2>" + table(("variable", "ps", "bytes", "share"), rows + totals)


# ---------------------------------------------------------------------------------------------
# The page.


def _header(r):
    def num_or(key, fmt):
        x = v.num(r, key)
        return "n/a" if x is None else fmt(x)

    def s(key):
        return v.string(r, key, "?")
    sub = "%s on %s, %s, %s ps + %s workers, %s, batch %s; stop: %s" % (
        s("model"), s("dataset"), s("mode"), s("num_ps"), s("num_workers"), s("optimizer"),
        s("batch_size"), s("stop_reason"))
    accuracy = "%.4f".__mod__
    cards = [card("final test accuracy", num_or("final_test_accuracy", accuracy)),
             card("final test loss", num_or("final_test_loss", accuracy)),
             card("global step", num_or("global_step", v.fmt_count)),
             card("examples/s (workers)", num_or("workers_examples_per_sec", v.fmt_count)),
             card("train time", num_or("train_seconds", v.fmt_seconds)),
             card("time to target accuracy",
                  num_or("time_to_target_accuracy_seconds", v.fmt_seconds))]
    vanished = [v.text(t) for t in v.array(r, "vanished_tasks")]
    if vanished:
        sub += "; sent no summary (killed or lost): %s" % ", ".join(vanished)
    return ('%s<h1>Fulcrum run %s</h1><p class="sub">%s</p><div class="cards">%s</div>%s'
            % (_banner(r), escape(v.string(r, "run_id", "(no run id)")), escape(sub),
               "".join(cards), _balance_card(r)))


def _banner(r):
    """A red banner over a failed or interrupted run: what stopped it, first thing on the page."""
    stop = v.string(r, "stop_reason", "")
    failed = isinstance(r, dict) and r.get("failed") is True
    if failed:
        return '<div class="banner">This run FAILED: %s</div>' % escape(stop or "(no reason given)")
    if stop.startswith("interrupted"):
        return ('<div class="banner">This run was %s: its figures end there.</div>'
                % escape(stop))
    return ""


def _balance_card(r):
    """The ps tasks side by side (report.json's balance rows): each one's share of their
    application bytes, CPU time and applies, so an uneven placement shows at a glance."""
    rows = [b for b in v.array(r, "balance") if isinstance(b, dict)]
    if len(rows) < 2:
        return ""

    def share(b, key):
        return "%.0f%%" % (100.0 * v.num(b, key + "_share", 0.0))
    return ("<h2>Balance</h2><p>Each ps's share of the ps tasks' application bytes, CPU time "
            "and applies (even is 1/%d each).</p>" % len(rows) +
            table(("ps", "bytes", "CPU", "applies"),
                  [(v.string(b, "task"), share(b, "bytes"), share(b, "cpu_seconds"),
                    share(b, "applies")) for b in rows]))


def render_run_page(report):
    """The run report as one self-contained HTML page. report: the parsed report.json (any
    JSON value; a non-object gives a page of "no data")."""
    try:
        body = (_header(report) + _charts(report) + _run_table(report) + _task_table(report) +
                _host_table(report) + _layers_table(report) + _whatif_table(report) +
                _cluster_table(report) + _placement_table(report))
        return page("Fulcrum run " + v.string(report, "run_id", "report"), body)
    except Exception as e:  # noqa: BLE001 - the run still gets a page rather than none
        traceback.print_exc(file=sys.stderr)
        return fallback_page("%s: %s" % (type(e).__name__, e))
