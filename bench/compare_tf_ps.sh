#!/usr/bin/env bash
# The same between-graph parameter-server job in TensorFlow 1.x style (tf.compat.v1: Server,
# replica_device_setter, SyncReplicasOptimizer, MonitoredTrainingSession) and in Fulcrum
# (build/bin/ps, worker, chief via scripts/local_cluster.sh), side by side on this machine.
#
# Layout: TF 1 ps + W workers (worker 0 is TF's chief: it trains, initialises, evaluates);
# Fulcrum 1 ps + W workers + a chief process (coordinates and evaluates, does not train).
# Both: Fashion-MNIST, the same model, per-worker batch, optimizer, learning rate, number of
# global steps and mode (sync: W gradients of batch B averaged per step, SyncReplicasOptimizer
# with replicas_to_aggregate=W on the TF side; async: each gradient applied on arrival).
# Reported figure per side: the sum over workers of steady-state examples/sec (each worker's
# local steps after its first 20), and the chief's final test accuracy.
#
# Per (model, mode): one unreported warm-up run of each side, then N pairs (pair p with --seed=p
# on both sides, so accuracies are medians over initial values and data orders); inside a pair the
# thread counts interleave (TF t1, Fulcrum t1, TF t2, Fulcrum t2). Each side's figure is the
# median at its best thread count; the ratio column is the median and min-max of the pairwise
# ratios Fulcrum/TF at each side's best thread count. /proc/loadavg before and after each
# (model, mode) block. The TF side runs from a virtual environment build/tf-venv (created on
# first use: Debian's python3 -m venv + pip install tensorflow-cpu) and is fed from a numpy
# copy of its shard (feed_dict; --feed=dataset for tf.data). TF's best figure is printed beside
# its known-good figure for the configuration (bench/peer_figures.py); more than 15 % under it
# prints a WARNING banner on stderr and under the table, and a configuration with no
# known-good figure says so.
#
# Usage: bench/compare_tf_ps.sh [--models=logreg[,mlp,mnist_cnn,cifar10_cnn]] [--modes=sync,async]
#          [--threads=1,2] [--pairs=3] [--workers=2] [--batch_size=256]
#          [--logreg_steps=2000] [--mlp_steps=1000] [--cnn_steps=100]
#          [--feed=feed_dict|dataset] [--busy] [--fulcrum_flags='--async_pull=before_step']
#          [--out=build/compare_tf_ps.md] [--keep]
#          [--setup_only]
#   logreg: 784->10, SGD lr 0.03.   mlp: 784-256-128-10 ReLU, Adam lr 1e-3.
#   mnist_cnn: conv5x5x32-pool-conv5x5x64-pool-fc1024-dropout-fc (3.3 M parameters, 13 MB),
#              momentum 0.9 lr 0.01 (a step is ~100x an mlp's: use a smaller --batch_size).
#   cifar10_cnn: TensorFlow's CIFAR-10 tutorial graph (models/cnn_zoo.cc: conv-pool-LRN-conv-
#              LRN-pool-fc384-fc192-fc, weight decay 0.004 on the fc384/fc192 kernels) on the
#              28x28x1 Fashion-MNIST images, momentum 0.9 lr 0.01, --cnn_steps steps.
#   --busy        a competing busy process (a shell loop pinned to CPU 0) runs through every
#                 run of both sides: the loaded machine on which async staleness is compared.
#   Async rows also give each side's staleness: per step, the updates of other workers applied
#   between the read of the values its gradients were computed at and its own apply (Fulcrum:
#   the ps's count, the workers' staleness_histogram; TF: the global step read before the
#   step's variable reads and after its apply), as a mean and as the distribution of steps.
#   --fulcrum_flags  more flags for every Fulcrum task (words split on spaces), e.g. a
#                 schedule to compare with the default one; the table names them.
#   --keep        keep the per-run folders (logs, summaries, report.json) under $TMPDIR.
#   --setup_only  only create the TF virtual environment.
# Environment: TF_PIP_SPEC (default tensorflow-cpu==2.21.0), VENV (default build/tf-venv),
#   VENV_PYTHON (default /usr/bin/python3, Debian's), RUN_TIMEOUT (s per run, default 300).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TF_SCRIPT="${ROOT}/bench/reference/tf_ps_reference.py"
VENV="${VENV:-${ROOT}/build/tf-venv}"
VENV_PYTHON="${VENV_PYTHON:-/usr/bin/python3}"
TF_PIP_SPEC="${TF_PIP_SPEC:-tensorflow-cpu==2.21.0}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
DATA_DIR=/usr/share/datasets/fashion-mnist

models=logreg modes=sync,async threads_list=1,2 pairs=3 workers=2 batch=256
logreg_steps=2000 mlp_steps=1000 cnn_steps=100 feed=feed_dict out="${ROOT}/build/compare_tf_ps.md"
keep=0 setup_only=0 busy=0 fulcrum_flags=""
BENCH_NAME=compare_tf_ps
source "${ROOT}/bench/lib/options.sh"
parse_options "models modes threads=threads_list pairs workers batch_size=batch logreg_steps mlp_steps cnn_steps feed out keep! busy! fulcrum_flags setup_only!" "$@"
for m in ${models//,/ }; do
  [[ "$m" =~ ^(logreg|mlp|mnist_cnn|cifar10_cnn)$ ]] ||
    die "--models: unknown model '$m' (logreg, mlp, mnist_cnn, cifar10_cnn)"
done
for m in ${modes//,/ }; do [[ "$m" =~ ^(sync|async)$ ]] || die "--modes: unknown mode '$m' (sync, async)"; done
[[ -n "${models//,/}" && -n "${modes//,/}" ]] || die "--models and --modes must not be empty"
[[ "$feed" =~ ^(feed_dict|dataset)$ ]] || die "--feed must be feed_dict or dataset"
for v in $pairs $workers $batch $logreg_steps $mlp_steps $cnn_steps ${threads_list//,/ }; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "expected a positive integer, got '$v'"
done
(( pairs >= 3 )) || echo "compare_tf_ps: note: fewer than 3 pairs; docs/benchmarking.md asks for at least 3" >&2

# --- The TF virtual environment (idempotent).
setup_venv() {
  if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import tensorflow" 2>/dev/null; then
    return 0
  fi
  [[ -x "$VENV_PYTHON" ]] || die "$VENV_PYTHON not found (set VENV_PYTHON)"
  if ! "$VENV_PYTHON" -c "import ensurepip, venv" 2>/dev/null; then
    # Debian splits venv/ensurepip out of the interpreter package.
    echo "compare_tf_ps: installing python3-venv (apt-get)" >&2
    SUDO=""; (( EUID == 0 )) || SUDO=sudo
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3-venv >&2 ||
      die "could not install python3-venv"
  fi
  echo "compare_tf_ps: creating $VENV with $TF_PIP_SPEC (pip, PyPI)" >&2
  rm -rf "$VENV"
  "$VENV_PYTHON" -m venv "$VENV" || die "python3 -m venv $VENV failed"
  "$VENV/bin/pip" install -q --upgrade pip >&2 || die "pip upgrade failed"
  "$VENV/bin/pip" install -q "$TF_PIP_SPEC" >&2 || die "pip install $TF_PIP_SPEC failed"
  "$VENV/bin/python" -c "import tensorflow" 2>/dev/null || die "the venv cannot import tensorflow"
}
setup_venv
TF_VERSION=$(TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" -c "import tensorflow as tf; print(tf.__version__)" 2>/dev/null)
(( setup_only )) && { echo "compare_tf_ps: $VENV ready (TensorFlow $TF_VERSION)"; exit 0; }

[[ -r "$TF_SCRIPT" ]] || die "$TF_SCRIPT missing"
for b in ps worker chief; do
  [[ -x "$ROOT/build/bin/$b" ]] || die "build/bin/$b not found - build the project first"
done
[[ -r "$DATA_DIR/train-images-idx3-ubyte.gz" || -r "$DATA_DIR/train-images-idx3-ubyte" ]] ||
  die "Fashion-MNIST not found in $DATA_DIR"

work="$(mktemp -d "${TMPDIR:-/tmp}/compare_tf_ps.XXXXXX")"
busy_pid=""
start_busy() {
  (( busy )) || return 0
  taskset -c 0 bash -c 'while :; do :; done' &
  busy_pid=$!
}
stop_busy() {
  [[ -n "$busy_pid" ]] || return 0
  kill -TERM "$busy_pid" 2>/dev/null || true
  wait "$busy_pid" 2>/dev/null || true
  busy_pid=""
}
cleanup() {
  local pid
  stop_busy
  for pid in $(jobs -p); do kill -TERM "$pid" 2>/dev/null || true; done
  (( keep )) || rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "compare_tf_ps: interrupted" >&2; exit 130' INT TERM
# A private copy of the Fulcrum binaries, so a rebuild of build/ during the run cannot change
# (or break) them half-way.
mkdir -p "$work/bin"
cp "$ROOT/build/bin/ps" "$ROOT/build/bin/worker" "$ROOT/build/bin/chief" "$work/bin/"
results="$work/results.tsv"
: > "$results"

# A ClusterSpec on free localhost ports (chief, 1 ps, workers).
make_spec() { python3 "$ROOT/bench/free_spec.py" "$1" 1 "$workers"; }

model_flags() {  # model -> flags shared by both sides
  case "$1" in
    logreg) echo "--model=logreg --optimizer=sgd --learning_rate=0.03 --train_steps=$logreg_steps" ;;
    mlp) echo "--model=mlp --optimizer=adam --learning_rate=0.001 --train_steps=$mlp_steps" ;;
    mnist_cnn|cifar10_cnn)
      echo "--model=$1 --optimizer=momentum --learning_rate=0.01 --train_steps=$cnn_steps" ;;
  esac
}

# run_tf MODEL MODE THREADS DIR: sets result="ex_per_sec accuracy staleness_histogram"
run_tf() {
  local model=$1 mode=$2 t=$3 dir=$4 i ps_pid rc=0
  local -a wpids=()
  mkdir -p "$dir"; make_spec "$dir/spec.json"
  local -a common=(--cluster_spec="$dir/spec.json" --mode="$mode" --threads="$t"
                   --batch_size="$batch" --feed="$feed" --seed="$seed" $(model_flags "$model"))
  TF_CPP_MIN_LOG_LEVEL=2 "$VENV/bin/python" "$TF_SCRIPT" "${common[@]}" --job_name=ps \
    --task_index=0 > "$dir/ps-0.log" 2>&1 &
  ps_pid=$!
  for ((i = 0; i < workers; i++)); do
    TF_CPP_MIN_LOG_LEVEL=2 timeout "$RUN_TIMEOUT" "$VENV/bin/python" "$TF_SCRIPT" "${common[@]}" \
      --job_name=worker --task_index=$i --summary="$dir/worker-$i.json" \
      > "$dir/worker-$i.log" 2>&1 &
    wpids+=($!)
  done
  for i in "${wpids[@]}"; do wait "$i" || rc=$?; done
  # TensorFlow's ps serves forever: stop it now that the workers are done.
  kill -TERM "$ps_pid" 2>/dev/null || true
  for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$ps_pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$ps_pid" 2>/dev/null || true
  wait "$ps_pid" 2>/dev/null || true
  if (( rc != 0 )); then
    echo "compare_tf_ps: TF run failed (exit $rc); logs in $dir:" >&2
    tail -n 5 "$dir"/worker-*.log >&2
    keep=1; exit 1
  fi
  result=$(python3 - "$dir" "$workers" <<'EOF'
import json, sys
s = [json.load(open("%s/worker-%d.json" % (sys.argv[1], i))) for i in range(int(sys.argv[2]))]
h = [w.get("staleness_histogram") for w in s]
hist = ",".join(str(sum(c)) for c in zip(*h)) if all(h) else "-"
print(sum(w["examples_per_sec"] for w in s), s[0]["final_test_accuracy"], hist)
EOF
) || die "no worker summaries in $dir"
}

# run_fulcrum MODEL MODE THREADS DIR: sets result="ex_per_sec accuracy staleness_histogram"
run_fulcrum() {
  local model=$1 mode=$2 t=$3 dir=$4
  mkdir -p "$dir"; make_spec "$dir/spec.json"
  if ! BIN_DIR="$work/bin" timeout "$RUN_TIMEOUT" "$ROOT/scripts/local_cluster.sh" "$dir/spec.json" \
      $(model_flags "$model") --batch_size="$batch" --mode="$mode" --threads="$t" --seed="$seed" \
      --eval_every=0 --log_every=100000 --run_dir="$dir/run" $fulcrum_flags \
      > "$dir/cluster.log" 2>&1; then
    echo "compare_tf_ps: Fulcrum run failed; log in $dir/cluster.log:" >&2
    tail -n 5 "$dir/cluster.log" >&2
    keep=1; exit 1
  fi
  result=$(python3 - "$dir/run/report.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
h = [w.get("staleness_histogram") for w in r["workers"]]
hist = ",".join(str(sum(c)) for c in zip(*h)) if all(h) else "-"
print(r["workers_examples_per_sec"], r["final_test_accuracy"], hist)
EOF
) || die "no report.json in $dir/run"
}

record() {  # model mode side threads pair (uses $result = "ex acc hist")
  local ex acc hist
  read -r ex acc hist <<< "$result"
  echo -e "$1\t$2\t$3\t$4\t$5\t$ex\t$acc\t$hist" >> "$results"
  printf '  %-6s %-5s %-7s t=%s pair %s: %10.0f ex/s  acc %s  staleness hist %s\n' "$1" "$2" \
    "$3" "$4" "$5" "$ex" "$acc" "$hist" >&2
}

echo "compare_tf_ps: TensorFlow $TF_VERSION ($VENV), Fulcrum $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') (binaries copied from build/bin), $(nproc) cores" >&2
loads="$work/loads.tsv"; : > "$loads"
t_start=$(date +%s)
n=0
for model in ${models//,/ }; do
  for mode in ${modes//,/ }; do
    start_busy
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "compare_tf_ps: $model $mode - load before: $load_before" >&2
    t0=${threads_list%%,*}
    seed=1
    run_tf "$model" "$mode" "$t0" "$work/r$((++n))"          # warm-up, unreported
    run_fulcrum "$model" "$mode" "$t0" "$work/r$((++n))"
    for ((p = 1; p <= pairs; p++)); do
      seed=$p  # pair p runs with seed p on both sides: initial values and data order vary
      for t in ${threads_list//,/ }; do
        run_tf "$model" "$mode" "$t" "$work/r$((++n))"
        record "$model" "$mode" tf "$t" "$p"
        run_fulcrum "$model" "$mode" "$t" "$work/r$((++n))"
        record "$model" "$mode" fulcrum "$t" "$p"
      done
    done
    load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    stop_busy
    echo "compare_tf_ps: $model $mode - load after: $load_after" >&2
    echo -e "$model\t$mode\t$load_before\t$load_after" >> "$loads"
  done
done
elapsed=$(( $(date +%s) - t_start ))

mkdir -p "$(dirname "$out")"
python3 - "$results" "$loads" "$TF_VERSION" "$workers" "$batch" "$pairs" "$feed" "$elapsed" \
    "$logreg_steps" "$mlp_steps" "$cnn_steps" "$ROOT/bench" "$busy" "$fulcrum_flags" <<'EOF' | tee "$out"
import statistics as st, sys
from collections import defaultdict
res, loads, tfv, W, B, P, feed, elapsed, lsteps, msteps, csteps, bench, busy, fflags = sys.argv[1:]
sys.path.insert(0, bench)
import peer_figures
runs = defaultdict(dict)          # (model, mode, side, threads) -> {pair: (ex, acc, hist)}
for line in open(res):
    model, mode, side, t, p, ex, acc, hist = line.rstrip("\n").split("\t")
    runs[(model, mode, side, int(t))][int(p)] = (
        float(ex), float(acc) if acc != "None" else None,
        [int(c) for c in hist.split(",")] if hist not in ("-", "") else None)


def hist_of(r):  # the runs' staleness histograms summed, or None
    hs = [v[2] for v in r.values() if v[2]]
    return [sum(c) for c in zip(*hs)] if hs else None


def mean_of(h):
    return sum(i * c for i, c in enumerate(h)) / sum(h) if h and sum(h) else None

load = {(l.split("\t")[0], l.split("\t")[1]): l.rstrip("\n").split("\t")[2:] for l in open(loads)}
desc = {"logreg": "logreg 784-10, SGD lr 0.03, %s steps" % lsteps,
        "mlp": "mlp 784-256-128-10, Adam lr 1e-3, %s steps" % msteps,
        "mnist_cnn": "mnist_cnn (3.3 M parameters), momentum 0.9 lr 0.01, %s steps" % csteps,
        "cifar10_cnn": "cifar10_cnn (28x28x1 input), momentum 0.9 lr 0.01, %s steps" % csteps}
print("Between-graph PS job, 1 ps + %s workers, batch %s per worker, Fashion-MNIST; "
      "TensorFlow %s (tf.compat.v1, %s) vs Fulcrum; %s pairs after a warm-up; "
      "examples/sec = sum of the workers' steady-state rates (first 20 steps dropped), "
      "median at each side's best thread count (t=N). Ratio = Fulcrum/TF, median [min-max] "
      "of the pairwise ratios. Accuracy: median final test accuracy. Staleness (async): the "
      "mean over every step of the runs at the best thread count (8+ counted as 8). "
      "Fulcrum's extra flags: %s. Machine: %s. Bench time %d s.\n"
      % (W, B, tfv, feed, P, "`%s`" % fflags if fflags else "none",
         "a competing busy process pinned to CPU 0 throughout (--busy)" if busy == "1"
         else "nothing else started", int(elapsed)))
print("| config | mode | TF ex/s | Fulcrum ex/s | Fulcrum/TF | TF acc | Fulcrum acc "
      "| TF staleness | Fulcrum staleness | load before -> after | TF known-good ex/s |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
banners = []
dists = []
for (model, mode) in load:
    best = {}
    for side in ("tf", "fulcrum"):
        cands = [(st.median(v[0] for v in runs[k].values()), k[3]) for k in runs
                 if k[:3] == (model, mode, side)]
        best[side] = max(cands)
    rt, rf = runs[(model, mode, "tf", best["tf"][1])], runs[(model, mode, "fulcrum", best["fulcrum"][1])]
    ratios = [rf[p][0] / rt[p][0] for p in rt if p in rf]
    acc = lambda r: st.median(v[1] for v in r.values() if v[1] is not None)
    known = peer_figures.judge(
        "tf-ps", model, int(B), best["tf"][1], best["tf"][0],
        "mode=%s,workers=%s,feed=%s" % (mode, W, feed), tfv,
        what="compare_tf_ps: TF PS job %s %s, %s workers, batch %s, %d thread%s, %s" % (
            model, mode, W, B, best["tf"][1], "" if best["tf"][1] == 1 else "s", feed))
    if known["banner"]:
        banners.append(known["banner"])
        print(known["banner"], file=sys.stderr)
    ht, hf = hist_of(rt), hist_of(rf)
    stale = lambda h: "%.2f" % mean_of(h) if h else "-"
    if ht or hf:
        dists.append((model, mode, best["tf"][1], ht, best["fulcrum"][1], hf))
    print("| %s | %s | %.0f (t=%d) | %.0f (t=%d) | %.2fx [%.2f-%.2f] | %.4f | %.4f | %s | %s "
          "| %s -> %s | %s |"
          % (desc[model], mode, best["tf"][0], best["tf"][1], best["fulcrum"][0], best["fulcrum"][1],
             st.median(ratios), min(ratios), max(ratios), acc(rt), acc(rf), stale(ht), stale(hf),
             load[(model, mode)][0], load[(model, mode)][1], known["cell"]))
if dists:
    print("\nStaleness distributions (share of steps by staleness, all runs at the best thread "
          "count):\n")
    print("| config | side | steps | " + " | ".join(str(i) for i in range(8)) + " | 8+ |")
    print("| --- | --- | ---: |" + " ---: |" * 9)
    for model, mode, tt, ht, tfu, hf in dists:
        for side, t, h in (("TF", tt, ht), ("Fulcrum", tfu, hf)):
            if h:
                print("| %s %s | %s (t=%d) | %d | %s |" % (model, mode, side, t, sum(h), " | ".join(
                    "%.2f" % (c / sum(h)) for c in h)))
if banners:
    print("\n```\n%s\n```" % "\n".join(banners))
print("\nAll medians (ex/s): " + " | ".join(
    "%s %s: " % mm + "; ".join("%s t=%d %.0f" % (k[2], k[3], st.median(v[0] for v in runs[k].values()))
                               for k in sorted(runs) if k[:2] == mm) for mm in load))
EOF
echo "compare_tf_ps: table written to ${out#${ROOT}/}" >&2
(( keep )) && echo "compare_tf_ps: run folders kept in ${work#${ROOT}/}" >&2
exit 0
