#!/usr/bin/env python3
"""PyTorch (CPU) counterparts of Fulcrum's convolutional models, timed the way Fulcrum's
worker reports examples/sec: a full training step (forward, loss, backward, SGD update) on a
batch already in memory, steady state (the first 20 steps dropped), median over the rest.

Layer lists follow models/cnn_zoo.cc exactly (mnist_cnn: conv5x5x32-pool2-conv5x5x64-pool2-
fc1024-dropout0.4-fc; cifar10_cnn: conv5x5x64-pool3s2(SAME)-LRN-conv5x5x64-LRN-pool3s2(SAME)-
fc384-fc192-fc; alexnet on 227x227x3 and vgg16 on 32x32x3 as tf_cnn_benchmarks). PyTorch gets its best configuration: its own oneDNN (MKL-DNN) convolutions,
channels_last memory format when --channels_last (try both; report the faster), the thread
count given by --threads.

On a GPU (--device=cuda) PyTorch's best configuration is its default one plus
cudnn.benchmark (each convolution's algorithm found by timing, as Fulcrum's cudnnFind does),
which lets cuDNN convolutions use TF32 tensor cores; --strict_fp32 turns TF32 off for
convolutions and matrix products, the arithmetic Fulcrum's CUDA backend uses. Each timed step
ends with a device synchronisation, so the time is the step's, not its launch's.

Usage: cnn_reference.py --model=mnist_cnn --batch=128 --threads=2 --steps=60 [--channels_last]
                        [--device=cuda [--strict_fp32]]
Prints one JSON line: {"model", "batch", "threads", "channels_last", "device", "strict_fp32",
"examples_per_sec", "step_ms_median"}.
"""
import argparse
import json
import statistics
import time

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


class MnistCnn(nn.Module):
    def __init__(self, c, h, w, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(c, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * (h // 4) * (w // 4), 1024)
        self.fc2 = nn.Linear(1024, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.dropout(F.relu(self.fc1(torch.flatten(x, 1))), 0.4, self.training)
        return self.fc2(x)


class Cifar10Cnn(nn.Module):
    def __init__(self, c, h, w, classes):
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

    def __init__(self, c, h, w, classes):
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
            nn.Linear(n, 4096), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Vgg16(nn.Module):
    """VGG16 (configuration D) as tf_cnn_benchmarks builds it, as models/cnn_zoo.cc does."""

    def __init__(self, c, h, w, classes):
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
            nn.Linear(n, 4096), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(0.5), nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


MODELS = {"mnist_cnn": (MnistCnn, (1, 28, 28)), "cifar10_cnn": (Cifar10Cnn, (3, 24, 24)),
          "alexnet": (AlexNet, (3, 227, 227)), "vgg16": (Vgg16, (3, 32, 32))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mnist_cnn", choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--channels_last", action="store_true")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--strict_fp32", action="store_true",
                   help="cuda: no TF32 in convolutions or matrix products")
    a = p.parse_args()
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
    model = cls(c, h, w, 10)
    model = model.to(a.device)
    x = torch.rand(a.batch, c, h, w, device=a.device)
    y = torch.randint(0, 10, (a.batch,), device=a.device)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
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
    steady = times[20:] if len(times) > 25 else times
    med = statistics.median(steady)
    print(json.dumps({"model": a.model, "batch": a.batch, "threads": a.threads,
                      "channels_last": a.channels_last, "device": a.device,
                      "strict_fp32": a.strict_fp32,
                      "examples_per_sec": a.batch / med, "step_ms_median": med * 1e3}))


if __name__ == "__main__":
    main()
