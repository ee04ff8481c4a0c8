# Fulcrum's container image: the ps, worker and chief binaries on Debian 12 (bookworm), built
# from this checkout with Debian's packages only, run by deploy/entrypoint.sh as a non-root
# user. Kubernetes manifests: deploy/tfjob.yaml (Kubeflow TFJob), deploy/statefulset.yaml.
#
#   docker build -t fulcrum:latest .          # or: podman build -t fulcrum:latest .
#   docker run --rm fulcrum:latest worker --model=logreg --train_steps=200 --run_dir=/runs/a
#
# Build arguments: JOBS (parallel compile jobs, default: every core), FULCRUM_NATIVE (OFF: code
# for any x86-64 node, since the image runs wherever the scheduler puts it; ON: -march=native
# for the build machine's CPU only). The only network the build needs is Debian's archive.
# Guide: docs/kubernetes.md.
ARG DEBIAN_IMAGE=debian:bookworm

# ---- build: the compilers and -dev packages of scripts/setup.sh that the three binaries need
# (not the test, benchmark, clang, ccache or plotting ones).
FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      cmake make g++ pkg-config python3 ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev \
      libeigen3-dev libopenblas-dev libxsmm-dev libdnnl-dev libabsl-dev libspdlog-dev nlohmann-json3-dev \
      zlib1g-dev prometheus-cpp-dev \
 && rm -rf /var/lib/apt/lists/*
ARG JOBS=""
ARG FULCRUM_NATIVE=OFF
WORKDIR /src
# Only what the build reads (the top-level CMakeLists.txt's folders and the report renderer
# chief/CMakeLists.txt copies), so an edit elsewhere (docs, deploy/, tests) keeps this
# stage's cached build. A new top-level source folder needs its line here.
COPY CMakeLists.txt CMakePresets.json ./
COPY base base
COPY ops ops
COPY data data
COPY models models
COPY proto proto
COPY profiler profiler
COPY runtime runtime
COPY worker worker
COPY ps ps
COPY chief chief
COPY monitor monitor
COPY scripts/render_report.py scripts/
COPY scripts/fulcrum_report scripts/fulcrum_report
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DFULCRUM_CUDA=OFF \
      -DFULCRUM_NATIVE="${FULCRUM_NATIVE}" -DFULCRUM_BUILD_TESTS=OFF -DFULCRUM_BUILD_BENCH=OFF \
 && cmake --build /build -j "${JOBS:-$(nproc)}" --target ps worker chief

# ---- runtime: the shared libraries the binaries load (ldd build/bin/{ps,worker,chief}, each
# mapped to its package with dpkg -S; libc6, libstdc++6, libgcc-s1, libgfortran5 and
# libquadmath0 come with them), python3-matplotlib for the chief's report.html (the renderer
# sits next to the binaries, chief/report_html.h; python3-munkres settles python3-fonttools'
# "python3-scipy | python3-munkres", else apt takes SciPy and with it Pythran, g++ and Boost:
# 158 packages instead of 99), and Fashion-MNIST in /usr/share/datasets/fashion-mnist
# (--dataset=mnist's default folder).
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libabsl20220623 libc-ares2 libcivetweb1 libfmt9 libgrpc++1.51 libgrpc29 \
      libopenblas0-pthread libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprotobuf32 \
      libre2-9 libspdlog1.10 libssl3 zlib1g \
      python3 python3-matplotlib python3-munkres dataset-fashion-mnist \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 fulcrum \
 && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin fulcrum \
 && mkdir -p /runs && chown fulcrum:fulcrum /runs
COPY --from=build /build/bin/ps /build/bin/worker /build/bin/chief /build/bin/render_report.py \
     /opt/fulcrum/bin/
COPY --from=build /build/bin/fulcrum_report/ /opt/fulcrum/bin/fulcrum_report/
COPY deploy/entrypoint.sh /opt/fulcrum/entrypoint.sh
# Every library the binaries load is here, and each binary starts.
RUN chmod 755 /opt/fulcrum/entrypoint.sh \
 && ! ldd /opt/fulcrum/bin/ps /opt/fulcrum/bin/worker /opt/fulcrum/bin/chief | grep "not found" \
 && for b in ps worker chief; do /opt/fulcrum/bin/$b --version >/dev/null || exit 1; done
ENV FULCRUM_BIN_DIR=/opt/fulcrum/bin \
    PATH=/opt/fulcrum/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    MPLCONFIGDIR=/tmp/matplotlib
USER 10001:10001
WORKDIR /runs
# The tasks' gRPC port in deploy/*.yaml; a ps also opens a data-plane port the kernel picks.
EXPOSE 2222
ENTRYPOINT ["/opt/fulcrum/entrypoint.sh"]
