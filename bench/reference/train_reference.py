#!/usr/bin/python3
"""PyTorch (CPU) reference trainer for Fulcrum's single-process worker.

Trains the same models, the same way, with the same flags as `build/bin/worker`
and writes the same summary.json keys, so that bench/compare_reference.sh can run
both side by side. Models (weights xavier_uniform_, biases zero):
  logreg       784->10, softmax cross-entropy (mean over the batch)
  mlp          784-256-128-10, ReLU, softmax cross-entropy
  autoencoder  784-256-128-256-784, sigmoid after every layer (output too),
               MSE (mean over all elements) against the input
  mnist_cnn    cnn_reference.py's MnistCnn (conv5x5x32-pool2-conv5x5x64-pool2-fc1024-
               dropout0.4-fc, models/cnn_zoo.cc's layer list) on the [N, 1, 28, 28] images,
               Glorot-uniform kernels and zero biases as cnn_zoo.cc initialises them
Optimizers follow TensorFlow 1.x semantics:
  sgd; momentum (0.9, accum = m*accum + g, var -= lr*accum = torch SGD momentum,
  dampening 0); adam (0.9, 0.999, eps 1e-8; torch adds eps to the bias-corrected
  sqrt(v), TF to the raw one -- a negligible difference); adagrad (initial
  accumulator 0.1, no epsilon).
Data: Fashion-MNIST IDX .gz files read with gzip + numpy (no torchvision, no
network); pixels / 255 as float32 [N, 784]; the whole train set is one tensor, each
epoch gets a fresh permutation and every step indexes a batch of exactly B rows
with a slice of it (the remainder is dropped).
examples_per_sec counts steady state only: the steps after the first 20.

Run it with the environment docs/benchmarking.md asks for (see bench/compare_reference.sh):
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OMP_NUM_THREADS=T
  OPENBLAS_NUM_THREADS=T MALLOC_MMAP_THRESHOLD_=2000000000
  MALLOC_TRIM_THRESHOLD_=4000000000 /usr/bin/python3 train_reference.py ...
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cnn_reference  # noqa: E402  (the convolutional models)

WARMUP_STEPS = 20  # steps left out of examples_per_sec, as Fulcrum does


def parse_bool(text):
    value = str(text).strip().lower()
    if value in ("1", "true", "t", "yes", "y"):
        return True
    if value in ("0", "false", "f", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def read_idx(path):
    """Reads an IDX file (gzip-compressed or not) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path}: size {data.size} does not match header {dims}")
    return data.reshape(dims)


def find_file(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{stem}[.gz] not found in {data_dir}")


def load_split(data_dir, prefix):
    images = read_idx(find_file(data_dir, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find_file(data_dir, f"{prefix}-labels-idx1-ubyte"))
    x = torch.from_numpy(images.reshape(images.shape[0], -1).astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    return x.contiguous(), y


class Dense(torch.nn.Linear):
    def reset_parameters(self):
        torch.nn.init.xavier_uniform_(self.weight)
        torch.nn.init.zeros_(self.bias)


class LogReg(torch.nn.Module):
    classifier = True

    def __init__(self):
        super().__init__()
        self.fc = Dense(784, 10)

    def forward(self, x):
        return self.fc(x)


class MLP(torch.nn.Module):
    classifier = True

    def __init__(self):
        super().__init__()
        self.fc1 = Dense(784, 256)
        self.fc2 = Dense(256, 128)
        self.fc3 = Dense(128, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class AutoEncoder(torch.nn.Module):
    classifier = False

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            [Dense(784, 256), Dense(256, 128), Dense(128, 256), Dense(256, 784)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.sigmoid(layer(x))
        return x


class MnistCnn(torch.nn.Module):
    classifier = True

    def __init__(self):
        super().__init__()
        self.net = cnn_reference.MnistCnn(1, 28, 28, 10, dropout=True)
        for m in self.net.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                torch.nn.init.xavier_uniform_(m.weight)
                torch.nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.net(x.view(-1, 1, 28, 28))


MODELS = {"logreg": LogReg, "mlp": MLP, "autoencoder": AutoEncoder, "mnist_cnn": MnistCnn}


def make_optimizer(name, params, lr):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, dampening=0.0)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8)
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, lr_decay=0.0,
                                   initial_accumulator_value=0.1, eps=0.0)
    raise ValueError(f"unknown optimizer {name}")


def loss_of(model, x, y):
    out = model(x)
    if model.classifier:
        return F.cross_entropy(out, y), out
    return F.mse_loss(out, x), out


def evaluate(model, x, y, chunk=2000):
    model.eval()
    total_loss = 0.0
    correct = 0
    with torch.no_grad():
        for start in range(0, x.shape[0], chunk):
            xb, yb = x[start:start + chunk], y[start:start + chunk]
            loss, out = loss_of(model, xb, yb)
            total_loss += float(loss) * xb.shape[0]
            if model.classifier:
                correct += int((out.argmax(dim=1) == yb).sum())
    model.train()
    n = x.shape[0]
    return (correct / n if model.classifier else None), total_loss / n


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(MODELS), default="logreg")
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--optimizer", choices=["sgd", "momentum", "adam", "adagrad"],
                   default="sgd")
    p.add_argument("--train_steps", type=int, default=0,
                   help="steps to train (wins over --epochs when > 0)")
    p.add_argument("--epochs", type=float, default=0,
                   help="epochs to train when --train_steps is 0")
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--dataset", default="mnist", choices=["mnist"])
    p.add_argument("--run_dir", default="", help="writes RUN_DIR/summary.json")
    p.add_argument("--summary", default="", help="summary.json path (wins over --run_dir)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log_every", type=int, default=100, help="0: no progress lines")
    p.add_argument("--eval", type=parse_bool, nargs="?", const=True, default=True,
                   help="final test evaluation (--eval=false skips it)")
    p.add_argument("--noeval", dest="eval", action="store_false")
    args = p.parse_args(argv)

    if args.batch_size <= 0 or args.threads <= 0 or args.learning_rate <= 0:
        p.error("--batch_size, --threads and --learning_rate must be positive")
    t_wall = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    try:
        x_train, y_train = load_split(args.data_dir, "train")
        x_test, y_test = (load_split(args.data_dir, "t10k") if args.eval else (None, None))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    n, b = x_train.shape[0], args.batch_size
    per_epoch = n // b
    if per_epoch == 0:
        p.error(f"--batch_size {b} is larger than the train set ({n})")
    steps = args.train_steps if args.train_steps > 0 else int(args.epochs * per_epoch)
    if steps <= 0:
        p.error("give --train_steps or --epochs")

    model = MODELS[args.model]()
    opt = make_optimizer(args.optimizer, model.parameters(), args.learning_rate)
    print(f"reference: torch {torch.__version__} model={args.model} batch={b} "
          f"optimizer={args.optimizer} lr={args.learning_rate} steps={steps} "
          f"threads={torch.get_num_threads()}", flush=True)

    perm = None
    t_train = time.perf_counter()
    t_steady = t_train
    t_log, log_step = t_train, 0
    loss_value = float("nan")
    step_times = []  # seconds per steady-state step, for the p50/p99 keys
    t_prev = t_train
    for step in range(1, steps + 1):
        i = (step - 1) % per_epoch
        if i == 0:
            perm = torch.randperm(n, generator=gen)
        idx = perm[i * b:(i + 1) * b]
        xb = x_train.index_select(0, idx)
        yb = y_train.index_select(0, idx)
        opt.zero_grad(set_to_none=True)
        loss, _ = loss_of(model, xb, yb)
        loss.backward()
        opt.step()
        t_now = time.perf_counter()
        if step > WARMUP_STEPS:
            step_times.append(t_now - t_prev)
        t_prev = t_now
        if step == WARMUP_STEPS:
            t_steady = t_now
        if args.log_every > 0 and (step % args.log_every == 0 or step == steps):
            now = time.perf_counter()
            loss_value = float(loss)
            rate = (step - log_step) * b / max(now - t_log, 1e-9)
            print(f"step {step} loss {loss_value:.6f} examples/sec {rate:.1f}", flush=True)
            t_log, log_step = now, step
    t_end = time.perf_counter()
    if args.log_every <= 0:
        loss_value = float(loss)

    steady_steps = steps - WARMUP_STEPS if steps > WARMUP_STEPS else steps
    steady_start = t_steady if steps > WARMUP_STEPS else t_train
    examples_per_sec = steady_steps * b / max(t_end - steady_start, 1e-9)
    step_times.sort()

    def pct_ms(q):
        if not step_times:
            return None
        return 1e3 * step_times[min(len(step_times) - 1, int(q * len(step_times)))]

    acc = test_loss = None
    if args.eval:
        acc, test_loss = evaluate(model, x_test, y_test)
        if acc is not None:
            print(f"test accuracy {acc:.4f} loss {test_loss:.6f}", flush=True)
        else:
            print(f"test loss {test_loss:.6f}", flush=True)

    summary = {
        "model": args.model,
        "mode": "single",
        "dataset": args.dataset,
        "batch_size": b,
        "steps": steps,
        "threads": args.threads,
        "optimizer": args.optimizer,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "epochs": steps / per_epoch,
        "final_test_accuracy": acc,
        "final_test_loss": test_loss,
        "final_train_loss": loss_value,
        "examples_per_sec": examples_per_sec,
        "examples_per_sec_all_steps": steps * b / max(t_end - t_train, 1e-9),
        "step_time_p50_ms": pct_ms(0.50),
        "step_time_p99_ms": pct_ms(0.99),
        "wall_seconds": time.perf_counter() - t_wall,
        "train_seconds": t_end - t_train,
        "framework": f"pytorch {torch.__version__}",
    }
    print(f"examples/sec (steady, after {WARMUP_STEPS} steps) {examples_per_sec:.1f}",
          flush=True)
    path = args.summary or (os.path.join(args.run_dir, "summary.json") if args.run_dir else "")
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
