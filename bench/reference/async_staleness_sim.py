#!/usr/bin/env python3
"""Async SGD with a chosen staleness, simulated in one process: no system, no timing.

Two (or more) simulated workers push in turn to one set of parameters with one optimizer, as
an async parameter server applies them, and each gradient is computed at the values its
worker read earlier. Where the read happens is the only thing that changes between runs:

  --stale_prob=1   a worker reads right after its own push is applied (Fulcrum's
                   --async_pull=with_push, PyTorch's push_fetch): every other worker's push
                   lands between its read and its next apply, staleness = workers - 1;
  --stale_prob=0.5 half of the time the read comes after the next worker's push
                   (PyTorch's get_params loop and Fulcrum's before_step measured 0.5-0.74);
  --stale_prob=0   every gradient is computed at the current values (sequential SGD).

So it answers, with the system taken out, how much test accuracy a given staleness costs at
given optimizer settings, and what a staleness-aware learning rate (--lr_scaling=inverse:
learning_rate / (1 + staleness) per push, Fulcrum's --staleness_aware_lr) gives back.

Same model, data, shards and initialisation as Fulcrum's and bench/reference/torch_rpc_ps.py's
(train_reference.py's classes): Fashion-MNIST, contiguous shards, a fresh permutation of each
shard per epoch, Glorot-uniform weights.

  async_staleness_sim.py --model=mlp --optimizer=momentum --learning_rate=0.05 \
      --batch_size=128 --steps=469 --stale_prob=1,0.5,0 --lr_scaling=none,inverse --seeds=1-5

Prints one line per (stale_prob, lr_scaling): the test accuracy of each seed, their median and
the mean staleness.
"""

import argparse
import os
import statistics
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_reference as ref  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["logreg", "mlp"], default="mlp")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam", "adagrad"],
                   default="momentum")
    p.add_argument("--learning_rate", type=float, default=0.05)
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--steps", type=int, default=469, help="pushes applied (global steps)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--stale_prob", default="1,0.5,0",
                   help="comma-separated: the chance that the next worker's read is older "
                        "than the push just applied")
    p.add_argument("--lr_scaling", default="none,inverse",
                   help="comma-separated: none, or inverse (lr / (1 + staleness))")
    p.add_argument("--seeds", default="1-5", help="a range a-b or a comma-separated list")
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args(argv)
    if args.learning_rate <= 0 or args.batch_size <= 0 or args.steps <= 0 or args.workers < 1:
        p.error("--learning_rate, --batch_size, --steps and --workers must be positive")
    try:
        args.stale_prob = [float(x) for x in args.stale_prob.split(",")]
    except ValueError:
        p.error(f"--stale_prob={args.stale_prob}: expected numbers in [0, 1]")
    if any(not 0 <= x <= 1 for x in args.stale_prob):
        p.error("--stale_prob: every value must be in [0, 1]")
    args.lr_scaling = args.lr_scaling.split(",")
    if any(x not in ("none", "inverse") for x in args.lr_scaling):
        p.error("--lr_scaling: expected none and/or inverse")
    try:
        if "-" in args.seeds:
            a, b = (int(x) for x in args.seeds.split("-"))
            args.seeds = list(range(a, b + 1))
        else:
            args.seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds={args.seeds}: expected a-b or a,b,c")
    return args


def simulate(args, data, seed, stale_prob, lr_scaling):
    """Returns (test accuracy, mean staleness) of one simulated async run."""
    xtr, ytr, xte, yte = data
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = ref.MODELS[args.model]()
    params = list(model.parameters())
    opt = ref.make_optimizer(args.optimizer, params, args.learning_rate)
    n = xtr.shape[0]
    bounds = [(n * k // args.workers, n * (k + 1) // args.workers) for k in range(args.workers)]
    perms = [rng.permutation(np.arange(a, b)) for a, b in bounds]
    pos = [0] * args.workers
    # What each worker read and at which global step.
    read = [[p.detach().clone() for p in params] for _ in range(args.workers)]
    version = [0] * args.workers
    current = [p.detach().clone() for p in params]
    staleness = []
    k = 0
    for step in range(args.steps):
        if pos[k] + args.batch_size > len(perms[k]):
            perms[k] = rng.permutation(np.arange(*bounds[k]))
            pos[k] = 0
        idx = torch.from_numpy(perms[k][pos[k]:pos[k] + args.batch_size])
        pos[k] += args.batch_size
        with torch.no_grad():  # the gradient at the worker's read values
            for p, v in zip(params, read[k]):
                p.copy_(v)
        opt.zero_grad()
        loss, _ = ref.loss_of(model, xtr[idx], ytr[idx])
        loss.backward()
        grads = [p.grad.detach().clone() for p in params]
        tau = step - version[k]
        staleness.append(tau)
        with torch.no_grad():  # applied to the current values, with the optimizer's slots
            for p, v, g in zip(params, current, grads):
                p.copy_(v)
                p.grad.copy_(g)
        scale = 1.0 / (1 + tau) if lr_scaling == "inverse" else 1.0
        for group in opt.param_groups:
            group["lr"] = args.learning_rate * scale
        opt.step()
        current = [p.detach().clone() for p in params]
        read[k] = [v.clone() for v in current]  # this worker reads right after its push
        version[k] = step + 1
        k = (k + 1) % args.workers
        if rng.random() >= stale_prob:  # the next worker reads after this push, too
            read[k] = [v.clone() for v in current]
            version[k] = step + 1
    with torch.no_grad():
        for p, v in zip(params, current):
            p.copy_(v)
    acc, _ = ref.evaluate(model, xte, yte)
    return acc, sum(staleness) / len(staleness)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    xtr, ytr = ref.load_split(args.data_dir, "train")
    xte, yte = ref.load_split(args.data_dir, "t10k")
    data = (xtr, ytr, xte, yte)
    print(f"{args.model}, {args.optimizer} lr {args.learning_rate}, batch {args.batch_size}, "
          f"{args.steps} pushes, {args.workers} simulated workers, seeds {args.seeds}")
    for stale_prob in args.stale_prob:
        for lr_scaling in args.lr_scaling:
            runs = [simulate(args, data, s, stale_prob, lr_scaling) for s in args.seeds]
            accs = [a for a, _ in runs]
            print(f"stale_prob {stale_prob:<4} lr_scaling {lr_scaling:<7} staleness "
                  f"{statistics.mean(t for _, t in runs):.2f}  accuracy median "
                  f"{statistics.median(accs):.4f} (min {min(accs):.4f}, max {max(accs):.4f})  "
                  + " ".join(f"{a:.4f}" for a in accs), flush=True)


if __name__ == "__main__":
    main()
