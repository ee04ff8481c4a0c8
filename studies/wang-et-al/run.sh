#!/usr/bin/env bash
# Wang et al., rerun with Fulcrum: examples/s of sync training against the number of workers
# (1, 2, 4, 8) with 1 and 2 ps, on 1 and 10 Gbit/s links, against the ideal linear speed-up
# (their Figures 10 and 11). The study's CIFAR-10 CNN is models' cifar10_cnn (TensorFlow's
# CIFAR-10 tutorial network, 1.07 M parameters) on synthetic 24x24x3 images (no CIFAR-10 files
# here; throughput does not depend on the pixels), batch 100 per worker.
#
# On this machine: PS-W-W with a host per task (ps 0 and the chief on host 1, ps 1 on host 2,
# one host per worker: 10 hosts for 8 workers + 2 ps), every host a scaled one
# (scripts/netns_hosts.sh --cpus 0.6 --scale 4: 0.15 CPU and 1/4 of the link rate each), so
# that 10 hosts fit on 2 cores with the compute-to-communication ratio of hosts of 0.6 CPU on
# the named links. On real nodes (--nodes), the same sweep runs one task per node through
# scripts/launch_ssh.sh, on whatever links the nodes have.
#
# The study's hardware, emulated: --host_examples_per_sec=E gives every host the compute of
# the study's machine (E examples/s beside its link: the compute-to-link ratio of a GPU node on
# 1 Gbit/s) instead of --cpus (bench/sweep.py and scripts/netns_hosts.sh's option of that
# name); --examples_per_cpu=X is what one CPU of this machine computes for the model and batch,
# or `measure` (the default): a single-process run of the worker on one thread in an emulated
# host of 1/--scale CPU, times the scale, recorded in OUT/examples_per_cpu.txt (and reused by
# a restart into the same OUT, so a resumed sweep keeps its settings). A ratio the machine
# cannot give at --scale exits 2 naming the highest possible and the scale that would give it.
# Its faithfulness is checked once per OUT: the worker alone on one host made as the sweep
# makes them, its examples/s x the scale against the target (OUT/ratio_check.txt); when a
# CPU measured by this start misses the target by more than 5 %, it is corrected once by what
# that host computed and the host is checked again (both checks in the file).
#
# Usage: studies/wang-et-al/run.sh [--out=DIR] [--save] [--steps=50] [--repeats=3] [--scale=4]
#          [--cpus=0.6 | --host_examples_per_sec=E [--examples_per_cpu=X|measure]]
#          [--workers=1,2,4,8] [--ps=1,2] [--batch_sizes=100] [--rates=1gbit,10gbit]
#          [--synthetic_examples=2000]
#          [--nodes=n1,n2,... | --nodes_file=F] [--ssh=CMD] [--remote_dir=DIR]
#   --save   also copy the CSV and the plot into studies/wang-et-al/results/ (with
#            --host_examples_per_sec: as wang_ratio*)
#   --nodes  real machines, host i = the i-th name (ps 0 + chief, ps 1, then the workers)
#   --synthetic_examples  the training set's size; each worker's shard (this / workers) must
#            hold a batch, so batch 400 with 8 workers needs 3200 (exit 2 when it is short)
# Each run trains --steps steps; its examples/s leave out the first 20 (the steady state), so
# 50 steps give 30 steady ones. An interrupted run resumes: the same command again reuses
# every finished run of the same settings (bench/sweep.py) but one that ran beside more than
# 0.5 CPUs of other work, which it runs again (--rerun_busy), and the CSVs name each run's
# commit, binaries and other work (other_cpus). A measure of one CPU or a ratio check taken
# beside such work is not used (exit 1, naming it). A sweep with failed runs still writes its
# tables, then exits 1.
# Writes OUT/sweep/ (bench/sweep.py's runs, results.csv, index.html), OUT/wang.csv and
# OUT/wang_throughput.svg. Needs root on emulated hosts; exit code 2 on bad input.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
out="$ROOT/build/studies/wang-et-al" save=0 steps=50 repeats=3 scale=4 cpus=0.6 workers=1,2,4,8
ps=1,2 batches=100 rates=1gbit,10gbit host_eps="" per_cpu=measure where=() examples=2000
die() { echo "wang-et-al: error: $*" >&2; exit 2; }
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --save) save=1 ;;
    --steps=*) steps="${arg#*=}" ;;
    --repeats=*) repeats="${arg#*=}" ;;
    --rates=*) rates="${arg#*=}" ;;
    --host_examples_per_sec=*) host_eps="${arg#*=}" ;;
    --examples_per_cpu=*) per_cpu="${arg#*=}" ;;
    --scale=*) scale="${arg#*=}" ;;
    --cpus=*) cpus="${arg#*=}" ;;
    --workers=*) workers="${arg#*=}" ;;
    --ps=*) ps="${arg#*=}" ;;
    --batch_sizes=*) batches="${arg#*=}" ;;
    --synthetic_examples=*) examples="${arg#*=}" ;;
    --nodes=*|--nodes_file=*|--ssh=*|--remote_dir=*) where+=("$arg") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
[[ "$examples" =~ ^[1-9][0-9]*$ ]] || die "--synthetic_examples=$examples: expected a positive whole number"
# Each worker trains on its shard (examples / workers): the largest batch must fit the
# smallest shard, or every worker of that run would refuse it.
max_of() { tr , '\n' <<< "$1" | sort -n | tail -1; }
if [[ "$workers" =~ ^[0-9,]+$ && "$batches" =~ ^[0-9,]+$ ]]; then
  need=$(($(max_of "$batches") * $(max_of "$workers")))
  ((need <= examples)) || die "--batch_sizes up to $(max_of "$batches") with --workers up to" \
    "$(max_of "$workers") needs --synthetic_examples=$need or more (each worker's shard must hold a" \
    "batch), not $examples"
fi
data=(--dataset=synthetic --synthetic_shape=24,24,3 --synthetic_examples="$examples")
mkdir -p "$out"
# alone_on_a_host NAME HOST_OPTIONS...: the worker alone on one thread, 50 steps of the sweep's
# first batch size, in one emulated host made with HOST_OPTIONS (netns_hosts.sh up 1 ..., the
# sweep's CPU period), into OUT/NAME_run/ and OUT/NAME.log; prints its examples/s x the scale.
alone_on_a_host() {
  local name=$1 code=0
  shift
  "$ROOT/scripts/netns_hosts.sh" down --prefix stx > /dev/null 2>&1 || true
  "$ROOT/scripts/netns_hosts.sh" up 1 "$@" --scale "$scale" --cpu_period_us 10000 --prefix stx \
    > /dev/null || die "cannot make the host for $name"
  "$ROOT/scripts/netns_hosts.sh" exec stx-h1 -- "${BIN_DIR:-$ROOT/build/bin}/worker" \
    --model=cifar10_cnn --batch_size="${batches%%,*}" --train_steps=50 --threads=1 \
    --log_every=100000 "${data[@]}" --run_dir="$out/${name}_run" > "$out/$name.log" 2>&1 || code=$?
  "$ROOT/scripts/netns_hosts.sh" down --prefix stx > /dev/null 2>&1 || true
  ((code == 0)) || die "$name failed: see $out/$name.log"
  # A figure measured beside more than 0.5 CPUs of other work (bench/sweep_provenance.py's
  # MAX_OTHER_CPUS) is not used (exit 1, naming it).
  local report="$out/${name}_run/report.json" other
  other=$(/usr/bin/python3 "$ROOT/bench/sweep_provenance.py" other_cpus "$report")
  if [[ "$other" != null ]] && awk -v o="$other" 'BEGIN { exit !(o > 0.5) }'; then
    echo "wang-et-al: error: $name ran beside $other CPUs of other work ($report's machines):" \
      "its figure is not used; run again on a quiet machine" >&2
    exit 1
  fi
  /usr/bin/python3 -c 'import json,sys; print("%.1f" % (float(sys.argv[2]) *
    json.load(open(sys.argv[1]))["examples_per_sec"]))' "$out/${name}_run/summary.json" "$scale"
}
if ((${#where[@]})); then
  links=()  # real nodes: their own links, no CPU shares
elif [[ -n "$host_eps" ]]; then
  if [[ "$per_cpu" == measure && -s "$out/examples_per_cpu.txt" ]]; then
    # Measured by an earlier start into this folder: the same figure, so a resumed sweep
    # keeps its settings (and reuses its finished runs).
    per_cpu=$(cat "$out/examples_per_cpu.txt")
    echo "wang-et-al: one CPU here computes $per_cpu examples/s ($out/examples_per_cpu.txt)"
  elif [[ "$per_cpu" == measure ]]; then
    # One CPU of this machine, measured as the hosts will run: in a host of 1/--scale CPU.
    per_cpu=$(alone_on_a_host examples_per_cpu --rate none --cpus 1) measured=1
    echo "$per_cpu" > "$out/examples_per_cpu.txt"
    echo "wang-et-al: one CPU here computes $per_cpu examples/s (batch ${batches%%,*}, measured at 1/$scale CPU)"
  fi
  # Faithfulness: one host as the sweep makes it (the ratio's CPU share at the scale), the
  # worker alone on it; its examples/s x the scale against the target (OUT/ratio_check.txt).
  # One CPU measured at 1/3 CPU varied by a quarter from start to start here (831.7, 885.6,
  # 1046.5 examples/s; checks +13.1, +12.3, -12.6 %): a CPU measured by this start and off
  # by more than 5 % is corrected once by what the host computed, and a host made and checked
  # again with it; the file keeps both checks.
  check_line() {  # GOT: the check's line
    awk -v g="$1" -v w="$host_eps" -v s="$scale" -v x="$per_cpu" 'BEGIN { printf "a host " \
      "computes %.1f examples/s at scale 1 (measured at 1/%s, x %s; one CPU taken as %s " \
      "examples/s) against the %.1f asked: %+.1f %%\n", g, s, s, x, w, 100 * (g / w - 1) }'
  }
  if [[ ! -s "$out/ratio_check.txt" ]]; then
    host=(--rate "${rates%%,*}" --host_examples_per_sec "$host_eps")
    got=$(alone_on_a_host ratio_check "${host[@]}" --examples_per_cpu "$per_cpu") first=""
    if ((${measured:-0})) &&
        awk -v g="$got" -v w="$host_eps" 'BEGIN { exit !(g > 1.05 * w || g < 0.95 * w) }'; then
      first="before the correction: $(check_line "$got")"
      per_cpu=$(awk -v x="$per_cpu" -v g="$got" -v w="$host_eps" \
        'BEGIN { printf "%.1f", x * g / w }')
      echo "$per_cpu" > "$out/examples_per_cpu.txt"
      echo "wang-et-al: $first; one CPU corrected to $per_cpu examples/s"
      got=$(alone_on_a_host ratio_check_corrected "${host[@]}" --examples_per_cpu "$per_cpu")
    fi
    { [[ -z "$first" ]] || echo "$first"; check_line "$got"; } > "$out/ratio_check.txt"
  fi
  echo "wang-et-al: ratio check: $(tail -1 "$out/ratio_check.txt")"
  links=("--rates=$rates" --host_examples_per_sec="$host_eps" --examples_per_cpu="$per_cpu"
         --scales="$scale")
else
  links=("--rates=$rates" --cpus="$cpus" --scales="$scale")
fi
echo "wang-et-al: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
sweep_code=0
/usr/bin/python3 "$ROOT/bench/sweep.py" --layouts=ps-w-w --hosts=per_task --workers="$workers" \
  --ps="$ps" --batch_sizes="$batches" --modes=sync --model=cifar10_cnn --steps="$steps" \
  --repeats="$repeats" --eval_every="$steps" "${links[@]}" "${where[@]}" --extra="${data[*]}" \
  --rerun_busy --out="$out/sweep" --prefix=stw || sweep_code=$?
((sweep_code <= 1)) || exit "$sweep_code"  # bad input (2): nothing ran
echo "wang-et-al: done $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$ROOT/studies/tables.py" wang "$out/sweep/results.csv" "$out"
if ((save)); then
  mkdir -p "$HERE/results"
  name=wang
  [[ -z "$host_eps" ]] || name=wang_ratio
  cp "$out/wang.csv" "$HERE/results/$name.csv"
  cp "$out/wang_throughput.svg" "$HERE/results/${name}_throughput.svg"
  cp "$out/sweep/results.csv" "$HERE/results/${name/wang/sweep}_results.csv"
fi
if ((sweep_code)); then
  echo "wang-et-al: some runs failed (see $out/sweep/runs.csv); the same command again reruns them" >&2
  exit 1
fi
