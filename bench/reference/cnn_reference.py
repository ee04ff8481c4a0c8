#!/usr/bin/env python3
"""PyTorch (CPU) counterparts of Fulcrum's convolutional models, timed the way Fulcrum's
worker reports examples/sec: a full training step (forward, loss, backward, optimizer update)
on a batch already in memory, steady state (the first 20 steps dropped), median over the rest.

Layer lists follow models/cnn_zoo.cc exactly (mnist_cnn: conv5x5x32-pool2-conv5x5x64-pool2-
fc1024-dropout0.4-fc; cifar10_cnn: conv5x5x64-pool3s2(SAME)-LRN-conv5x5x64-LRN-pool3s2(SAME)-
fc384-fc192-fc with cnn_zoo.cc's L2 weight decay 0.004 on the local3/local4 kernels; alexnet on
227x227x3 and vgg16 on 32x32x3 as tf_cnn_benchmarks). --dropout=0 leaves the dropout layers
out (mnist_cnn's known-good PyTorch figure is taken that way; what dropout costs is in
docs/benchmarking.md). --momentum=0.9 is SGD with momentum and dampening 0, TF's
MomentumOptimizer (what compare_cnn.sh gives all three sides); --momentum=0 (default) is plain
SGD.

PyTorch gets its best configuration from its environment, which bench/compare_cnn.sh sets
(docs/benchmarking.md, "Give the peer its best"): the OpenMP build of OpenBLAS first on
LD_LIBRARY_PATH, OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = --threads, and
MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000. Without the glibc
settings every large activation and gradient buffer is an mmap/munmap per step and its pages
are faulted in again (zeroed by the kernel) every step: that alone halved mnist_cnn's rate on
2 threads. The script reports what it ran with ("env" in its JSON line: the BLAS library
loaded, OpenMP/OpenBLAS thread settings, whether the glibc settings are in effect) and warns
on stderr about any setting that is missing. Its own oneDNN (MKL-DNN) convolutions; the
channels_last memory format with --channels_last (compare_cnn.sh picks per model the faster
one measured on this machine); the thread count given by --threads.

On a GPU (--device=cuda) PyTorch's best configuration is its default one plus
cudnn.benchmark (each convolution's algorithm found by timing, as Fulcrum's cudnnFind does),
which lets cuDNN convolutions use TF32 tensor cores; --strict_fp32 turns TF32 off for
convolutions and matrix products, the arithmetic Fulcrum's CUDA backend uses. Each timed step
ends with a device synchronisation, so the time is the step's, not its launch's.

Usage: cnn_reference.py --model=mnist_cnn --batch=128 --threads=2 --steps=60 [--channels_last]
                        [--dropout=1] [--momentum=0.9] [--device=cuda [--strict_fp32]]
Prints one JSON line: {"model", "batch", "threads", "channels_last", "dropout", "momentum",
"device", "strict_fp32", "torch_version", "env", "examples_per_sec", "step_ms_median"}.
Bad arguments exit 2 with argparse's message naming the argument.
"""
import argparse
import json
import os
import statistics
import sys
import time

# bench/peer_figures.py: the argument types the compare tools share.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer_figures import positive_int  # noqa: E402

import torch
import torch.nn as nn
import torch.nn.functional as F


def same_pool(x, k, s):
    # TensorFlow SAME max pooling: pad so that out = ceil(in / s), padding with -inf.
    h, w = x.shape[-2], x.shape[-1]
    out_h, out_w = -(-h // s), -(-w // s)
    ph = max((out_h - 1) * s + k - h, 0)
    pw = max((out_w - 1) * s + k - w, 0)
    x = F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2), value=float("-inf"))
    return F.max_pool2d(x, k, s)


def maybe_dropout(rate, on):
    return nn.Dropout(rate) if on else nn.Identity()


class MnistCnn(nn.Module):
    def __init__(self, c, h, w, classes, dropout=True):
        super().__init__()
        self.dropout1 = maybe_dropout(0.4, dropout)
        self.conv1 = nn.Conv2d(c, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * (h // 4) * (w // 4), 1024)
        self.fc2 = nn.Linear(1024, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.dropout1(F.relu(self.fc1(torch.flatten(x, 1))))
        return self.fc2(x)


class Cifar10Cnn(nn.Module):
    # cnn_zoo.cc: L2 weight decay 0.004 on these kernels (TF's 0.004 * l2_loss(w), whose
    # gradient is 0.004 * w: torch.optim.SGD's weight_decay in their parameter group).
    WEIGHT_DECAY = {"local3.weight": 0.004, "local4.weight": 0.004}

    def __init__(self, c, h, w, classes, dropout=True):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 64, 5, padding=2)
        self.conv2 = nn.Conv2d(64, 64, 5, padding=2)
        # TF LRN(depth_radius=4, bias=1, alpha=0.001/9, beta=0.75) is PyTorch's
        # LocalResponseNorm(size=9, alpha=9 * 0.001/9, beta=0.75, k=1).
        self.lrn = nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0)
        oh, ow = -(-(-(-h // 2)) // 2), -(-(-(-w // 2)) // 2)
        self.local3 = nn.Linear(64 * oh * ow, 384)
        self.local4 = nn.Linear(384, 192)
        self.softmax_linear = nn.Linear(192, classes)

    def forward(self, x):
        x = self.lrn(same_pool(F.relu(self.conv1(x)), 3, 2))
        x = same_pool(self.lrn(F.relu(self.conv2(x))), 3, 2)
        x = F.relu(self.local3(torch.flatten(x, 1)))
        x = F.relu(self.local4(x))
        return self.softmax_linear(x)


class AlexNet(nn.Module):
    """tf_cnn_benchmarks' AlexNet (one tower, no LRN), as models/cnn_zoo.cc builds it."""

    def __init__(self, c, h, w, classes, dropout=True):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(c, 64, 11, stride=4), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        with torch.no_grad():
            n = self.features(torch.zeros(1, c, h, w)).numel()
        self.classifier = nn.Sequential(
            nn.Linear(n, 4096), nn.ReLU(), maybe_dropout(0.5, dropout),
            nn.Linear(4096, 4096), nn.ReLU(), maybe_dropout(0.5, dropout),
            nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Vgg16(nn.Module):
    """VGG16 (configuration D) as tf_cnn_benchmarks builds it, as models/cnn_zoo.cc does."""

    def __init__(self, c, h, w, classes, dropout=True):
        super().__init__()
        layers, cin = [], c
        for n, cout in ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512)):
            for _ in range(n):
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
                cin = cout
            layers.append(nn.MaxPool2d(2, 2))
        self.features = nn.Sequential(*layers)
        n = cin * (h // 32) * (w // 32)
        self.classifier = nn.Sequential(
            nn.Linear(n, 4096), nn.ReLU(), maybe_dropout(0.5, dropout),
            nn.Linear(4096, 4096), nn.ReLU(), maybe_dropout(0.5, dropout),
            nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


MODELS = {"mnist_cnn": (MnistCnn, (1, 28, 28)), "cifar10_cnn": (Cifar10Cnn, (3, 24, 24)),
          "alexnet": (AlexNet, (3, 227, 227)), "vgg16": (Vgg16, (3, 32, 32))}


MALLOC_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": "2000000000", "MALLOC_TRIM_THRESHOLD_": "4000000000"}
WARMUP_STEPS = 20


def loaded_blas():
    """The BLAS shared libraries this process mapped (torch's Linear layers run on them)."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "blas" in os.path.basename(path):
                    libs.add(path)
    except OSError:
        return []
    return sorted(libs)


def environment(threads):
    """What the run was configured with, and the settings of docs/benchmarking.md it lacks."""
    blas = loaded_blas()
    env = {"blas": blas,
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
           "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
           "malloc_tuned": all(os.environ.get(k) == v for k, v in MALLOC_SETTINGS.items())}
    missing = []
    if env["OMP_NUM_THREADS"] != str(threads):
        missing.append("OMP_NUM_THREADS=%d" % threads)
    if env["OPENBLAS_NUM_THREADS"] != str(threads):
        missing.append("OPENBLAS_NUM_THREADS=%d" % threads)
    if not env["malloc_tuned"]:
        missing.append(" ".join("%s=%s" % kv for kv in MALLOC_SETTINGS.items()))
    if not any("openblas-openmp" in b for b in blas):
        missing.append("LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp "
                       "(libopenblas0-openmp; loaded: %s)" % (", ".join(blas) or "none"))
    env["missing"] = missing
    return env


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mnist_cnn", choices=sorted(MODELS))
    p.add_argument("--batch", type=positive_int, default=128)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--steps", type=positive_int, default=60,
                   help="steps timed, the first 20 dropped (at least 25)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.0,
                   help="SGD momentum (dampening 0, TF's MomentumOptimizer); "
                        "0 (default) = plain SGD")
    p.add_argument("--dropout", type=int, default=1, choices=(0, 1),
                   help="1: the models' dropout layers (default), 0: none")
    p.add_argument("--channels_last", action="store_true")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--strict_fp32", action="store_true",
                   help="cuda: no TF32 in convolutions or matrix products")
    a = p.parse_args()
    if a.steps < WARMUP_STEPS + 5:
        p.error("argument --steps: at least %d (the first %d are dropped), got %d"
                % (WARMUP_STEPS + 5, WARMUP_STEPS, a.steps))
    if a.momentum < 0:
        p.error("argument --momentum: must be >= 0, got %g" % a.momentum)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("cnn_reference: --device=cuda but torch sees no GPU")
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = not a.strict_fp32
        torch.backends.cuda.matmul.allow_tf32 = not a.strict_fp32
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cls, (c, h, w) = MODELS[a.model]
    model = cls(c, h, w, 10, dropout=bool(a.dropout))
    model = model.to(a.device)
    x = torch.rand(a.batch, c, h, w, device=a.device)
    y = torch.randint(0, 10, (a.batch,), device=a.device)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    decay = getattr(cls, "WEIGHT_DECAY", {})
    groups = [{"params": [q for n, q in model.named_parameters() if n not in decay]}]
    groups += [{"params": [q], "weight_decay": decay[n]}
               for n, q in model.named_parameters() if n in decay]
    opt = torch.optim.SGD(groups, lr=a.lr, momentum=a.momentum)
    env = environment(a.threads) if a.device == "cpu" else {}
    for m in env.get("missing", []):
        print("cnn_reference: warning: not given its best configuration: %s is not set "
              "(docs/benchmarking.md)" % m, file=sys.stderr)
    model.train()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
    steady = times[WARMUP_STEPS:]
    med = statistics.median(steady)
    print(json.dumps({"model": a.model, "batch": a.batch, "threads": a.threads,
                      "channels_last": a.channels_last, "dropout": bool(a.dropout),
                      "momentum": a.momentum, "device": a.device,
                      "strict_fp32": a.strict_fp32, "torch_version": torch.__version__,
                      "env": env, "examples_per_sec": a.batch / med,
                      "step_ms_median": med * 1e3}))


if __name__ == "__main__":
    main()
