"""studies/tables.py lu: the Lu/OSU (TF-gRPC-Bench) study's CSVs and plots, from the
folder of studies/lu-osu/run.sh (grpc_<link>.json per link, payload/<model>/ per model)."""
import glob
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from study_records import load_json, point_source, write_csv  # noqa: E402

MODES = ("tcp", "serialized", "bytebuffer")
MODE_NAMES = {"tcp": "raw TCP", "serialized": "gRPC serialized", "bytebuffer": "gRPC ByteBuffer"}
GRPC_FIELDS = ["link", "benchmark", "payload", "message_bytes", "buffers", "window", "servers",
               "clients", "mode", "p50_us", "p95_us", "p99_us", "mb_per_s", "calls_per_s",
               "vs_tcp_median", "vs_tcp_min", "vs_tcp_max", "rounds", "date", "loadavg_before",
               "loadavg_after", "source"]


def _link_key(link):
    """lo first, then the rates from slow to fast."""
    if link == "lo":
        return (0, 0.0)
    return (1, float(link[:-4]) * (1000 if link.endswith("gbit") else 1))


def grpc_rows(folder):
    """Every grpc_bench row of every link, flattened (the per-round ratio to raw TCP: time
    for latency, speed for bandwidth and PS throughput)."""
    rows = []
    for path in glob.glob(os.path.join(folder, "grpc_*.json")):
        link = os.path.basename(path)[len("grpc_"):-len(".json")]
        run = load_json(path) or {}  # a link whose run wrote no JSON has no rows
        meta = run.get("meta", {})
        for r in run.get("rows", []):
            ratio = next(iter(r.get("ratios", {}).values()), {})
            rows.append(dict(r, link=link, source=point_source(folder, "grpc_" + link),
                             vs_tcp_median=ratio.get("median"),
                             vs_tcp_min=ratio.get("min"), vs_tcp_max=ratio.get("max"),
                             date=meta.get("date"), loadavg_before=meta.get("loadavg_before"),
                             loadavg_after=meta.get("loadavg_after")))
    rows.sort(key=lambda r: (_link_key(r["link"]), r["benchmark"], r.get("payload", ""),
                             r.get("servers", 0), r.get("clients", 0), MODES.index(r["mode"])
                             if r["mode"] in MODES else 9))
    return rows


def _panel(ax, rows, link, y_key, title, ylabel):
    labels = []
    for r in rows:
        if r["link"] == link and r["payload"] not in labels:
            labels.append(r["payload"])
    width = 0.8 / len(MODES)
    for i, mode in enumerate(MODES):
        ys = []
        for label in labels:
            match = [r for r in rows if r["link"] == link and r["payload"] == label and
                     r["mode"] == mode]
            ys.append(match[0][y_key] if match else 0)
        ax.bar([x + i * width for x in range(len(labels))], ys, width, label=MODE_NAMES[mode])
    ax.set_xticks([x + width for x in range(len(labels))])
    ax.set_xticklabels(labels, fontsize=7, rotation=20)
    ax.set_yscale("log")
    ax.set_title("%s, %s" % (title, "loopback" if link == "lo" else link.replace("bit", "bit/s")),
                 fontsize=9)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.grid(alpha=0.3, axis="y")


def grpc_plots(rows, out):
    links = sorted({r["link"] for r in rows}, key=_link_key)
    if not links:
        return
    fig, axes = plt.subplots(3, len(links), figsize=(4.2 * len(links), 10), squeeze=False)
    for col, link in enumerate(links):
        lat = [r for r in rows if r["benchmark"] == "latency"]
        bw = [r for r in rows if r["benchmark"] == "bandwidth"]
        ps = [dict(r, payload="%s %dx%d" % (r["payload"], r["servers"], r["clients"]))
              for r in rows if r["benchmark"] == "ps_throughput"]
        _panel(axes[0][col], lat, link, "p50_us", "latency (echo p50)", "µs")
        _panel(axes[1][col], bw, link, "mb_per_s", "bandwidth (one way)", "MB/s")
        _panel(axes[2][col], ps, link, "mb_per_s", "PS throughput (M x N)", "MB/s")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("TF-gRPC-Bench's benchmarks with Fulcrum's grpc_bench")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lu_grpc.svg"))


def payload_rows(folder):
    """Per model, the RPCs between workers and ps tasks by payload size (the profiler's log2
    buckets): requests the workers sent and replies they received; beside them the model's
    variables by size (report.json's placement_table), the payloads a TF1 job would send,
    one RecvTensor per variable, where Fulcrum packs a step's variables into chunks."""
    rows = []
    for model_dir in sorted(glob.glob(os.path.join(folder, "payload", "*"))):
        model = os.path.basename(model_dir)
        sent, received, upper, variables = {}, {}, [], {}
        table = (load_json(os.path.join(model_dir, "report.json")) or {}).get(
            "placement_table", [])
        for path in glob.glob(os.path.join(model_dir, "worker-*", "summary.json")):
            for t in (load_json(path) or {}).get("rpc_traffic", []):
                if not str(t.get("peer", "")).startswith("ps-"):
                    continue
                for hist, into in ((t.get("sent_size_histogram"), sent),
                                   (t.get("received_size_histogram"), received)):
                    upper = hist["upper"]
                    for i, n in enumerate(hist["counts"]):
                        into[i] = into.get(i, 0) + n
        for v in table:
            i = next((k for k, b in enumerate(upper) if b is not None and v["bytes"] < b),
                     len(upper) - 1)
            variables[i] = variables.get(i, 0) + 1
        for i, bound in enumerate(upper):
            if sent.get(i) or received.get(i) or variables.get(i):
                low = bound / 2 if i else 0
                rows.append({"model": model, "bucket": "%s-%s" % (_bytes(low), _bytes(bound))
                             if bound else ">= %s" % _bytes(upper[i - 1]),
                             "upper_bytes": bound, "requests_sent": sent.get(i, 0),
                             "replies_received": received.get(i, 0),
                             "variables": variables.get(i, 0),
                             "source": point_source(folder, "payload_" + model)})
    return rows


def _bytes(b):
    for unit, m in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= m:
            return "%g %s" % (b / m, unit)
    return "%g B" % b


def payload_plot(rows, out):
    models = sorted({r["model"] for r in rows})
    if not models:
        return
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.8), squeeze=False)
    for ax, model in zip(axes[0], models):
        mine = [r for r in rows if r["model"] == model]
        xs = range(len(mine))
        ax.bar([x - 0.2 for x in xs], [r["requests_sent"] for r in mine], 0.4,
               label="requests sent (all steps)")
        ax.bar([x + 0.2 for x in xs], [r["replies_received"] for r in mine], 0.4,
               label="replies received (all steps)")
        ax.plot(list(xs), [r["variables"] for r in mine], "k^", label="variables (one step)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r["bucket"] for r in mine], fontsize=7, rotation=30, ha="right")
        ax.set_ylabel("count")
        ax.set_yscale("symlog")
        ax.set_title("%s: payload size per RPC" % model, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lu_payload.svg"))


def lu(folder, out):
    rows = grpc_rows(folder)
    write_csv(os.path.join(out, "lu_grpc.csv"), rows, GRPC_FIELDS)
    grpc_plots(rows, out)
    payload = payload_rows(folder)
    write_csv(os.path.join(out, "lu_payload.csv"), payload,
           ["model", "bucket", "upper_bytes", "requests_sent", "replies_received", "variables",
            "source"])
    payload_plot(payload, out)
    print("lu: %d grpc_bench rows, %d payload buckets -> %s" % (len(rows), len(payload), out))
