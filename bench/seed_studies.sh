#!/usr/bin/env bash
# Runs the commands of docs/studies/*.md in order (Touchstone, HKUST, Wang et al., CS744) and
# writes each page's output to OUT/<study>.log, the runs under OUT/out (about 8 minutes on the
# 2-core development VM; root, for the emulated hosts).
#   bench/seed_studies.sh OUT        # OUT must not exist
# Environment: BIN_DIR (default build/bin).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if (($# != 1)) || [[ -e "$1" ]]; then
  echo "usage: bench/seed_studies.sh OUT (a folder that does not exist yet)" >&2
  exit 2
fi
export BIN_DIR=${BIN_DIR:-build/bin}
S=$(realpath -m "$1")
mkdir -p "$S/out"
keys='import json,sys
s=json.load(open(sys.argv[1]))
for k in ("Job Execution Time","Total CPU Usage","Total Memory used","Total bytes sent over network","Total bytes received over network","final_test_accuracy","examples_per_sec"):
    print("%-34s %s" % (k, s.get(k)))'
{
date -u
$BIN_DIR/worker --model=logreg --optimizer=sgd --learning_rate=0.01 --batch_size=256 \
  --train_steps=1000 --run_dir=$S/out/touchstone-single 2>&1 | tail -2
python3 -c "$keys" $S/out/touchstone-single/summary.json
} > $S/touchstone-single.log 2>&1
{
date -u
scripts/local_cluster.sh cluster_specs/local_1ps_2w.json --model=logreg --optimizer=sgd \
  --learning_rate=0.01 --batch_size=256 --train_steps=1000 --run_dir=$S/out/touchstone-cluster 2>&1 | tail -2
for t in chief-0 ps-0 worker-0 worker-1; do echo "== $t"; python3 -c "$keys" $S/out/touchstone-cluster/$t/summary.json; done
} > $S/touchstone-cluster.log 2>&1
{
date -u
/usr/bin/python3 bench/sweep.py --layouts=ps-w-w,pw-pw,pw-w --workers=2 --ps=1,2 --batch_sizes=128 \
  --modes=sync --rates=1gbit --model=autoencoder --steps=300 --repeats=1 \
  --extra="--optimizer=adam --learning_rate=0.001" --out=$S/out/hkust --prefix=sth 2>&1 | tail -15
/usr/bin/python3 bench/sweep.py --layouts=ps-w-w,pw-pw,pw-w --workers=2 --ps=1,2 --batch_sizes=128 \
  --modes=sync --rates=1gbit --model=autoencoder --steps=300 --repeats=1 \
  --extra="--optimizer=adam --learning_rate=0.001 --model_width=2" --out=$S/out/hkust-w2 --prefix=sth 2>&1 | tail -15
} > $S/hkust.log 2>&1
{
date -u
/usr/bin/python3 bench/sweep.py --layouts=ps-w-w --workers=1,2,4 --ps=1 --batch_sizes=100,200 --modes=sync \
  --rates=1gbit,10gbit --model=mlp --steps=200 --repeats=1 \
  --extra="--optimizer=adam --learning_rate=0.001" --out=$S/out/wang --prefix=stw 2>&1 | tail -15
} > $S/wang.log 2>&1
{
date -u
$BIN_DIR/worker --model=logreg --learning_rate=0.03 --batch_size=128 --train_steps=5000 \
  --run_dir=$S/out/cs744-nops 2>&1 | tail -2
scripts/netns_hosts.sh up 3 --rate 1gbit --prefix fh
for layout in cs744-single cs744-cluster cs744-cluster2; do
  for mode in sync async; do
    echo "== $layout $mode"
    scripts/local_cluster.sh --hosts cluster_specs/layouts/$layout/hosts.json \
      cluster_specs/layouts/$layout/spec.json --model=logreg --learning_rate=0.03 --batch_size=128 \
      --mode=$mode --train_steps=5000 --target_accuracy=0.8 --eval_every=50 \
      --run_dir=$S/out/cs744-$layout-$mode 2>&1 | tail -1
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print({k: r.get(k) for k in ("stop_reason","time_to_target_accuracy_seconds","global_step","final_test_accuracy","workers_examples_per_sec","train_seconds")})' $S/out/cs744-$layout-$mode/report.json
  done
done
scripts/netns_hosts.sh down --prefix fh
} > $S/cs744.log 2>&1
echo "seed_studies: logs in $S"
