"""bench/sweep.py's flags for the tasks of one run (kept apart so sweep.py stays short)."""
import os

SINGLE_PROCESS = "single-process"  # the worker alone, no cluster (--single_baseline)


def mode_flags(mode):
    """The flags of a --modes entry: sync, async, or sspS (bounded staleness S)."""
    if mode.startswith("ssp"):
        return ["--mode=ssp", "--staleness=" + mode[3:]]
    return ["--mode=" + mode]


def dataset_flags(dataset):
    """The flags of a --datasets entry: full, subsetN or repeatN."""
    if dataset.startswith("subset"):
        return ["--train_subset=" + dataset[6:]]
    if dataset.startswith("repeat"):
        return ["--dataset_repeat=" + dataset[6:]]
    return []


def rate_bits(rate):
    """1gbit, 500mbit, 100kbit: the rate in bits/s (netns_hosts.sh's units)."""
    for suffix, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1)):
        if rate.endswith(suffix):
            return float(rate[:-len(suffix)]) * scale
    return float(rate)


def host_model_flags(c, args):
    """The emulated hosts as the chief's what-if predictions take them (chief/whatif.h): the
    link rate and token-bucket burst netns_hosts.sh gives at the run's scale, the CPU share."""
    flags = []
    if c["rate"] != "none":
        bits = rate_bits(c["rate"]) / c["scale"]
        flags += ["--link_rate=%d" % bits, "--link_burst_bytes=%d" % max(bits / 8 / 1000, 65536)]
    if args.cpus is not None:
        flags.append("--host_cpus=%g" % (args.cpus / c["scale"]))
    return flags


def task_flags(c, args, run_dir):
    """The flags every task of combination c gets."""
    length = ("--epochs=%g" % c["epochs"]) if c["epochs"] else ("--train_steps=%d" % args.steps)
    flags = ["--model=" + c["model"], "--model_width=%g" % c["model_width"],
             "--optimizer=" + c["optimizer"], "--batch_size=%d" % c["batch_size"], length,
             "--threads=1", "--log_every=100000", "--run_dir=" + os.path.join(run_dir, "run")]
    flags += dataset_flags(c["dataset"])
    if c["layout"] != SINGLE_PROCESS:
        flags += mode_flags(c["mode"]) + ["--startup_timeout=120"] + host_model_flags(c, args)
        # eval_every counts global steps; with --epochs the run's length is not known here.
        flags.append("--eval_every=%d" % (args.eval_every or
                                          (max(1, args.steps // 5) if not c["epochs"] else 0)))
    if args.target_accuracy > 0:  # stop there; --steps is the cap
        flags.append("--target_accuracy=%g" % args.target_accuracy)
    return flags + args.extra.split()
