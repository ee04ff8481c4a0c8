#!/usr/bin/env bash
# Packs what bench/gpu_check.sh needs on a GPU machine that has a CUDA driver and CUDA's
# libraries (cudart, cuBLAS, cuDNN 9; PyTorch's wheels carry them) but none of Fulcrum's Debian
# packages: the CUDA-built binaries of build/bin (the tests of the CUDA backend, ops_bench, the
# worker and its plugin libfulcrum_cuda.so) and every shared library they need from Debian,
# except the C library's own and CUDA's, into one xz archive (gpu_bundle/bundle.tar.xz, about
# 15 MB: Debian's OpenBLAS alone is 35 MB unpacked), and Debian's Fashion-MNIST files
# (gpu_bundle/fashion-mnist, 30 MB) for gpu_check.sh's accuracy section.
#
# Usage: bench/gpu_bundle.sh [--build=DIR] [--out=DIR]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ROOT}/build" out="${ROOT}/gpu_bundle"
BENCH_NAME=gpu_bundle
source "${ROOT}/bench/lib/options.sh"
parse_options "build out" "$@"
bins=(fulcrum_ops_cuda_test fulcrum_backend_conformance_test ops_bench worker ps chief libfulcrum_cuda.so)
for b in "${bins[@]}"; do
  [[ -f "$build/bin/$b" ]] || die "$build/bin/$b is missing: configure with the CUDA toolkit and build it"
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for b in "${bins[@]}"; do cp "$build/bin/$b" "$stage/bin/"; done
# Debian's libraries the binaries load, less glibc's, the compiler runtime's and CUDA's (those
# come from the GPU machine, matching its driver).
(cd "$build/bin" && ldd "${bins[@]}") | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so|ld-linux|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
mkdir -p "$out"
tar -C "$stage" -cJf "$out/bundle.tar.xz" bin lib
fashion=/usr/share/datasets/fashion-mnist
[[ -d "$fashion" ]] || die "$fashion is missing (apt-get install dataset-fashion-mnist)"
rm -rf "$out/fashion-mnist" && cp -r "$fashion" "$out/fashion-mnist"
echo "gpu_bundle: $out/bundle.tar.xz ($(du -h "$out/bundle.tar.xz" | cut -f1); $(find "$stage/lib" -type f | wc -l) libraries)"
