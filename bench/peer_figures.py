#!/usr/bin/env python3
"""Known-good figures of Fulcrum's peers on this machine kind, and the guard every compare
script runs against them.

A peer that lands well under its known-good figure is a bug in the comparison (threads, BLAS,
allocator, a busy machine), not a win for Fulcrum. Every compare script (bench/compare_cnn.sh,
compare_reference.sh, compare_tf_ps.sh, compare_torch_ps.sh) asks this module for the peer's
known-good figure of the configuration it ran, prints it beside the peer's figure, and prints
a loud banner (on stderr and under its table) when the peer is more than 15 % under the low end
of the known-good range. Where no known-good figure exists for a configuration (another machine
kind, another peer version, a configuration nobody measured), it says so instead of guessing.

Usage (shell):
  bench/peer_figures.py check --peer=pytorch --model=mnist_cnn --batch=128 --threads=2 \\
      --value=1100 [--variant=dropout=1,optimizer=momentum] [--version=1.13.1] [--what=TEXT]
      -> stdout: "<status><TAB><cell>"; status ok, LOW or none; cell is the text for a table
         column; when LOW a banner goes to stderr (and to --banner_file, appended, if given).
  bench/peer_figures.py table      the known-good table (markdown), as docs/benchmarking.md has it
  bench/peer_figures.py machine    this machine's kind, as the table names kinds
Python: sys.path.insert(0, "<root>/bench"); import peer_figures; peer_figures.judge(...).
Exit status: 0, also for LOW (the compare script goes on and prints its table); 2 for bad
arguments.
"""
import argparse
import os
import sys

# A peer more than this fraction under the low end of its known-good range is flagged.
TOLERANCE = 0.15

# The machine kind every figure below was measured on.
KNOWN_KIND = "2 cores, AVX-512"

PEER_NAMES = {
    "pytorch": "PyTorch (single process)",
    "tf": "TensorFlow (single process, compat.v1 graph)",
    "tf-ps": "TensorFlow PS job (compat.v1 between-graph)",
    "pytorch-rpc-ps": "PyTorch RPC PS job",
}

_CNN_REF = ("bench/compare_cnn.sh --models={model} --batches={batch} --threads={threads} "
            "--pairs=5")
_BM = "/work/shared/BENCHMARKING.md"


def _f(peer, version, model, batch, threads, variant, low, high, date, command, source=""):
    return {"peer": peer, "version": version, "model": model, "batch": batch,
            "threads": threads, "variant": variant, "low": float(low), "high": float(high),
            "date": date, "kind": KNOWN_KIND, "command": command, "source": source}


# Each row: peer, peer version (major.minor), model, batch (per worker), threads, variant
# (the settings that change the figure, "key=value,..."), known-good range of examples/sec
# (low, high), date, the command that gives it, and where the range comes from.
FIGURES = [
    # Single process, full training step, momentum SGD, data in memory.
    _f("tf", "2.21", "mnist_cnn", 128, 2, "dropout=1,optimizer=momentum", 1985, 2054,
       "2026-11-28", _CNN_REF.format(model="mnist_cnn", batch=128, threads=2), _BM),
    _f("tf", "2.21", "mnist_cnn", 128, 1, "dropout=1,optimizer=momentum", 1193, 1265,
       "2026-11-28", _CNN_REF.format(model="mnist_cnn", batch=128, threads=1), _BM),
    _f("tf", "2.21", "mnist_cnn", 64, 2, "dropout=1,optimizer=momentum", 1786, 1836,
       "2026-11-28", _CNN_REF.format(model="mnist_cnn", batch=64, threads=2), _BM),
    _f("tf", "2.21", "cifar10_cnn", 64, 2, "dropout=1,optimizer=momentum", 1395, 1463,
       "2026-11-28", _CNN_REF.format(model="cifar10_cnn", batch=64, threads=2), _BM),
    _f("tf", "2.21", "cifar10_cnn", 128, 2, "dropout=1,optimizer=momentum", 1386, 1414,
       "2026-11-28", _CNN_REF.format(model="cifar10_cnn", batch=128, threads=2), _BM),
    _f("pytorch", "1.13", "mnist_cnn", 128, 2, "dropout=0,optimizer=momentum", 1959, 2008,
       "2026-11-28", _CNN_REF.format(model="mnist_cnn", batch=128, threads=2) + " --dropout=0",
       _BM),
    _f("pytorch", "1.13", "mnist_cnn", 128, 1, "dropout=0,optimizer=momentum", 1014, 1020,
       "2026-11-28", _CNN_REF.format(model="mnist_cnn", batch=128, threads=1) + " --dropout=0",
       _BM),
]


def parse_variant(text):
    """'a=1,b=x' -> {'a': '1', 'b': 'x'}; '' -> {}."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        if "=" not in item:
            raise ValueError("variant item '%s' is not key=value" % item)
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def machine_kind():
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 0
    avx512 = False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    avx512 = "avx512f" in line.split()
                    break
    except OSError:
        pass
    return "%d cores, %s" % (cores, "AVX-512" if avx512 else "no AVX-512")


def _major_minor(version):
    parts = str(version).split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else str(version)


def lookup(peer, model, batch, threads, variant="", version=None):
    """(figure or None, reason when None)."""
    kind = machine_kind()
    if kind != KNOWN_KIND:
        return None, "none known for this machine kind (%s; the table is for %s)" % (
            kind, KNOWN_KIND)
    want = parse_variant(variant) if isinstance(variant, str) else dict(variant)
    rows = [r for r in FIGURES if r["peer"] == peer and r["model"] == model
            and r["batch"] == int(batch) and r["threads"] == int(threads)
            and parse_variant(r["variant"]) == want]
    if not rows:
        return None, "none known for this configuration"
    if version:
        same = [r for r in rows if r["version"] == _major_minor(version)]
        if not same:
            return None, "none known for version %s (known: %s)" % (
                version, ", ".join(sorted({r["version"] for r in rows})))
        rows = same
    return rows[0], ""


def describe(peer, model, batch, threads, variant):
    v = variant if isinstance(variant, str) else ",".join("%s=%s" % kv for kv in variant.items())
    return "%s %s batch %s, %s thread%s%s" % (PEER_NAMES.get(peer, peer), model, batch, threads,
                                              "" if int(threads) == 1 else "s",
                                              " (%s)" % v if v else "")


def judge(peer, model, batch, threads, value, variant="", version=None, what=""):
    """{'status': 'ok'|'LOW'|'none', 'cell': text for a table column, 'banner': text or ''}."""
    fig, reason = lookup(peer, model, batch, threads, variant, version)
    if fig is None:
        return {"status": "none", "cell": "no known-good figure (%s)" % reason, "banner": ""}
    rng = "%.0f–%.0f" % (fig["low"], fig["high"]) if fig["high"] != fig["low"] else \
        "%.0f" % fig["low"]
    if value is None:
        return {"status": "none", "cell": "known-good %s; no figure measured" % rng, "banner": ""}
    under = 1.0 - float(value) / fig["low"]
    if under > TOLERANCE:
        what = what or describe(peer, model, batch, threads, variant)
        bar = "#" * 92
        banner = "\n".join([
            bar,
            "# WARNING: THE PEER RAN MORE THAN %d%% UNDER ITS KNOWN-GOOD FIGURE: "
            "THE COMPARISON IS SUSPECT" % round(TOLERANCE * 100),
            "# %s" % what,
            "#   measured %.0f ex/s; known-good %s ex/s (%s, %s, %s): %.0f%% under its low end"
            % (float(value), rng, fig["kind"], fig["date"], fig["peer"] + " " + fig["version"],
               under * 100),
            "#   known-good command: %s" % fig["command"],
            "#   check the peer's threads, BLAS, allocator settings and the machine's load "
            "(docs/benchmarking.md) before quoting any ratio",
            bar])
        return {"status": "LOW", "cell": "**LOW: %.0f%% under known-good %s**" % (under * 100, rng),
                "banner": banner}
    return {"status": "ok", "cell": "%s (%+.0f%%)" % (rng, -under * 100), "banner": ""}


def markdown_table():
    lines = ["| peer | version | model | batch | threads | variant | known-good ex/s | date "
             "| machine kind | command |",
             "| --- | --- | --- | ---: | ---: | --- | ---: | --- | --- | --- |"]
    for r in FIGURES:
        lines.append("| %s | %s | %s | %d | %d | %s | %.0f–%.0f | %s | %s | `%s` |" % (
            r["peer"], r["version"], r["model"], r["batch"], r["threads"], r["variant"] or "–",
            r["low"], r["high"], r["date"], r["kind"], r["command"]))
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # exit 2 naming the argument (argparse's message does)
        self.print_usage(sys.stderr)
        self.exit(2, "peer_figures: error: %s\n" % message)


def positive_int(text):
    """argparse type: a positive integer (the reference scripts use it too)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a positive integer, got '%s'" % text)
    if v <= 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got '%s'" % text)
    return v


def _rate(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected examples/sec (a number), got '%s'" % text)
    if not v >= 0:
        raise argparse.ArgumentTypeError("expected examples/sec >= 0, got '%s'" % text)
    return v


def main(argv=None):
    p = _Parser(description=__doc__.split("\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog=__doc__.split("\n", 1)[1])
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    c = sub.add_parser("check", help="judge one peer figure")
    c.add_argument("--peer", required=True, choices=sorted(PEER_NAMES))
    c.add_argument("--model", required=True)
    c.add_argument("--batch", required=True, type=positive_int)
    c.add_argument("--threads", required=True, type=positive_int)
    c.add_argument("--value", required=True, type=_rate, help="the peer's examples/sec")
    c.add_argument("--variant", default="", help="key=value,... settings of the run")
    c.add_argument("--version", default=None, help="the peer's version (e.g. 2.21.0)")
    c.add_argument("--what", default="", help="how the banner names the run")
    c.add_argument("--banner_file", default="", help="also append a LOW banner to this file")
    sub.add_parser("table", help="print the known-good table (markdown)")
    sub.add_parser("machine", help="print this machine's kind")
    a = p.parse_args(argv)
    if a.cmd == "table":
        print("Known-good peer figures (machine kind: %s); a peer more than %d%% under the low "
              "end is flagged.\n" % (KNOWN_KIND, round(TOLERANCE * 100)))
        print(markdown_table())
        return 0
    if a.cmd == "machine":
        print(machine_kind())
        return 0
    try:
        parse_variant(a.variant)
    except ValueError as e:
        p.error("argument --variant: %s" % e)
    v = judge(a.peer, a.model, a.batch, a.threads, a.value, a.variant, a.version, a.what)
    print("%s\t%s" % (v["status"], v["cell"]))
    if v["banner"]:
        print(v["banner"], file=sys.stderr)
        if a.banner_file:
            with open(a.banner_file, "a") as f:
                f.write(v["banner"] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
