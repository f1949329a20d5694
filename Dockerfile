# gatewayd for docker-compose.yml: built on Debian 12 with the same Debian packages as
# scripts/run.sh, run as the unprivileged user gatewayd with its data in the /var/lib/gatewayd volume.
#
#   docker build -t gatewayd .

# ---- builder: the Debian 12 toolchain and -dev packages, Release build of the two programs -------
FROM debian:12 AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src

# The package list first, so this layer is rebuilt only when scripts/deps.sh changes.
COPY scripts/deps.sh scripts/deps.sh
RUN source scripts/deps.sh \
 && gw_install_deps GW_BUILD_DEPS \
 && rm -rf /var/lib/apt/lists/*

# Then the sources (.dockerignore keeps build trees, data and docs out of the context).
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGATEWAY_WERROR=OFF \
 && cmake --build build -j"$(nproc)" --target gatewayd gatewayctl

# ---- runtime: only the shared libraries the two programs load, plus curl for the healthcheck ------
FROM debian:12-slim

# One package per directly linked library (readelf -d build/gatewayd | grep NEEDED, then dpkg -S):
# librocksdb.so.7.8, libcrypto.so.3 (libssl3, also used by Pistache), libpsl.so.5 (its suffix
# list is built in), libidn2.so.0 (xn-- labels of hostnames), libmodsecurity.so.3,
# libpcre2-8.so.0 (our check of @rx regexes), libcares.so.2, libpistache.so.0, librdkafka.so.1
# (the Kafka mirror), libjemalloc.so.2, libseccomp.so.2 (the WAF sandbox's workers),
# libstdc++.so.6, libgcc_s.so.1. apt pulls in their own dependencies.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates curl \
      libc-ares2 libgcc-s1 libidn2-0 libjemalloc2 libmodsecurity3 libpcre2-8-0 libpistache0 libpsl5 \
      librdkafka1 librocksdb7.8 libseccomp2 \
      libssl3 libstdc++6 \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --system gatewayd \
 && useradd --system --gid gatewayd --home-dir /var/lib/gatewayd --no-create-home \
      --shell /usr/sbin/nologin gatewayd \
 && install -d -o gatewayd -g gatewayd -m 0750 /var/lib/gatewayd

COPY --from=build /src/build/gatewayd /src/build/gatewayctl /usr/local/bin/

ENV GATEWAY_LISTEN=0.0.0.0:8080 \
    GATEWAY_DATA_DIR=/var/lib/gatewayd
USER gatewayd:gatewayd
WORKDIR /var/lib/gatewayd
# A new named volume is seeded from this directory, so it starts owned by gatewayd.
VOLUME ["/var/lib/gatewayd"]
EXPOSE 8080

HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["curl", "-fsS", "-o", "/dev/null", "http://127.0.0.1:8080/readyz"]

# gatewayd handles SIGTERM itself (drains requests, flushes, exits 0), so it runs as PID 1.
ENTRYPOINT ["gatewayd"]
