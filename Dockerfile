# syntax=docker/dockerfile:1
#
# lanyard's container image: one static binary and the CA bundle on
# `scratch`, running as a numeric non-root user. Every setting comes from
# the environment, so one image serves every environment.
#
#   docker build -t lanyard:0.1.0 .
#
# CI cannot pull the `build` stage's base image, so `deploy/build-image`
# runs the same deploy/build-rootfs with the host's cargo and replaces the
# stage with `--build-context build=<dir>`: the final stage below is the
# one both use.

FROM docker.io/library/rust:1.95.0-bookworm AS build
WORKDIR /src
COPY . .
# The same script CI runs (see deploy/build-rootfs for the static build).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    deploy/build-rootfs /out

FROM scratch
COPY --from=build /out/rootfs/ /
# 65532 is the conventional "nonroot" id of distroless images; numeric so
# Kubernetes' runAsNonRoot can verify it without an /etc/passwd.
USER 65532:65532
# 8080: the proxy, on loopback unless LANYARD_LISTEN and LANYARD_ALLOW_REMOTE
# say otherwise. 9090: health and metrics.
EXPOSE 8080 9090
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=3 \
    CMD ["/lanyard", "healthcheck"]
LABEL org.opencontainers.image.title="lanyard" \
      org.opencontainers.image.description="Token sidecar: keeps a service account's bearer token fresh and injects it into local requests" \
      org.opencontainers.image.version="0.1.0"
ENTRYPOINT ["/lanyard"]
CMD ["run"]
