# syntax=docker/dockerfile:1
# vocabd container image: multi-stage.
#   build:   debian:bookworm with the -dev packages (the same list as deploy/dev.sh)
#   runtime: debian:bookworm-slim with only the runtime shared libraries,
#            non-root user 10001, the bundled stories260K model.
# (ocl-icd-opencl-dev: Debian's dnnl CMake config looks for OpenCL; it is only a
# Recommends of libdnnl-dev, so --no-install-recommends needs it spelled out.)
# Build:  docker build -t vocabd:0.1.0 --build-arg VOCABD_GIT_SHA=$(git rev-parse --short=12 HEAD) .
#         (or deploy/container-test.sh: buildah, no Docker engine)
# Run:    docker run -p 50051:50051 -p 8080:8080 -p 9090:9090 vocabd:0.1.0 [extra vocabd flags]
# Flags come from VOCABD_* environment variables (defaults below) and from
# CMD / `docker run ... <flags>`; a command-line flag wins over its env var.

FROM debian:bookworm AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config git ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto \
      libdnnl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libabsl-dev libcli11-dev \
      libssl-dev libcpp-httplib-dev prometheus-cpp-dev ocl-icd-opencl-dev \
      libpcre2-dev libicu-dev \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# .git is not in the context: pass the commit for vocabd_build_info / the startup
# log with --build-arg VOCABD_GIT_SHA=$(git rev-parse --short=12 HEAD).
ARG VOCABD_GIT_SHA=unknown
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DVOCABD_BUILD_TESTS=OFF -DVOCABD_BUILD_BENCH=OFF -DVOCABD_GIT_SHA_OVERRIDE="$VOCABD_GIT_SHA" \
    && cmake --build /build --target vocabd vocabctl -j "$(nproc)" \
    && strip /build/server/vocabd /build/client/vocabctl

FROM debian:bookworm-slim AS runtime
ARG DEBIAN_FRONTEND=noninteractive
# Runtime libraries only (what `ldd vocabd vocabctl` needs); no compilers, no -dev.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libdnnl2 libgomp1 libspdlog1.10 libfmt9 \
      libabsl20220623 libssl3 libcpp-httplib0.11 libprometheus-cpp-core1.0 ca-certificates \
      libpcre2-8-0 libicu72 \
    && apt-get clean && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 vocabd \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
         --shell /usr/sbin/nologin vocabd
COPY --from=build /build/server/vocabd /build/client/vocabctl /opt/vocabd/bin/
COPY models/ /opt/vocabd/models/
LABEL org.opencontainers.image.title="vocabd" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.description="gRPC service for transformer embedding tables, LM heads and RoPE"
ENV PATH=/opt/vocabd/bin:$PATH \
    VOCABD_LISTEN=0.0.0.0:50051 \
    VOCABD_METRICS_LISTEN=0.0.0.0:9090 \
    VOCABD_HTTP_LISTEN=0.0.0.0:8080 \
    VOCABD_MODEL=stories260K=/opt/vocabd/models/stories260K/stories260K.bin \
    VOCABD_LOG_FORMAT=json \
    VOCABD_LOG_LEVEL=info \
    VOCABD_TARGET=127.0.0.1:50051 \
    OMP_NUM_THREADS=1
USER 10001:10001
WORKDIR /opt/vocabd
# gRPC (vocabd.v1 + grpc.health.v1 + reflection), HTTP/JSON (POST /v1/<Service>/<Method>,
# /healthz, /readyz, /metrics) and Prometheus /metrics.
EXPOSE 50051 8080 9090
# With TLS on, also set VOCABD_CA (and VOCABD_TLS_SERVER_NAME) for vocabctl.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/opt/vocabd/bin/vocabctl", "--timeout", "2000", "health"]
ENTRYPOINT ["/opt/vocabd/bin/vocabd"]
CMD []
