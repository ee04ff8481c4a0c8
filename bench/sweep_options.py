"""bench/sweep.py's options (kept apart so sweep.py stays short)."""
import argparse

from sweep_provenance import MAX_OTHER_CPUS

# Every option: (name, default, type, help). --help prints each with its default.
OPTIONS = [
    ("--layouts", "ps-w-w,pw-w", str, "cluster layouts: ps-w-w (the ps tasks on hosts of their "
     "own), pw-pw (a ps and a worker on every host), pw-w (ps 0 beside worker 0)"),
    ("--workers", "2", str, "worker counts"),
    ("--ps", "1", str, "ps counts"),
    ("--batch_sizes", "128", str, "batch sizes per worker"),
    ("--modes", "sync", str, "sync, async and/or sspS (S: the staleness bound, e.g. ssp3)"),
    ("--rates", "none", str, "link rates of the emulated hosts (e.g. 1gbit,10gbit), or none"),
    ("--model", "logreg", str, "one model (--models takes a list)"),
    ("--models", "", str, "models (overrides --model)"),
    ("--widths", "1", str, "--model_width values"),
    ("--datasets", "full", str, "full, subsetN (the first N examples), repeatN (N times per epoch)"),
    ("--epochs", "", str, "epochs per run instead of --steps (empty: --steps)"),
    ("--optimizers", "sgd", str, "sgd, momentum, adam, adagrad, rmsprop"),
    ("--hosts", "packed", str, "packed (as few hosts as the layout allows) or per_task"),
    ("--cpus", None, float, "CPU share of every emulated host at scale 1 (netns_hosts.sh --cpus)"),
    ("--host_examples_per_sec", None, float, "instead of --cpus: the examples/s each host "
     "computes beside its link (a study's machine, e.g. its single-GPU figure)"),
    ("--examples_per_cpu", None, float, "with --host_examples_per_sec: the examples/s one CPU "
     "of this machine computes for the model and batch (measured)"),
    ("--scales", "1", str, "with --cpus: scale F gives each host --cpus/F CPUs and rate/F"),
    ("--cpu_period_us", 10000, int, "CFS period of the hosts' CPU shares"),
    ("--nodes", "", str, "real machines for the clusters (launch_ssh.sh); no link emulation"),
    ("--nodes_file", "", str, "a file of node names, one per line (instead of --nodes)"),
    ("--launch_exec", "", str, "replaces ssh for --nodes (launch_ssh.sh --exec)"),
    ("--remote_dir", "", str, "the checkout's folder on the nodes (default: this one's path)"),
    ("--ssh", "", str, "the ssh command for --nodes (launch_ssh.sh --ssh)"),
    ("--base_port", 2222, int, "first port of a spec (make_spec.py --base_port)"),
    ("--steps", 300, int, "global steps per run"),
    ("--repeats", 1, int, "runs per combination (results.csv: the medians)"),
    ("--target_accuracy", 0.0, float, "stop at this test accuracy (0: train --steps)"),
    ("--eval_every", 0, int, "global steps between evaluations (0: steps/5); the resolution "
     "of time to target accuracy"),
    ("--extra", "", str, "more flags for every task, e.g. \"--learning_rate=0.03\""),
    ("--timeout", 600, int, "seconds per run at scale 1 (times F at scale 1/F)"),
    ("--max_other_cpus", MAX_OTHER_CPUS, float, "CPUs of other work beside a run (on its busiest "
     "machine: other programs, kernel work charged to no process) above which the run is named "
     "in a warning, and with --rerun_busy run again instead of reused"),
    ("--out", None, str, "the sweep's folder (required): runs/, runs.csv, results.csv, index.html"),
    ("--prefix", "sw", str, "name prefix of the emulated hosts (netns_hosts.sh --prefix): two "
     "sweeps at once on one machine need different prefixes"),
]


def parse_args(doc):
    p = argparse.ArgumentParser(description=doc.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    for name, default, kind, text in OPTIONS:
        p.add_argument(name, default=default, type=kind, help=text, required=name == "--out")
    p.add_argument("--single_baseline", action="store_true",
                   help="add a single-process row per setting (the worker alone on host 1)")
    p.add_argument("--rerun_busy", action="store_true",
                   help="run again each finished run that ran beside more than "
                        "--max_other_cpus of other work, instead of reusing it")
    p.add_argument("--dry_run", action="store_true",
                   help="list the runs (and those skipped, with why) and an estimate of their "
                        "time, and run nothing")
    return p.parse_args()
