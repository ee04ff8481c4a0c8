#!/usr/bin/env python3
"""TensorFlow 1.x-style between-graph parameter-server job: the peer of a Fulcrum cluster.

Started once per task, like a TF 1.x training script:

  python tf_ps_reference.py --cluster_spec=SPEC.json --job_name=ps     --task_index=0 ...
  python tf_ps_reference.py --cluster_spec=SPEC.json --job_name=worker --task_index=0 ...
  python tf_ps_reference.py --cluster_spec=SPEC.json --job_name=worker --task_index=1 ...

SPEC is Fulcrum's ClusterSpec JSON ({"chief": [...], "ps": [...], "worker": [...]}); only its
"ps" and "worker" lists are used: as in the classic TF 1.x recipe the chief is worker 0 (it
initialises the variables, runs SyncReplicasOptimizer's queue runners, and evaluates at the
end) and trains like every other worker. Fulcrum instead has a separate chief process that
only coordinates and evaluates, so the fair mapping is TF 1 ps + N workers against Fulcrum
1 ps + N workers + chief (both train with N replicas).

Graph: tf.compat.v1 with eager execution disabled; tf.compat.v1.train.Server per task;
replica_device_setter places variables (and optimizer slots, global_step) on the ps job;
between-graph replication (every worker builds its own graph); sync mode wraps the optimizer in
SyncReplicasOptimizer(replicas_to_aggregate=#workers, total_num_replicas=#workers); async mode
uses the plain optimizer (each worker's gradient is applied on arrival). The training loop is
a MonitoredTrainingSession (is_chief = worker 0) with a StopAtStepHook(last_step=train_steps);
no checkpoints, summaries or step-counter hooks.

Models as Fulcrum's (weights Glorot-uniform, biases zero; softmax cross-entropy, batch mean):
  logreg 784->10;  mlp 784-256-128-10 ReLU;  mnist_cnn (models/cnn_zoo.cc, TensorFlow's layers
  tutorial): 28x28x1 -> conv5x5x32 SAME ReLU -> maxpool 2x2 -> conv5x5x64 SAME ReLU ->
  maxpool 2x2 -> fc1024 ReLU -> dropout 0.4 (training only) -> fc10, NHWC as Fulcrum's;
  cifar10_cnn (models/cnn_zoo.cc, TensorFlow's CIFAR-10 tutorial) on the same 28x28x1 images,
  as Fulcrum's worker builds it on Fashion-MNIST: conv5x5x64 - maxpool 3x3 s2 SAME - LRN -
  conv5x5x64 - LRN - maxpool 3x3 s2 SAME - fc384 - fc192 - fc10, the tutorial's initializers
  and its weight decay (0.004 * l2_loss of the fc384/fc192 kernels added to the loss). The CNN
  graphs come from tf_cnn_reference.py (build_cnn), the single-process peer of the same models.
  Optimizers: sgd, momentum (0.9, TF's MomentumOptimizer), adam (0.9, 0.999, 1e-8).
Data: the Fashion-MNIST IDX .gz files read with gzip + numpy; pixels / 255 as float32.
Worker i trains on its contiguous 1/N shard of the training set (as Fulcrum's ShardOf), a
fresh permutation of the shard per epoch, batches of exactly B rows. The shard is pre-loaded
into memory; --feed=feed_dict slices a numpy batch per step, --feed=dataset builds a tf.data
pipeline (shuffle/repeat/batch/prefetch) on the worker from the in-memory shard.

Measured like Fulcrum's worker: examples_per_sec counts the local steps after the first 20
(steady state); the compare script sums it over the workers. Before the first step every worker
waits at a barrier until all have joined (Fulcrum's chief likewise starts the run only when
every worker has registered), so the per-worker rates overlap in time. The chief (worker 0)
evaluates the final variables on the test set after its loop ends and writes it to its summary.

The ps task serves forever (TensorFlow's ps never exits); stop it with a signal once the
workers are done. Each worker writes --summary (JSON) at the end.

Threads: --threads=T sets intra_op and inter_op parallelism to T for the server and the session
(Fulcrum's --threads). One start-up-only change: the session manager polls for the chief's
variable initialisation every 0.2 s instead of TF's default 30 s, so non-chief workers do not
sleep half a minute at start; nothing in the measured steady state depends on it.
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from tensorflow.python.training import session_manager as _session_manager  # noqa: E402

from tf_cnn_reference import build_cnn  # noqa: E402  (this script's folder is on sys.path)

WARMUP_STEPS = 20
v1 = tf.compat.v1


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cluster_spec", required=True, help="ClusterSpec JSON (chief/ps/worker)")
    p.add_argument("--job_name", required=True, choices=["ps", "worker"])
    p.add_argument("--task_index", type=int, default=0)
    p.add_argument("--model", default="logreg",
                   choices=["logreg", "mlp", "mnist_cnn", "cifar10_cnn"])
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam"])
    p.add_argument("--learning_rate", type=float, default=0.03)
    p.add_argument("--batch_size", type=int, default=256, help="per worker and step")
    p.add_argument("--train_steps", type=int, default=1000, help="global steps")
    p.add_argument("--mode", default="async", choices=["sync", "async"])
    p.add_argument("--threads", type=int, default=1, help="intra/inter-op threads per process")
    p.add_argument("--feed", default="feed_dict", choices=["feed_dict", "dataset"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--summary", default="", help="worker: write the summary JSON here")
    p.add_argument("--step_timeout", type=float, default=120.0,
                   help="seconds a session call may block (a hung sync step fails, not hangs)")
    return p.parse_args()


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    if not os.path.exists(path) and os.path.exists(path[:-3]):
        path, opener = path[:-3], open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_split(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    x = images.reshape(images.shape[0], -1).astype(np.float32) / 255.0
    return x, labels.astype(np.int32)


def shard_of(total, index, count):
    # Contiguous, near-equal shards (Fulcrum's data/batcher.cc ShardOf).
    base, extra = divmod(total, count)
    begin = index * base + min(index, extra)
    return begin, begin + base + (1 if index < extra else 0)


def build_model(model, x, training=True):
    """(logits, weight-decay loss term) of the model on flat 784-pixel rows x."""
    if model in ("mnist_cnn", "cifar10_cnn"):
        return build_cnn(model, tf.reshape(x, [-1, 28, 28, 1]), training)
    init_w = v1.glorot_uniform_initializer()
    sizes = [784, 10] if model == "logreg" else [784, 256, 128, 10]
    h = x
    for i in range(len(sizes) - 1):
        w = v1.get_variable("dense%d/kernel" % i, [sizes[i], sizes[i + 1]], tf.float32, init_w)
        b = v1.get_variable("dense%d/bias" % i, [sizes[i + 1]], tf.float32,
                            v1.zeros_initializer())
        h = tf.matmul(h, w) + b
        if i < len(sizes) - 2:
            h = tf.nn.relu(h)
    return h, tf.constant(0.0)


def main():
    args = parse_args()
    v1.disable_eager_execution()
    with open(args.cluster_spec) as f:
        spec = json.load(f)
    cluster = tf.train.ClusterSpec({"ps": spec["ps"], "worker": spec["worker"]})
    num_workers = len(spec["worker"])
    config = v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                            inter_op_parallelism_threads=args.threads,
                            allow_soft_placement=False)
    server = v1.train.Server(cluster, job_name=args.job_name, task_index=args.task_index,
                             config=config)
    if args.job_name == "ps":
        print("tf ps:%d serving on %s (TensorFlow %s)" % (args.task_index,
              spec["ps"][args.task_index], tf.__version__), flush=True)
        server.join()  # never returns
        return

    t_wall = time.perf_counter()
    is_chief = args.task_index == 0
    # Start-up only: poll for the chief's initialisation every 0.2 s, not every 30 s.
    _orig_init = _session_manager.SessionManager.__init__

    def _fast_init(self, *a, **k):
        k["recovery_wait_secs"] = 0.2
        _orig_init(self, *a, **k)
    _session_manager.SessionManager.__init__ = _fast_init

    x_train, y_train = load_split(args.data_dir, "train")
    begin, end = shard_of(x_train.shape[0], args.task_index, num_workers)
    x_shard, y_shard = x_train[begin:end], y_train[begin:end]
    del x_train, y_train
    x_test = y_test = None
    if is_chief:
        x_test, y_test = load_split(args.data_dir, "t10k")
    B = args.batch_size
    rng = np.random.RandomState(args.seed * 1000 + args.task_index)

    v1.set_random_seed(args.seed)
    worker_device = "/job:worker/task:%d" % args.task_index
    with v1.device(v1.train.replica_device_setter(worker_device=worker_device, cluster=cluster)):
        global_step = v1.train.get_or_create_global_step()
        # Start barrier: every worker adds 1 and waits until all have joined.
        joined = v1.get_variable("start_barrier", [], tf.int32, v1.zeros_initializer(),
                                 trainable=False)
        join_op = v1.assign_add(joined, 1)
        x_ph = v1.placeholder(tf.float32, [None, 784], name="x")
        y_ph = v1.placeholder(tf.int32, [None], name="y")
        if args.feed == "dataset":
            with v1.device(worker_device):
                ds = tf.data.Dataset.from_tensor_slices((x_shard, y_shard))
                ds = ds.shuffle(x_shard.shape[0], seed=args.seed * 1000 + args.task_index,
                                reshuffle_each_iteration=True)
                ds = ds.batch(B, drop_remainder=True).repeat().prefetch(2)
                it = v1.data.make_one_shot_iterator(ds)
                x_in, y_in = it.get_next()
        else:
            x_in, y_in = x_ph, y_ph
        # Async staleness as Fulcrum's ps counts it: the global step is read before the
        # model reads its variables (a control dependency of the whole step) and again after
        # this step's apply; the updates of others in between are the step's staleness.
        gs_read = v1.identity(global_step.read_value()) if args.mode == "async" else None
        with v1.control_dependencies([gs_read] if gs_read is not None else []):
            logits, weight_decay = build_model(args.model, x_in)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_in, logits=logits))
            loss = loss + weight_decay
        if args.optimizer == "sgd":
            opt = v1.train.GradientDescentOptimizer(args.learning_rate)
        elif args.optimizer == "momentum":
            opt = v1.train.MomentumOptimizer(args.learning_rate, 0.9)
        else:
            opt = v1.train.AdamOptimizer(args.learning_rate, 0.9, 0.999, 1e-8)
        hooks = [v1.train.StopAtStepHook(last_step=args.train_steps)]
        if args.mode == "sync":
            opt = v1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=num_workers,
                                                 total_num_replicas=num_workers)
            hooks.append(opt.make_session_run_hook(is_chief, num_tokens=0))
        train_op = opt.minimize(loss, global_step=global_step)
        step_fetches = [train_op, global_step]
        if gs_read is not None:
            with v1.control_dependencies([train_op]):
                gs_after = v1.identity(global_step.read_value())
            step_fetches = [gs_after, gs_read]
        # Evaluation graph for the chief (reads the variables from the ps).
        with v1.variable_scope("", reuse=True):
            eval_logits, _ = build_model(args.model, x_ph, training=False)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.cast(tf.argmax(eval_logits, 1), tf.int32),
                                                 y_ph), tf.int32))
        eval_loss = tf.reduce_sum(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_ph, logits=eval_logits))

    sess_config = v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                                 inter_op_parallelism_threads=args.threads,
                                 device_filters=["/job:ps", worker_device],
                                 operation_timeout_in_ms=int(args.step_timeout * 1000))

    order = np.arange(x_shard.shape[0])
    pos = len(order)  # start a new epoch on the first step

    def next_feed():
        nonlocal pos
        if args.feed == "dataset":
            return None
        if pos + B > len(order):
            rng.shuffle(order)
            pos = 0
        idx = np.sort(order[pos:pos + B])  # sorted gather is cache-friendlier; same rows
        pos += B
        return {x_ph: x_shard[idx], y_ph: y_shard[idx]}

    step_times = []
    staleness = []  # async: per step, the updates of others between the read and the apply
    local_steps = 0
    last_gs = 0
    t_train = t_steady = t_last = None
    stop_reason = "reached train_steps"
    with v1.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           hooks=hooks, config=sess_config,
                                           checkpoint_dir=None, save_checkpoint_secs=None,
                                           save_summaries_steps=None,
                                           save_summaries_secs=None,
                                           log_step_count_steps=None,
                                           # SyncReplicasOptimizer's queue runner stays blocked
                                           # on the accumulator at the end; the default 120 s
                                           # grace period would only delay the exit.
                                           stop_grace_period_secs=2) as sess:
        raw = sess._tf_sess()  # barrier ops run without the training hooks
        raw.run(join_op)
        while raw.run(joined) < num_workers:
            time.sleep(0.001)
        t_train = time.perf_counter()
        try:
            while not sess.should_stop():
                t0 = time.perf_counter()
                got = sess.run(step_fetches, feed_dict=next_feed())
                if gs_read is not None:
                    last_gs = got[0]
                    staleness.append(max(0, int(got[0]) - 1 - int(got[1])))
                else:
                    last_gs = got[1]
                t1 = t_last = time.perf_counter()
                step_times.append(t1 - t0)
                local_steps += 1
                if local_steps == WARMUP_STEPS:
                    t_steady = t1
        except (tf.errors.DeadlineExceededError, tf.errors.CancelledError,
                tf.errors.AbortedError, tf.errors.UnavailableError) as e:
            # A sync worker can still wait for a token the chief no longer sends.
            stop_reason = "stopped by %s" % type(e).__name__
        t_loop_end = time.perf_counter()
        final = {}
        if is_chief:
            # Final evaluation on the variables the ps holds, before the session closes.
            c, l = 0, 0.0
            for i in range(0, x_test.shape[0], 1000):
                cc, ll = raw.run([correct, eval_loss],
                                 {x_ph: x_test[i:i + 1000], y_ph: y_test[i:i + 1000]})
                c += int(cc)
                l += float(ll)
            final = {"final_global_step": int(raw.run(global_step)),
                     "final_test_accuracy": c / x_test.shape[0],
                     "final_test_loss": l / x_test.shape[0]}
    # The rates end with the last training step (not with the evaluation or the close).
    t_end = t_last if t_last is not None else t_loop_end

    summary = {
        "job": "worker", "task_index": args.task_index, "is_chief": is_chief,
        "framework": "tensorflow", "tf_version": tf.__version__, "mode": args.mode,
        "model": args.model, "optimizer": args.optimizer, "learning_rate": args.learning_rate,
        "batch_size": B, "threads": args.threads, "feed": args.feed,
        "num_workers": num_workers, "train_steps": args.train_steps,
        "local_steps": local_steps, "last_global_step": int(last_gs),
        "stop_reason": stop_reason,
        "examples_per_sec": ((local_steps - WARMUP_STEPS) * B / (t_end - t_steady)
                             if t_steady is not None and local_steps > WARMUP_STEPS
                             and t_end > t_steady else None),
        "examples_per_sec_all_steps": (local_steps * B / (t_end - t_train)
                                       if local_steps else None),
        "step_time_p50_ms": float(np.percentile(step_times, 50) * 1e3) if step_times else None,
        "step_time_p99_ms": float(np.percentile(step_times, 99) * 1e3) if step_times else None,
        "train_seconds": t_end - t_train,
        # As Fulcrum's worker summary: the mean, and the steps by staleness 0..7, 8 or more.
        "staleness_mean": float(np.mean(staleness)) if staleness else None,
        "staleness_histogram": ([int(np.sum(np.minimum(staleness, 8) == s)) for s in range(9)]
                                if staleness else None),
    }
    summary.update(final)
    summary["wall_seconds"] = time.perf_counter() - t_wall
    text = json.dumps(summary, indent=1)
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(text + "\n")
    print("tf worker:%d %s" % (args.task_index, json.dumps(
        {k: summary.get(k) for k in ("local_steps", "last_global_step", "examples_per_sec",
                                     "step_time_p50_ms", "final_test_accuracy",
                                     "stop_reason")})), flush=True)


if __name__ == "__main__":
    sys.exit(main())
