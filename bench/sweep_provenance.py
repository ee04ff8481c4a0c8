"""What each run of bench/sweep.py was made with, so that a resumed sweep never mixes runs of
different sources or settings without saying so.

Every run's folder gets sweep_run.json: the repository's commit (`git describe --always
--dirty`), a short hash of the ps, worker and chief binaries that ran, the run's task flags
(less its own folder) and the emulated hosts' options, and when it ran. A resumed sweep reuses
a finished run only when its settings are the same as now; a run of other settings is run
again. A run of other sources (commit or binaries) is reused, and the CSVs say so: runs.csv
has each run's commit and binaries, results.csv the distinct ones behind each median, and the
sweep prints a warning naming them.

What else ran on the machines is a condition of a run too: each run's report.json says how many
CPUs its busiest machine spent on work that was not the job's (cluster.other_cpus_max: other
programs, and kernel work charged to no process). runs.csv has it per run (other_cpus),
results.csv the largest behind each median, and the sweep names the runs above
--max_other_cpus in a warning; with --rerun_busy such a finished run is run again, not reused.
The studies' scripts read the same figure through this file's command line:
  bench/sweep_provenance.py other_cpus REPORT_JSON   # prints it as 0.12, or null
"""
import hashlib
import json
import os
import subprocess
import sys
import time

RECORD = "sweep_run.json"
UNKNOWN = "unknown"  # a run from before these records
MAX_OTHER_CPUS = 0.5  # --max_other_cpus's default, and the studies' limit


def repo_commit(root):
    """`git describe --always --dirty` of the repository, or "unknown" outside git."""
    try:
        p = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=30)
        return p.stdout.strip() or UNKNOWN
    except (OSError, subprocess.TimeoutExpired):
        return UNKNOWN


def binaries_hash(bin_dir, names=("ps", "worker", "chief")):
    """The first 12 hex digits of the SHA-256 of the binaries, in order."""
    h = hashlib.sha256()
    for name in names:
        with open(os.path.join(bin_dir, name), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:12]


def settings_of(flags, hosts):
    """The settings that make a run what it is: its task flags (less --run_dir, which names
    the run, not what it does) and the emulated hosts' options."""
    return {"flags": [f for f in flags if not f.startswith("--run_dir=")], "hosts": hosts}


def settings_hash(settings):
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _load_json(path):
    """The JSON file at path, or None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_record(run_dir):
    """The run's sweep_run.json, or None (a run from before these records, or none)."""
    return _load_json(os.path.join(run_dir, RECORD))


def write_record(run_dir, source, settings, started, exit_code):
    record = dict(source, settings=settings, settings_hash=settings_hash(settings),
                  exit_code=exit_code,
                  started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                  finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    tmp = os.path.join(run_dir, RECORD + ".tmp")
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(run_dir, RECORD))


def report_other_cpus(report_path):
    """The CPUs a run's busiest machine spent on other work beside it (its report.json's
    cluster.other_cpus_max), or None when the report has no such figure."""
    report = _load_json(report_path) or {}
    value = (report.get("cluster") or {}).get("other_cpus_max")
    return value if isinstance(value, (int, float)) else None


def other_cpus(run_dir):
    """report_other_cpus of a sweep run's folder (its run/report.json)."""
    return report_other_cpus(os.path.join(run_dir, "run", "report.json"))


def reusable(run_dir, settings, report_path=None, max_other_cpus=None):
    """(reuse?, why not): a finished run is reused when it ran with these settings and
    succeeded (a failed run leaves a report too: its record's exit code, or for records from
    before exit codes were kept its report's `failed`, says so), and, when max_other_cpus is
    given, no more CPUs of other work ran beside it. A run with no record ran before the
    records existed: it is reused (its commit is "unknown")."""
    if report_path:
        report = _load_json(report_path)
        if report is None:
            return False, "left no readable report"
        if report.get("failed"):
            return False, "failed before (its report says so)"
        other = other_cpus(run_dir)
        if max_other_cpus is not None and other is not None and other > max_other_cpus:
            return False, "ran beside %.2f CPUs of other work (more than --max_other_cpus=%g)" % (
                other, max_other_cpus)
    record = read_record(run_dir)
    if record is None:
        return True, ""
    if record.get("exit_code", 0) != 0:
        return False, "failed before (exit code %s)" % record["exit_code"]
    if record.get("settings_hash") != settings_hash(settings):
        return False, "ran with other settings (%s, now %s)" % (
            record.get("settings_hash"), settings_hash(settings))
    return True, ""


def source_columns(run_dir):
    """The runs.csv columns of a run's sources and conditions: commit, binaries,
    settings_hash, other_cpus."""
    record = read_record(run_dir) or {}
    return {"commit": record.get("commit", UNKNOWN), "binaries": record.get("binaries", UNKNOWN),
            "settings_hash": record.get("settings_hash", UNKNOWN),
            "other_cpus": other_cpus(run_dir)}


def distinct(rows, key):
    """The distinct values of key in rows, joined by '+', in first-seen order."""
    seen = []
    for r in rows:
        v = r.get(key) or UNKNOWN
        if v not in seen:
            seen.append(v)
    return "+".join(seen)


def point_columns(good):
    """results.csv's columns of a point's sources and conditions, from its good runs: the
    largest other_cpus, the distinct commits and binaries."""
    return {"other_cpus_max": max((r["other_cpus"] for r in good
                                   if isinstance(r.get("other_cpus"), (int, float))), default=None),
            "commits": distinct(good, "commit") if good else "",
            "binaries": distinct(good, "binaries") if good else ""}


def mixed_warning(runs, now):
    """A line naming the sources of the reused runs that differ from this sweep's, or ""."""
    other = sorted({(r.get("commit"), r.get("binaries")) for r in runs
                    if r.get("status") == "ok" and
                    (r.get("commit"), r.get("binaries")) != (now["commit"], now["binaries"])})
    if not other:
        return ""
    return ("sweep: warning: %d source(s) other than this sweep's (commit %s, binaries %s) "
            "behind reused runs: %s; results.csv's commits/binaries columns name them per row"
            % (len(other), now["commit"], now["binaries"],
               ", ".join("commit %s binaries %s" % o for o in other)))


def busy_warning(runs, max_other_cpus):
    """A line naming the good runs that ran beside more than max_other_cpus CPUs of other
    work, or ""."""
    busy = [r for r in runs if r.get("status") == "ok" and
            isinstance(r.get("other_cpus"), (int, float)) and r["other_cpus"] > max_other_cpus]
    if not busy:
        return ""
    return ("sweep: warning: %d run(s) ran beside more than %g CPUs of other work (runs.csv's "
            "other_cpus), figures not to quote (docs/benchmarking.md): %s; on a quiet machine "
            "the same command with --rerun_busy runs them again"
            % (len(busy), max_other_cpus, ", ".join(
                "%s (%.2f)" % (os.path.basename(r.get("run_dir", "?")), r["other_cpus"])
                for r in busy)))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "other_cpus":
        sys.exit("usage: sweep_provenance.py other_cpus REPORT_JSON")
    figure = report_other_cpus(sys.argv[2])
    print("null" if figure is None else "%.2f" % figure)
