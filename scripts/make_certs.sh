#!/usr/bin/env bash
# Makes what Fulcrum's mutual TLS and auth token need for every task of a ClusterSpec, into
# OUT_DIR: a CA (ca.pem, ca.key), one certificate and key per task (ps-0.pem, ps-0.key, ...;
# common name "ps:0", DNS name "ps-0", for both server and client use, signed by the CA) and
# a random shared token (token). Keys and the token are mode 600. An existing CA in OUT_DIR is
# reused (so tasks added to the spec later get certificates the others accept); task
# certificates are made afresh. Every task then runs with the same four flags:
#   --tls_cert=OUT_DIR/{task}.pem --tls_key=OUT_DIR/{task}.key --tls_ca=OUT_DIR/ca.pem
#   --auth_token_file=OUT_DIR/token
# ({task} is the task's folder name, ps-0). Copy OUT_DIR to every node (scp -p keeps modes).
#
#   scripts/make_certs.sh [--days N] SPEC OUT_DIR [extra task names, e.g. worker:7 ...]
# Exit codes: 0 done, 2 bad arguments or spec, 1 openssl failed.
set -euo pipefail
days=365
if [[ "${1:-}" == --days ]]; then
  days=${2:-}
  shift 2 || true
elif [[ "${1:-}" == --days=* ]]; then
  days=${1#*=}
  shift
fi
if (($# < 2)) || [[ "$1" == -* ]] || ! [[ "$days" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/make_certs.sh [--days N] SPEC OUT_DIR [task names...]" >&2
  exit 2
fi
spec=$1
out=$2
shift 2
if [[ ! -r "$spec" ]]; then
  echo "make_certs: cluster spec '$spec' not found" >&2
  exit 2
fi
command -v openssl > /dev/null || { echo "make_certs: openssl is not installed" >&2; exit 1; }

# Task names of the spec, "job:index" per line.
mapfile -t tasks < <(python3 -c '
import json, sys
spec = json.load(open(sys.argv[1]))
for job in ("chief", "ps", "worker"):
    # TensorFlow 1.x names the chief "master".
    given = spec.get(job, spec.get("master", [])) if job == "chief" else spec.get(job, [])
    for i in range(len(given) if isinstance(spec, dict) else 0):
        print(f"{job}:{i}")
# No chief job (TensorFlow 1.x): worker 0 also runs chief:0, with that identity.
if isinstance(spec, dict) and not spec.get("chief") and not spec.get("master") and spec.get("worker"):
    print("chief:0")
' "$spec" 2>/dev/null)
if ((${#tasks[@]} == 0)); then
  echo "make_certs: '$spec' is not a cluster spec (JSON with chief, ps and worker lists)" >&2
  exit 2
fi
for name in "$@"; do
  if ! [[ "$name" =~ ^[a-z]+:[0-9]+$ ]]; then
    echo "make_certs: '$name' is not a task name (job:index)" >&2
    exit 2
  fi
  tasks+=("$name")
done

mkdir -p "$out"
umask 077
log="$out/openssl.log"
: > "$log"
run() { "$@" >> "$log" 2>&1 || { echo "make_certs: failed: $* (see $log)" >&2; exit 1; }; }

if [[ ! -s "$out/ca.pem" || ! -s "$out/ca.key" ]]; then
  run openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/ca.key" -out "$out/ca.pem" -days "$days" -subj "/O=Fulcrum/CN=Fulcrum CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
fi
for name in "${tasks[@]}"; do
  file=${name/:/-}
  ext="$out/$file.ext"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=DNS:$file" > "$ext"
  run openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$out/$file.key" -out "$out/$file.csr" -subj "/O=Fulcrum/CN=$name"
  run openssl x509 -req -in "$out/$file.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
    -CAcreateserial -days "$days" -extfile "$ext" -out "$out/$file.pem"
  rm -f "$out/$file.csr" "$ext"
  chmod 644 "$out/$file.pem"
done
chmod 644 "$out/ca.pem"
if [[ ! -s "$out/token" ]]; then
  run openssl rand -out "$out/token" -hex 32
fi
chmod 600 "$out/token" "$out"/*.key
rm -f "$log"
echo "make_certs: CA and ${#tasks[@]} task certificate(s) in $out; give every task:"
echo "  --tls_cert=$out/{task}.pem --tls_key=$out/{task}.key --tls_ca=$out/ca.pem --auth_token_file=$out/token"
