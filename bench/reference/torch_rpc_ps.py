#!/usr/bin/env python3
"""PyTorch RPC parameter server: the torch.distributed.rpc peer of a Fulcrum cluster.

One command starts the whole job on this machine (a launcher process that spawns the tasks,
like scripts/local_cluster.sh): rank 0 is the parameter server, ranks 1..N the trainers.

  torch_rpc_ps.py --workers=2 --model=mlp --optimizer=momentum --learning_rate=0.05 \
      --batch_size=128 --epochs=1 --mode=async --threads=1 --run_dir=/tmp/torch_ps

The parameter server holds the model's parameters and a torch.optim optimizer (the same
optimizer, learning rate and momentum as Fulcrum's flags; TF 1.x momentum semantics = torch SGD
with momentum and dampening 0). Each trainer loops over its own contiguous shard of
Fashion-MNIST (Fulcrum's ShardOf; a fresh permutation of the shard per epoch, batches of exactly
B rows): parameters from the PS by RPC -> forward/backward -> gradients to the PS by RPC.
  --exchange=fetch_push  (default) two RPCs per step: get_params, then push (the plain loop);
  --exchange=push_fetch  one RPC per step: the push answers with the parameters right after
                         it was applied (the batch-RPC PS tutorial's update_and_fetch_model,
                         and what Fulcrum's PushPull does).
  async: the PS applies each gradient on arrival, under one lock (one optimizer step per push;
         the global step counts pushes).
  sync:  SyncReplicasOptimizer semantics: the PS sums the N trainers' gradients of a step,
         applies their mean once and bumps the global step; each trainer's push is an
         rpc.functions.async_execution future that completes when its step has been applied.
Trainers stop once the global step the PS reported reaches the target (--train_steps global
steps, or --epochs counted as Fulcrum's GlobalTrainSteps does: ceil(epochs * 60000 / (B * N))
in sync, ceil(epochs * 60000 / B) in async), as Fulcrum's workers do.

Models as Fulcrum's (and train_reference.py's, whose classes this reuses): logreg 784->10,
mlp 784-256-128-10 ReLU; weights Glorot-uniform, biases zero; softmax cross-entropy, batch mean.
The convolutional ones are cnn_reference.py's classes on the 28x28x1 images ([N, 1, 28, 28]
NCHW), with models/cnn_zoo.cc's initializers: mnist_cnn (conv5x5x32-pool-conv5x5x64-pool-
fc1024-dropout0.4-fc; Glorot kernels, zero biases) and cifar10_cnn (TF's CIFAR-10 tutorial
graph on the Fashion-MNIST images, as compare_tf_ps.sh runs it; truncated-normal kernels,
biases 0 / 0.1, and L2 weight decay 0.004 on the local3/local4 kernels: as cnn_reference.py
does, a weight_decay in those parameters' group of the PS's optimizer, whose gradient
0.004 * w is what TF's 0.004 * l2_loss(w) in the loss adds; in async mode it is taken at the
PS's current values rather than at the trainer's stale copy). --channels_last runs the
trainers' forward/backward in the channels_last memory format (compare_torch_ps.sh gives it
to the CNNs: faster for pip torch's oneDNN convolutions here). The ps evaluates the test set
in batches of EVAL_BATCH, on every core (training is over by then).

Output (--run_dir): worker-<i>/summary.json and steps.csv per trainer (examples_per_sec =
local steps after the first 20, as Fulcrum's), ps-0/summary.json and pushes.csv (every push:
trainer, the version (global step) of the parameters its gradient was computed at, and the
global step when it was applied, so staleness = applied_at - version), and report.json with
workers_examples_per_sec (sum over trainers), final_test_accuracy (the PS evaluates the final
parameters on the test set), global_step and the staleness figures.

Deadlines: every RPC has --rpc_timeout (also the rendezvous' timeout); each task process
ends itself after --timeout seconds (SIGALRM); the launcher kills and reaps every task on
every exit path (a task's failure, a signal, its own deadline). Bad flags exit 2.
"""

import argparse
import collections
import csv
import ctypes
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import torch
import torch.distributed.rpc as rpc
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_reference as ref  # noqa: E402  (the models, the IDX reader, the optimizers)
import cnn_reference as cnn  # noqa: E402  (the convolutional models)
TRAIN_EXAMPLES = 60000  # Fashion-MNIST's train split (checked when the data is read)
IMAGE = (1, 28, 28)  # Fashion-MNIST's images, channels first: the CNNs' input
CNN_MODELS = {"mnist_cnn": cnn.MnistCnn, "cifar10_cnn": cnn.Cifar10Cnn}
EVAL_BATCH = 500  # test images per forward at the ps's evaluation: bounds a CNN's memory
# (cifar10_cnn: ~1 MB of activations per image, ~0.5 GB a batch; 10k at once ~10 GB)


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["logreg", "mlp", *CNN_MODELS], default="logreg")
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam", "adagrad"], default="sgd")
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9, help="of --optimizer=momentum")
    p.add_argument("--batch_size", type=positive_int, default=128, help="per trainer and step")
    p.add_argument("--train_steps", type=int, default=0, help="global steps (wins over --epochs)")
    p.add_argument("--epochs", type=float, default=0, help="epochs of pushes when --train_steps=0")
    p.add_argument("--mode", choices=["sync", "async"], default="async")
    p.add_argument("--exchange", choices=["fetch_push", "push_fetch"], default="fetch_push")
    p.add_argument("--staleness_aware_lr", action="store_true",
                   help="async: apply each push at learning_rate / (1 + its staleness), as "
                        "Fulcrum's --staleness_aware_lr does")
    p.add_argument("--channels_last", action="store_true",
                   help="CNNs: the trainers' model and batches in channels_last memory format")
    p.add_argument("--workers", type=positive_int, default=2, help="trainer processes")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads per process")
    p.add_argument("--rpc_threads", type=positive_int, default=4,
                   help="TensorPipe num_worker_threads per process")
    p.add_argument("--transports", default="",
                   help="TensorPipe transports, comma-separated (e.g. shm,uv); empty = torch's")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--run_dir", required=True, help="where the summaries and report go")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (0 = a free one)")
    p.add_argument("--rpc_timeout", type=float, default=60.0, help="seconds per RPC")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for the whole job")
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # a spawned task
    args = p.parse_args(argv)
    if args.learning_rate <= 0 or not math.isfinite(args.learning_rate):
        p.error("--learning_rate must be positive")
    if not 0 <= args.momentum < 1:
        p.error("--momentum must be in [0, 1)")
    if args.train_steps < 0 or args.epochs < 0 or (args.train_steps == 0 and args.epochs == 0):
        p.error("give --train_steps > 0 or --epochs > 0")
    if args.staleness_aware_lr and args.mode != "async":
        p.error("--staleness_aware_lr is for --mode=async")
    if args.channels_last and args.model not in CNN_MODELS:
        p.error("--channels_last is for the convolutional models")
    if args.rpc_timeout <= 0 or args.timeout <= 0:
        p.error("--rpc_timeout and --timeout must be positive")
    if not 0 <= args.port < 65536:
        p.error("--port must be in [0, 65535]")
    if not -1 <= args.rank <= args.workers:
        p.error("--rank out of range")
    return args


def global_train_steps(args):
    """Fulcrum's runtime::GlobalTrainSteps for the full train split."""
    if args.train_steps > 0:
        return args.train_steps
    per_step = args.batch_size * (args.workers if args.mode == "sync" else 1)
    return max(1, math.ceil(args.epochs * TRAIN_EXAMPLES / per_step))


def shard_of(total, index, count):
    # Contiguous, near-equal shards (Fulcrum's data/batcher.cc ShardOf).
    base, extra = divmod(total, count)
    begin = index * base + min(index, extra)
    return begin, begin + base + (1 if index < extra else 0)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------
# The launcher: spawns rank 0 (ps) and ranks 1..N (trainers), waits with a deadline, and
# kills and reaps them on every way out.

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    # A task never outlives the launcher, even one killed by SIGKILL (PR_SET_PDEATHSIG = 1).
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def launch(args, argv):
    os.makedirs(args.run_dir, exist_ok=True)
    port = args.port or free_port()
    procs = []

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    deadline = time.monotonic() + args.timeout
    rc = 0
    try:
        for rank in range(args.workers + 1):
            name = "ps-0" if rank == 0 else f"worker-{rank - 1}"
            log = open(os.path.join(args.run_dir, name + ".log"), "w")
            procs.append((name, subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), *argv, f"--rank={rank}",
                 f"--port={port}"], stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent)))
            log.close()
        pending = list(procs)
        while pending and rc == 0:
            if time.monotonic() > deadline:
                print(f"torch_rpc_ps: the job ran past --timeout={args.timeout:g} s",
                      file=sys.stderr)
                rc = 1
                break
            for name, proc in list(pending):
                code = proc.poll()
                if code is None:
                    continue
                pending.remove((name, proc))
                if code != 0:
                    print(f"torch_rpc_ps: {name} exited with {code}; see "
                          f"{os.path.join(args.run_dir, name + '.log')}", file=sys.stderr)
                    rc = 1
            time.sleep(0.05)
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.terminate()
        stop_by = time.monotonic() + 5
        for _, proc in procs:
            try:
                proc.wait(timeout=max(0.1, stop_by - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if rc != 0:
        return rc
    report_path = os.path.join(args.run_dir, "report.json")
    with open(report_path) as f:
        report = json.load(f)
    print("torch_rpc_ps: " + json.dumps({k: report.get(k) for k in (
        "workers_examples_per_sec", "final_test_accuracy", "global_step", "staleness_mean")}))
    return 0


# ---------------------------------------------------------------------------------------
# Tasks. Everything below runs in a spawned process.

def task_main(args):
    signal.signal(signal.SIGALRM, lambda *_: os._exit(124))  # the task's own deadline
    signal.alarm(max(1, int(args.timeout)))
    torch.set_num_threads(args.threads)
    options = rpc.TensorPipeRpcBackendOptions(
        num_worker_threads=args.rpc_threads, rpc_timeout=args.rpc_timeout,
        init_method=f"tcp://127.0.0.1:{args.port}",
        _transports=[t for t in args.transports.split(",") if t] or None)
    name = "ps" if args.rank == 0 else f"trainer{args.rank - 1}"
    if args.rank == 0:
        global PS
        PS = ParameterServer(args)  # before init_rpc: no trainer can call it earlier
    rpc.init_rpc(name, rank=args.rank, world_size=args.workers + 1, rpc_backend_options=options)
    try:
        if args.rank == 0:
            PS.serve()
        else:
            Trainer(args).run()
    finally:
        rpc.shutdown(graceful=True, timeout=args.rpc_timeout)
    if args.rank == 0:
        PS.finish()
    return 0


def trunc_normal(t, std):
    # TF's truncated_normal (Fulcrum's Initializer::TruncatedNormal): redrawn beyond 2 stddev.
    torch.nn.init.trunc_normal_(t, std=std, a=-2 * std, b=2 * std)


def init_cnn(name, model):
    """models/cnn_zoo.cc's initializers (cnn_reference.py keeps PyTorch's defaults)."""
    with torch.no_grad():
        if name == "mnist_cnn":
            for layer in (model.conv1, model.conv2, model.fc1, model.fc2):
                torch.nn.init.xavier_uniform_(layer.weight)  # TF's fans for [O, I, KH, KW]
                torch.nn.init.zeros_(layer.bias)
            return
        for layer, std, bias in ((model.conv1, 5e-2, 0.0), (model.conv2, 5e-2, 0.1),
                                 (model.local3, 0.04, 0.1), (model.local4, 0.04, 0.1),
                                 (model.softmax_linear, 1.0 / 192.0, 0.0)):
            trunc_normal(layer.weight, std)
            torch.nn.init.constant_(layer.bias, bias)


def make_model(args):
    torch.manual_seed(args.seed)
    if args.model not in CNN_MODELS:
        return {"logreg": ref.LogReg, "mlp": ref.MLP}[args.model]()
    model = CNN_MODELS[args.model](*IMAGE, 10, dropout=True)
    init_cnn(args.model, model)
    model.classifier = True  # for ref.evaluate / ref.loss_of
    return model


def param_groups(args, model):
    # cifar10_cnn's L2 weight decay, as cnn_reference.py applies it: the optimizer's
    # weight_decay (grad += wd * w before the update) on the decayed kernels only.
    decay = getattr(type(model), "WEIGHT_DECAY", {})
    if not decay:
        return list(model.parameters())
    named = list(model.named_parameters())
    return ([{"params": [q for n, q in named if n not in decay]}] +
            [{"params": [q], "weight_decay": decay[n]} for n, q in named if n in decay])


def make_optimizer(args, params):
    if args.optimizer == "momentum":
        return torch.optim.SGD(params, lr=args.learning_rate, momentum=args.momentum,
                               dampening=0.0)
    return ref.make_optimizer(args.optimizer, params, args.learning_rate)


def as_input(args, x):
    """Flat [N, 784] pixels -> the model's input: [N, 1, 28, 28] (a view) for the CNNs."""
    return x.view(x.shape[0], *IMAGE) if args.model in CNN_MODELS else x


class ParameterServer:
    """Rank 0: the parameters, the optimizer, the global step. RPC handlers run on
    TensorPipe's threads; one lock orders every read and apply."""

    def __init__(self, args):
        self.args = args
        self.model = make_model(args)
        self.params = list(self.model.parameters())
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.opt = make_optimizer(args, param_groups(args, self.model))
        self.lock = threading.Lock()
        self.global_step = 0
        self.target = global_train_steps(args)
        self.pushes = []  # (trainer, version, applied_at, t)
        self.summaries = {}
        self.all_done = threading.Event()
        # sync: this step's sum, how many gradients it holds, and the future they wait on
        self.count = 0
        self.step_future = torch.futures.Future()
        self.dropped = 0
        self.t0 = time.perf_counter()

    def snapshot(self):  # under the lock: a consistent copy (the optimizer writes in place)
        return [p.detach().clone() for p in self.params]

    def apply(self):  # under the lock: p.grad holds the gradient (sync: the mean)
        self.opt.step()
        self.global_step += 1

    def push_async(self, trainer, version, grads, fetch):
        with self.lock:
            self.pushes.append((trainer, version, self.global_step, time.perf_counter() - self.t0))
            for p, g in zip(self.params, grads):
                p.grad.copy_(g)
            if self.args.staleness_aware_lr:
                scale = 1.0 / (1 + max(0, self.global_step - version))
                for group in self.opt.param_groups:
                    group["lr"] = self.args.learning_rate * scale
            self.apply()
            return self.global_step, (self.snapshot() if fetch else None)

    def push_sync(self, trainer, version, grads, fetch):
        with self.lock:
            if version != self.global_step:  # SyncReplicasOptimizer drops stale gradients
                self.dropped += 1
                fut = torch.futures.Future()
                fut.set_result((self.global_step, self.snapshot() if fetch else None))
                return fut
            self.pushes.append((trainer, version, self.global_step, time.perf_counter() - self.t0))
            if self.count == 0:
                for p, g in zip(self.params, grads):
                    p.grad.copy_(g)
            else:
                for p, g in zip(self.params, grads):
                    p.grad.add_(g)
            self.count += 1
            fut = self.step_future
            if self.count == self.args.workers:
                for p in self.params:
                    p.grad.div_(self.count)
                self.apply()
                self.count = 0
                self.step_future = torch.futures.Future()
                fut.set_result((self.global_step, self.snapshot() if fetch else None))
            return fut

    def get_params(self):
        with self.lock:
            return self.global_step, self.snapshot()

    def trainer_done(self, trainer, summary):
        with self.lock:
            self.summaries[trainer] = summary
            if len(self.summaries) == self.args.workers:
                self.all_done.set()

    def serve(self):
        # Until every trainer has handed in its summary (the trainers have their own deadlines).
        if not self.all_done.wait(timeout=self.args.timeout):
            raise TimeoutError("the trainers did not finish within --timeout")

    def finish(self):
        args = self.args
        x_test, y_test = ref.load_split(args.data_dir, "t10k")
        # Training is over (the trainers have exited): the evaluation may use every core.
        torch.set_num_threads(max(args.threads, len(os.sched_getaffinity(0))))
        model, x_test = self.model, as_input(args, x_test)
        if args.channels_last:  # as the trainers run it (cifar10_cnn's forward: ~25 % faster)
            model = model.to(memory_format=torch.channels_last)
            x_test = x_test.contiguous(memory_format=torch.channels_last)
        acc, test_loss = ref.evaluate(model, x_test, y_test, chunk=EVAL_BATCH)
        stale = [applied - version for _, version, applied, _ in self.pushes]
        hist = collections.Counter(stale)
        ps_dir = os.path.join(args.run_dir, "ps-0")
        os.makedirs(ps_dir, exist_ok=True)
        with open(os.path.join(ps_dir, "pushes.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["trainer", "version", "applied_at", "staleness", "seconds"])
            for trainer, version, applied, t in self.pushes:
                w.writerow([trainer, version, applied, applied - version, f"{t:.6f}"])
        ps_summary = {
            "pushes": len(self.pushes), "pushes_dropped": self.dropped,
            "global_step": self.global_step, "train_steps": self.target,
            "staleness_mean": sum(stale) / len(stale) if stale else None,
            "staleness_histogram": {str(k): hist[k] for k in sorted(hist)},
        }
        write_json(os.path.join(ps_dir, "summary.json"), ps_summary)
        workers = [self.summaries[i] for i in sorted(self.summaries)]
        rates = [w["examples_per_sec"] for w in workers]
        report = {
            "framework": f"pytorch {torch.__version__} (torch.distributed.rpc, TensorPipe)",
            "mode": args.mode, "exchange": args.exchange, "model": args.model,
            "channels_last": args.channels_last,
            "staleness_aware_lr": args.staleness_aware_lr,
            "optimizer": args.optimizer, "learning_rate": args.learning_rate,
            "momentum": args.momentum if args.optimizer == "momentum" else None,
            "batch_size": args.batch_size, "workers": args.workers, "threads": args.threads,
            "rpc_threads": args.rpc_threads, "transports": args.transports or "default",
            "seed": args.seed, "train_steps": self.target,
            "workers_examples_per_sec": (sum(rates) if all(r is not None for r in rates)
                                         else None),
            "final_test_accuracy": acc, "final_test_loss": test_loss,
            "worker_local_steps": [w["local_steps"] for w in workers],
            **ps_summary,
        }
        write_json(os.path.join(args.run_dir, "report.json"), report)
        print(f"ps: global step {self.global_step}, test accuracy {acc:.4f}, staleness mean "
              f"{ps_summary['staleness_mean']}", flush=True)


PS = None


# Module-level RPC targets (pickled by name; the PS object is the process's global).
def _push(trainer, version, grads, fetch):
    return PS.push_async(trainer, version, grads, fetch)


@rpc.functions.async_execution
def _push_sync(trainer, version, grads, fetch):
    return PS.push_sync(trainer, version, grads, fetch)


def _get_params():
    return PS.get_params()


def _trainer_done(trainer, summary):
    PS.trainer_done(trainer, summary)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.index = args.rank - 1
        x, y = ref.load_split(args.data_dir, "train")
        if x.shape[0] != TRAIN_EXAMPLES:
            raise ValueError(f"expected {TRAIN_EXAMPLES} training examples, got {x.shape[0]}")
        begin, end = shard_of(x.shape[0], self.index, args.workers)
        self.x = as_input(args, x[begin:end].contiguous())
        self.y = y[begin:end].contiguous()
        if self.x.shape[0] < args.batch_size:
            raise ValueError("--batch_size is larger than a trainer's shard")
        self.model = make_model(args)  # the values come from the PS; only the shapes count
        if args.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.params = list(self.model.parameters())
        self.gen = torch.Generator().manual_seed(args.seed * 1000 + self.index)

    def load(self, values):
        with torch.no_grad():
            for p, v in zip(self.params, values):
                p.copy_(v)

    def run(self):
        args = self.args
        B, n = args.batch_size, self.x.shape[0]
        per_epoch = n // B
        target = global_train_steps(args)
        fetch = args.exchange == "push_fetch"
        push = _push_sync if args.mode == "sync" else _push
        version, values = rpc.rpc_sync("ps", _get_params)
        global_step = version
        steps = []  # (local step, global step, loss, seconds)
        perm = None
        local = 0
        t_train = time.perf_counter()
        t_prev, t_steady = t_train, None
        while global_step < target:
            if not fetch and local > 0:
                version, values = rpc.rpc_sync("ps", _get_params)
            self.load(values)
            i = local % per_epoch
            if i == 0:
                perm = torch.randperm(n, generator=self.gen)
            idx = perm[i * B:(i + 1) * B]
            for p in self.params:
                p.grad = None
            xb = self.x.index_select(0, idx)
            if args.channels_last:
                xb = xb.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(self.model(xb), self.y.index_select(0, idx))
            loss.backward()
            global_step, new_values = rpc.rpc_sync(
                "ps", push, args=(self.index, version, [p.grad for p in self.params], fetch))
            if fetch:
                version, values = global_step, new_values
            local += 1
            t_now = time.perf_counter()
            steps.append((local, global_step, float(loss), t_now - t_prev))
            t_prev = t_now
            if local == ref.WARMUP_STEPS:
                t_steady = t_now
        t_end = time.perf_counter()
        wdir = os.path.join(args.run_dir, f"worker-{self.index}")
        os.makedirs(wdir, exist_ok=True)
        with open(os.path.join(wdir, "steps.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "global_step", "loss", "wall_ms"])
            for s, g, l, dt in steps:
                w.writerow([s, g, f"{l:.6f}", f"{dt * 1e3:.3f}"])
        summary = {
            "task_index": self.index, "local_steps": local, "last_global_step": global_step,
            "examples_per_sec": ((local - ref.WARMUP_STEPS) * B / (t_end - t_steady)
                                 if t_steady is not None and local > ref.WARMUP_STEPS
                                 and t_end > t_steady else None),
            "examples_per_sec_all_steps": local * B / max(t_end - t_train, 1e-9),
            "final_train_loss": steps[-1][2] if steps else None,
            "train_seconds": t_end - t_train,
        }
        write_json(os.path.join(wdir, "summary.json"), summary)
        rpc.rpc_sync("ps", _trainer_done, args=(self.index, summary))


def main():
    argv = [a for a in sys.argv[1:] if not a.startswith(("--rank=", "--port="))]
    args = parse_args()
    if args.rank < 0:
        return launch(args, argv)
    return task_main(args)


if __name__ == "__main__":
    sys.exit(main())
