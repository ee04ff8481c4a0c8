#!/usr/bin/env bash
# ps-lite (github.com/dmlc/ps-lite, MXNet's parameter server, ZeroMQ over TCP) against Fulcrum
# on the same payloads, on loopback, every task a process of its own on both sides:
#   ps-lite: 1 scheduler + S servers + W workers of bench/pslite/build/pslite_bench
#            (bench/pslite/run.sh); server = KVServer with a plain SGD handle.
#   Fulcrum: S build/bin/ps processes + W build/bin/ps_pushpull workers (worker 0 creates
#            the variables, async SGD, and shuts the ps down at the end).
# Both: one round = push the whole parameter set and pull it back, cut into pieces of at most
# --chunk_bytes (Fulcrum's --rpc_chunk_bytes; ps-lite: one key per piece, one ZPushPull per key,
# all in flight), SGD lr 1e-6; each worker has its own connection to each server; --warmup_s
# unreported, then a file barrier, then a --seconds window. Figure = sum over workers of
# MB/s (10^6 bytes of values pushed + pulled per second) and of rounds/s.
#
# Also reported: CPU seconds per GB moved (user + system of every process of the side, the
# scheduler included, read from /proc over 70% of the window; median of the pairs), a figure
# less sensitive than MB/s to what other tenants of the machine take.
#
# Per (model, W): one unreported warm-up run of each side (Fulcrum first: its RESULT gives the
# model's bytes, which ps-lite then moves), then --pairs pairs ps-lite, Fulcrum (A B A B ...).
# Reported: each side's median, the median and min-max of the per-pair ratios Fulcrum/ps-lite,
# /proc/loadavg before and after the row. A markdown table goes to stdout and --out.
#
# Usage: bench/compare_pslite.sh [--models=logreg,syn1mb,syn4mb,syn16mb,syn64mb]
#          [--workers=1,2] [--servers=1] [--pairs=3] [--warmup_s=1] [--seconds=3]
#          [--chunk_bytes=2097152] [--pslite_mode=chunked|single] [--timeout=120]
#          [--data_plane=tcp|grpc] [--out=build/compare_pslite.md] [--keep]
#   models: Fulcrum's names (bench/ps_bench_model.h): logreg (784x10 + 10 floats, 31400 B),
#           mlp, autoencoder, syn<N>mb (N MiB in 8 equal variables).
#   --pslite_mode  chunked (default): one ZPushPull per key; single: the whole set in one
#                  ZPushPull (ps-lite slices it into one message per server).
#   --servers      S > 1 may give the two sides different layouts: Fulcrum places whole
#                  variables round-robin and then chunks each ps's share, ps-lite spreads the
#                  chunk-sized keys round-robin (logreg on 2: Fulcrum 2 chunks, ps-lite 1 key on
#                  one server); the chunks column shows it. Only S = 1 is in docs/.
#   --data_plane   Fulcrum's transport for Pull/PushPull (its --data_plane): tcp (default here,
#                  its fastest, as ps-lite runs on raw ZeroMQ/TCP) or grpc.
#   --timeout      seconds any one process may live (timeout(1) around each).
#   --keep         keep the per-run folders (logs, specs) under $TMPDIR.
# Environment: FULCRUM_BUILD (default build), PSLITE_BUILD (default bench/pslite/build),
#   PSLITE_ENV (extra VAR=value words for the ps-lite processes, e.g. "DMLC_LOCAL=1").
# Needs: cmake --build build --target ps ps_pushpull; bench/pslite/build.sh --source=...
# Exit: 0; 2 bad flag; 1 a run failed (its logs are kept and named).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FULCRUM_BUILD="${FULCRUM_BUILD:-${ROOT}/build}"
PSLITE_BUILD="${PSLITE_BUILD:-${ROOT}/bench/pslite/build}"
models=logreg,syn1mb,syn4mb,syn16mb,syn64mb workers_list=1,2 servers=1 pairs=3
warmup_s=1 seconds=3 chunk_bytes=2097152 pslite_mode=chunked timeout_s=120 data_plane=tcp
out="${ROOT}/build/compare_pslite.md" keep=0
BENCH_NAME=compare_pslite
source "${ROOT}/bench/lib/options.sh"
parse_options "models workers=workers_list servers pairs warmup_s seconds chunk_bytes pslite_mode timeout=timeout_s data_plane out keep!" "$@"
[[ "$models" =~ ^[a-z0-9]+(,[a-z0-9]+)*$ ]] || die "--models: comma-separated names, not '$models'"
[[ "$workers_list" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  die "--workers: comma-separated positive integers, not '$workers_list'"
[[ "$servers" =~ ^[1-9][0-9]*$ ]] || die "--servers: a positive integer, not '$servers'"
[[ "$pairs" =~ ^[1-9][0-9]*$ ]] || die "--pairs: a positive integer, not '$pairs'"
[[ "$warmup_s" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--warmup_s: seconds >= 0, not '$warmup_s'"
[[ "$seconds" =~ ^[0-9]+(\.[0-9]+)?$ && "$seconds" != 0 ]] ||
  die "--seconds: seconds > 0, not '$seconds'"
[[ "$chunk_bytes" =~ ^[1-9][0-9]*$ && "$chunk_bytes" -ge 4 ]] ||
  die "--chunk_bytes: an integer >= 4, not '$chunk_bytes'"
[[ "$pslite_mode" == chunked || "$pslite_mode" == single ]] ||
  die "--pslite_mode: chunked or single, not '$pslite_mode'"
[[ "$timeout_s" =~ ^[1-9][0-9]*$ ]] || die "--timeout: whole seconds > 0, not '$timeout_s'"
[[ "$data_plane" == tcp || "$data_plane" == grpc ]] ||
  die "--data_plane: tcp or grpc, not '$data_plane'"

PS_BIN="${FULCRUM_BUILD}/bin/ps"
PUSHPULL_BIN="${FULCRUM_BUILD}/bin/ps_pushpull"
PSLITE_BIN="${PSLITE_BUILD}/pslite_bench"
for bin in "$PS_BIN" "$PUSHPULL_BIN"; do
  [[ -x "$bin" ]] || { echo "compare_pslite: no $bin (cmake --build ${FULCRUM_BUILD} --target ps ps_pushpull)" >&2; exit 1; }
done
[[ -x "$PSLITE_BIN" ]] ||
  { echo "compare_pslite: no $PSLITE_BIN (bench/pslite/build.sh --source=<ps-lite mirror or tree>)" >&2; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/compare_pslite.XXXXXX")"
pids=()
cleanup() {
  # TERM first: timeout(1) passes it on, run.sh's own trap kills its tasks.
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  ((${#pids[@]} == 0)) || sleep 0.5
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if ((keep == 0)); then rm -rf "$WORK"; else echo "compare_pslite: runs kept in $WORK" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_ports() {  # n distinct free loopback ports, one per line
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
EOF
}

# CPU seconds (user + system, all threads) of the given processes so far; "nan" when one
# of them is gone.
cpu_seconds() {
  local pid total=0 t
  for pid in "$@"; do
    t="$(sed 's/^.*) //' "/proc/${pid}/stat" 2>/dev/null | awk '{print $12 + $13}')" || t=
    [[ -n "$t" ]] || { echo nan; return 0; }
    total=$((total + t))
  done
  awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.4f", t / hz}'
}

# Cores that a run's processes keep busy inside the measured window, into ${WORK}/last.cpu
# ("nan" when the run ends first): waits until all `workers` have reached the "measure"
# barrier, reads the CPU time of every child of the `parents` (the timeout(1) processes
# around the tasks; `depth` 2 = their children's children, for ps-lite's run.sh), sleeps 70%
# of the window, reads again.
sample_window() {  # barrier_dir workers depth parents...
  local dir="$1" w="$2" depth="$3" p level procs before after t0 t1
  shift 3
  local parents=("$@")
  echo nan >"${WORK}/last.cpu"
  until (($(find "$dir" -name 'measure.*' ! -name '*.tmp' | wc -l) >= w)); do
    for p in "${parents[@]}"; do kill -0 "$p" 2>/dev/null || return 0; done
    sleep 0.01
  done
  procs=("${parents[@]}")
  for ((level = 0; level < depth; ++level)); do
    mapfile -t procs < <(for p in "${procs[@]}"; do pgrep -P "$p" || true; done)
  done
  t0="$(date +%s.%N)"
  before="$(cpu_seconds "${procs[@]}")"
  sleep "$(awk -v s="$seconds" 'BEGIN {print 0.7 * s}')"
  after="$(cpu_seconds "${procs[@]}")"
  t1="$(date +%s.%N)"
  if [[ "$before" != nan && "$after" != nan ]]; then
    awk -v a="$before" -v b="$after" -v t0="$t0" -v t1="$t1" \
      'BEGIN {printf "%.3f\n", (b - a) / (t1 - t0)}' >"${WORK}/last.cpu"
  fi
}

# The run functions run in this shell (not in a pipe or $(...)), so that run_id, keep and
# pids stay visible to cleanup; each leaves its workers' RESULT lines in ${WORK}/last.out.
run_id=0
# Fulcrum: S ps processes + W ps_pushpull workers.
run_fulcrum() {  # model workers
  run_id=$((run_id + 1))
  local model="$1" w="$2" dir="${WORK}/run${run_id}-fulcrum-$1-w$2"
  mkdir -p "${dir}/barrier"
  mapfile -t ports < <(free_ports $((servers + w)))
  python3 - "$servers" "${ports[@]}" >"${dir}/spec.json" <<'EOF'
import json, sys
s = int(sys.argv[1])
addr = ["127.0.0.1:%s" % p for p in sys.argv[2:]]
print(json.dumps({"ps": addr[:s], "worker": addr[s:]}))
EOF
  pids=()
  local p i status rc=0
  for ((p = 0; p < servers; ++p)); do
    timeout -k 5 "$timeout_s" "$PS_BIN" --cluster_spec="${dir}/spec.json" --task_index="$p" \
      --profile=off --startup_timeout=60 --heartbeat_timeout=60 --data_plane="$data_plane" \
      >"${dir}/ps${p}.log" 2>&1 &
    pids+=("$!")
  done
  for ((i = 0; i < w; ++i)); do
    timeout -k 5 "$timeout_s" "$PUSHPULL_BIN" --cluster_spec="${dir}/spec.json" \
      --task_index="$i" --model="$model" --rpc_chunk_bytes="$chunk_bytes" \
      --data_plane="$data_plane" --warmup_s="$warmup_s" --seconds="$seconds" --barrier_dir="${dir}/barrier" \
      >"${dir}/worker${i}.out" 2>"${dir}/worker${i}.log" &
    pids+=("$!")
  done
  sample_window "${dir}/barrier" "$w" 1 "${pids[@]}"
  for pid in "${pids[@]}"; do
    status=0
    wait "$pid" || status=$?
    ((status == 0 || rc != 0)) || rc=$status
  done
  pids=()
  if ((rc != 0)); then
    keep=1
    echo "compare_pslite: Fulcrum run failed (exit $rc); logs in $dir:" >&2
    tail -n 5 "${dir}"/*.log >&2 || true
    exit 1
  fi
  cat "${dir}"/worker*.out >"${WORK}/last.out"
}

# ps-lite: 1 scheduler + S servers + W workers (bench/pslite/run.sh).
run_pslite() {  # model_bytes workers
  run_id=$((run_id + 1))
  local bytes="$1" w="$2" dir="${WORK}/run${run_id}-pslite-$1-w$2" rc=0
  mkdir -p "${dir}/barrier"
  # PS_VERBOSE=0: no per-message logging (ps-lite's default). The glibc tunables keep big
  # receive buffers in the heap, as Fulcrum's processes do through base/malloc.h.
  local extra_env=()
  read -r -a extra_env <<<"${PSLITE_ENV:-}"
  env PS_VERBOSE=0 MALLOC_MMAP_THRESHOLD_=2000000000 MALLOC_TRIM_THRESHOLD_=4000000000 \
    "${extra_env[@]}" "${ROOT}/bench/pslite/run.sh" --servers="$servers" --workers="$w" \
    --timeout="$timeout_s" -- "$PSLITE_BIN" --model_bytes="$bytes" --chunk_bytes="$chunk_bytes" \
    --mode="$pslite_mode" --warmup_s="$warmup_s" --seconds="$seconds" \
    --barrier_dir="${dir}/barrier" >"${dir}/workers.out" 2>"${dir}/all.log" &
  pids=("$!")
  sample_window "${dir}/barrier" "$w" 2 "${pids[0]}"
  wait "${pids[0]}" || rc=$?
  pids=()
  if ((rc != 0)); then
    keep=1
    echo "compare_pslite: ps-lite run failed (exit $rc); logs in $dir:" >&2
    tail -n 20 "${dir}/all.log" >&2 || true
    exit 1
  fi
  cp "${dir}/workers.out" "${WORK}/last.out"
}

# "mb rounds model_bytes chunks cpu_s_per_gb" of the last run: MB/s and rounds/s summed over
# its RESULT lines (checks there are w of them); CPU seconds per GB moved, all its processes.
sum_results() {  # workers
  awk -v w="$1" -v cores="$(cat "${WORK}/last.cpu")" '
    /^RESULT / {
      for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
      mb += f["mb_per_s"]; rounds += f["rounds_per_s"]; n++
      bytes = f["model_bytes"]; chunks = f["chunks"]
    }
    END {
      if (n != w) { print "want " w " RESULT lines, got " n > "/dev/stderr"; exit 1 }
      printf "%.1f %.2f %s %s %s\n", mb, rounds, bytes, chunks,
             cores == "nan" ? "nan" : sprintf("%.3f", cores / mb * 1000)
    }' "${WORK}/last.out"
}

median() {  # of the numbers among the arguments ("nan" when none)
  printf '%s\n' "$@" | grep -v nan | sort -g |
    awk '{v[NR] = $1} END {print NR == 0 ? "nan" : (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
minmax() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f–%.2f", lo, hi}'; }

mkdir -p "$(dirname "$out")"
header="| model | bytes | W | S | chunks (Fulcrum / ps-lite keys) | ps-lite MB/s | Fulcrum MB/s | ps-lite rounds/s | Fulcrum rounds/s | Fulcrum/ps-lite, median of pairs (min–max) | ps-lite CPU s/GB | Fulcrum CPU s/GB | load before → after |"
{
  echo "compare_pslite: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); servers=${servers} pairs=${pairs}" \
    "warmup_s=${warmup_s} seconds=${seconds} chunk_bytes=${chunk_bytes} pslite_mode=${pslite_mode}" \
    "PSLITE_ENV='${PSLITE_ENV:-}'"
  echo "ps-lite: $(cat "${ROOT}/bench/pslite/third_party/ps-lite/SOURCE.txt" 2>/dev/null || echo unknown)"
  echo
  echo "$header"
  echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---|"
} | tee "$out"

IFS=, read -r -a model_list <<<"$models"
IFS=, read -r -a worker_counts <<<"$workers_list"
for model in "${model_list[@]}"; do
  for w in "${worker_counts[@]}"; do
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    # Warm-up, unreported: Fulcrum first (it names the model's bytes), then ps-lite.
    run_fulcrum "$model" "$w"
    res="$(sum_results "$w")"
    read -r _ _ bytes f_chunks _ <<<"$res"
    run_pslite "$bytes" "$w"
    res="$(sum_results "$w")"
    read -r _ _ p_bytes p_chunks _ <<<"$res"
    [[ "$p_bytes" == "$bytes" ]] || { echo "compare_pslite: ps-lite moved $p_bytes bytes, Fulcrum $bytes" >&2; exit 1; }
    p_mb=() f_mb=() p_rs=() f_rs=() p_cpu=() f_cpu=() ratio=()
    for ((k = 0; k < pairs; ++k)); do
      run_pslite "$bytes" "$w"
      res="$(sum_results "$w")"
      read -r pm pr _ _ pc <<<"$res"
      run_fulcrum "$model" "$w"
      res="$(sum_results "$w")"
      read -r fm fr _ _ fc <<<"$res"
      p_mb+=("$pm") f_mb+=("$fm") p_rs+=("$pr") f_rs+=("$fr") p_cpu+=("$pc") f_cpu+=("$fc")
      ratio+=("$(awk -v a="$fm" -v b="$pm" 'BEGIN {printf "%.4f", a / b}')")
      echo "compare_pslite: ${model} W=${w} pair $((k + 1)): ps-lite ${pm} MB/s (${pc} CPU s/GB)," \
        "Fulcrum ${fm} MB/s (${fc} CPU s/GB)" >&2
    done
    load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
    printf '| %s | %s | %s | %s | %s / %s | %.0f | %.0f | %.1f | %.1f | %.2f (%s) | %.2f | %.2f | %s → %s |\n' \
      "$model" "$bytes" "$w" "$servers" "$f_chunks" "$p_chunks" "$(median "${p_mb[@]}")" \
      "$(median "${f_mb[@]}")" "$(median "${p_rs[@]}")" "$(median "${f_rs[@]}")" \
      "$(median "${ratio[@]}")" "$(minmax "${ratio[@]}")" "$(median "${p_cpu[@]}")" \
      "$(median "${f_cpu[@]}")" "$load_before" "$load_after" | tee -a "$out"
  done
done
