#!/usr/bin/env python3
"""TensorFlow (CPU) counterparts of Fulcrum's convolutional models, single process.

One tf.compat.v1 graph and session (eager off, no cluster) timing full training steps the way
Fulcrum's worker reports examples/sec: forward, softmax cross-entropy (batch mean, plus the
model's L2 weight decay), backward and the optimizer's update, on a batch already in memory
(a non-trainable variable filled once from random data, so no feed or copy per step); the
first 20 steps are dropped and examples/sec = batch / median step time of the rest.

TensorFlow gets its best configuration: intra_op and inter_op parallelism = --threads, its
default oneDNN kernels (TF_ENABLE_ONEDNN_OPTS is left alone; the JSON line says whether
oneDNN was on), grappler's default rewrites, NHWC as Fulcrum's, the train op called through
Session.make_callable (the cheapest way to run a graph step from Python).

Models follow models/cnn_zoo.cc layer by layer, initializers and weight decay included:
  mnist_cnn  (28x28x1, TensorFlow's layers tutorial): conv5x5x32 SAME ReLU - maxpool 2x2 -
             conv5x5x64 - maxpool 2x2 - fc1024 ReLU - dropout 0.4 - fc10; Glorot kernels.
  cifar10_cnn (24x24x3, TensorFlow's CIFAR-10 tutorial, cifar10.py): conv5x5x64 (truncated
             normal 0.05, bias 0) - maxpool 3x3 s2 SAME - LRN(depth_radius 4, bias 1,
             alpha 0.001/9, beta 0.75) - conv5x5x64 (bias 0.1) - LRN - maxpool 3x3 s2 SAME -
             local3 fc384 ReLU - local4 fc192 ReLU (truncated normal 0.04, bias 0.1, weight
             decay 0.004 on both kernels: 0.004 * l2_loss(kernel) added to the loss) -
             softmax_linear fc10 (truncated normal 1/192, no decay).
  alexnet    (227x227x3, tf_cnn_benchmarks, one tower, no LRN): conv11x11x64 s4 VALID -
             maxpool 3x3 s2 VALID - conv5x5x192 - pool - conv3x3x384 - conv3x3x384 -
             conv3x3x256 - pool - fc4096 - dropout 0.5 - fc4096 - dropout 0.5 - fc10.
  vgg16      (32x32x3, tf_cnn_benchmarks configuration D): 2x64, 2x128, 3x256, 3x512, 3x512
             3x3 SAME convs, each block followed by maxpool 2x2 - fc4096 - dropout 0.5 -
             fc4096 - dropout 0.5 - fc10.
--dropout=0 builds the models without their dropout layers (a cost check; the default keeps
them, as Fulcrum's models have them).

The graph builders (build_cnn) are shared with tf_ps_reference.py, whose cluster mode trains
mnist_cnn and cifar10_cnn on Fashion-MNIST's 28x28x1 images.

Usage: tf_cnn_reference.py --model=mnist_cnn --batch=128 --threads=2 [--steps=60]
                           [--optimizer=momentum|sgd] [--lr=0.01] [--momentum=0.9] [--dropout=1]
Prints one JSON line: {"model", "batch", "threads", "optimizer", "dropout", "tf_version",
"onednn", "examples_per_sec", "step_ms_median", "step_ms_min", "step_ms_max", "steps"}.
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

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

v1 = tf.compat.v1
WARMUP_STEPS = 20

# Each model's input image (height, width, channels) in single-process mode, as compare_cnn.sh
# gives Fulcrum's worker (--synthetic_shape).
INPUT_SHAPES = {"mnist_cnn": (28, 28, 1), "cifar10_cnn": (24, 24, 3),
                "alexnet": (227, 227, 3), "vgg16": (32, 32, 3)}

_GLOROT = "glorot"


def _conv(name, k, filters, stride=1, padding="SAME", kernel_init=_GLOROT, bias_init=0.0):
    return ("conv", name, dict(k=k, filters=filters, stride=stride, padding=padding,
                               kernel_init=kernel_init, bias_init=bias_init))


def _pool(name, window, stride, padding):
    return ("pool", name, dict(window=window, stride=stride, padding=padding))


def _dense(name, units, relu, kernel_init=_GLOROT, bias_init=0.0, weight_decay=0.0):
    return ("dense", name, dict(units=units, relu=relu, kernel_init=kernel_init,
                                bias_init=bias_init, weight_decay=weight_decay))


def layers_of(model, num_classes=10):
    """The layer list of models/cnn_zoo.cc (width 1)."""
    if model == "mnist_cnn":
        return [_conv("conv1", 5, 32), _pool("pool1", 2, 2, "VALID"),
                _conv("conv2", 5, 64), _pool("pool2", 2, 2, "VALID"),
                _dense("dense1", 1024, True), ("dropout", "dropout1", dict(rate=0.4)),
                _dense("logits", num_classes, False)]
    if model == "cifar10_cnn":
        lrn = dict(depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75)
        tn = lambda s: ("truncated_normal", s)  # noqa: E731
        return [_conv("conv1", 5, 64, kernel_init=tn(5e-2), bias_init=0.0),
                _pool("pool1", 3, 2, "SAME"), ("lrn", "norm1", lrn),
                _conv("conv2", 5, 64, kernel_init=tn(5e-2), bias_init=0.1),
                ("lrn", "norm2", lrn), _pool("pool2", 3, 2, "SAME"),
                _dense("local3", 384, True, tn(0.04), 0.1, 0.004),
                _dense("local4", 192, True, tn(0.04), 0.1, 0.004),
                _dense("softmax_linear", num_classes, False, tn(1.0 / 192.0), 0.0)]
    if model == "alexnet":
        return [_conv("conv1", 11, 64, 4, "VALID"), _pool("pool1", 3, 2, "VALID"),
                _conv("conv2", 5, 192), _pool("pool2", 3, 2, "VALID"),
                _conv("conv3", 3, 384), _conv("conv4", 3, 384), _conv("conv5", 3, 256),
                _pool("pool5", 3, 2, "VALID"),
                _dense("fc6", 4096, True), ("dropout", "dropout6", dict(rate=0.5)),
                _dense("fc7", 4096, True), ("dropout", "dropout7", dict(rate=0.5)),
                _dense("fc8", num_classes, False)]
    if model == "vgg16":
        out = []
        for i, (n, filters) in enumerate(((2, 64), (2, 128), (3, 256), (3, 512), (3, 512))):
            out += [_conv("conv%d_%d" % (i + 1, j + 1), 3, filters) for j in range(n)]
            out.append(_pool("pool%d" % (i + 1), 2, 2, "VALID"))
        return out + [_dense("fc6", 4096, True), ("dropout", "dropout6", dict(rate=0.5)),
                      _dense("fc7", 4096, True), ("dropout", "dropout7", dict(rate=0.5)),
                      _dense("fc8", num_classes, False)]
    raise ValueError("unknown model '%s'" % model)


def _initializer(spec):
    if spec == _GLOROT:
        return v1.glorot_uniform_initializer()
    if isinstance(spec, tuple) and spec[0] == "truncated_normal":
        return v1.truncated_normal_initializer(stddev=spec[1])
    return v1.constant_initializer(float(spec))


def build_cnn(model, x, training, num_classes=10, dropout=True):
    """Builds the model on NHWC images x; returns (logits, weight-decay loss term).

    Variables come from v1.get_variable ("<layer>/kernel", "<layer>/bias"), so a second call
    under variable_scope(reuse=True) shares them (an evaluation graph)."""
    h = x
    decay = []
    for kind, name, o in layers_of(model, num_classes):
        if kind == "conv":
            c_in = int(h.shape[-1])
            w = v1.get_variable(name + "/kernel", [o["k"], o["k"], c_in, o["filters"]],
                                tf.float32, _initializer(o["kernel_init"]))
            b = v1.get_variable(name + "/bias", [o["filters"]], tf.float32,
                                _initializer(o["bias_init"]))
            s = o["stride"]
            h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w, [1, s, s, 1], o["padding"]), b))
        elif kind == "pool":
            h = tf.nn.max_pool2d(h, o["window"], o["stride"], o["padding"])
        elif kind == "lrn":
            h = tf.nn.local_response_normalization(h, **o)
        elif kind == "dropout":
            if training and dropout:
                h = tf.nn.dropout(h, rate=o["rate"])
        elif kind == "dense":
            if len(h.shape) != 2:
                h = tf.reshape(h, [-1, int(np.prod([int(d) for d in h.shape[1:]]))])
            w = v1.get_variable(name + "/kernel", [int(h.shape[-1]), o["units"]], tf.float32,
                                _initializer(o["kernel_init"]))
            b = v1.get_variable(name + "/bias", [o["units"]], tf.float32,
                                _initializer(o["bias_init"]))
            h = tf.nn.bias_add(tf.matmul(h, w), b)
            if o["relu"]:
                h = tf.nn.relu(h)
            if o["weight_decay"]:
                decay.append(tf.multiply(tf.nn.l2_loss(w), o["weight_decay"],
                                         name=name + "/weight_loss"))
    return h, (tf.add_n(decay) if decay else tf.constant(0.0))


def onednn_enabled():
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except Exception:  # private API moved: say so rather than guess
        return None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="mnist_cnn", choices=sorted(INPUT_SHAPES))
    p.add_argument("--batch", type=positive_int, default=128)
    p.add_argument("--threads", type=positive_int, default=1,
                   help="intra_op and inter_op parallelism")
    p.add_argument("--steps", type=positive_int, default=60,
                   help="steps timed, the first 20 dropped (at least 25)")
    p.add_argument("--optimizer", default="momentum", choices=("momentum", "sgd"))
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--dropout", type=int, default=1, choices=(0, 1),
                   help="1: the models' dropout layers (default), 0: none")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.steps < WARMUP_STEPS + 5:
        p.error("argument --steps: at least %d (the first %d are dropped), got %d"
                % (WARMUP_STEPS + 5, WARMUP_STEPS, a.steps))
    return a


def main(argv=None):
    a = parse_args(argv)
    v1.disable_eager_execution()
    h, w, c = INPUT_SHAPES[a.model]
    rng = np.random.RandomState(a.seed)
    x_np = rng.rand(a.batch, h, w, c).astype(np.float32)
    y_np = rng.randint(0, 10, size=a.batch).astype(np.int32)

    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(a.seed)
        # The batch lives in the graph's memory: filled once through placeholders, read every
        # step with no feed.
        x_init = v1.placeholder(tf.float32, x_np.shape)
        y_init = v1.placeholder(tf.int32, y_np.shape)
        x = v1.Variable(x_init, trainable=False, name="images")
        y = v1.Variable(y_init, trainable=False, name="labels")
        logits, decay = build_cnn(a.model, x, training=True, dropout=bool(a.dropout))
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)) + decay
        if a.optimizer == "momentum":
            opt = v1.train.MomentumOptimizer(a.lr, a.momentum)
        else:
            opt = v1.train.GradientDescentOptimizer(a.lr)
        train_op = opt.minimize(loss)
        init = v1.global_variables_initializer()
    config = v1.ConfigProto(intra_op_parallelism_threads=a.threads,
                            inter_op_parallelism_threads=a.threads)
    with v1.Session(graph=graph, config=config) as sess:
        sess.run(init, {x_init: x_np, y_init: y_np})
        step = sess.make_callable(train_op)
        times = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    steady = times[WARMUP_STEPS:]
    med = statistics.median(steady)
    print(json.dumps({"model": a.model, "batch": a.batch, "threads": a.threads,
                      "optimizer": a.optimizer, "dropout": bool(a.dropout),
                      "tf_version": tf.__version__, "onednn": onednn_enabled(),
                      "examples_per_sec": a.batch / med, "step_ms_median": med * 1e3,
                      "step_ms_min": min(steady) * 1e3, "step_ms_max": max(steady) * 1e3,
                      "steps": a.steps}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
