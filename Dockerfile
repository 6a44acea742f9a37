# syntax=docker/dockerfile:1
# The operator image: the release binary that `make` builds (same toolchain, target and
# Cargo.lock), on distroless/cc (glibc, libgcc, CA certificates; no shell, no package
# manager), running as a non-root user. docs/adr/0005-operator-image.md explains the choice.
#
#   docker build -t agentic-operator:dev .
#
# Multi-arch: `docker buildx build --platform linux/amd64,linux/arm64 .` builds natively
# for each platform; both base images are multi-arch.

FROM rust:1.95-bookworm AS builder
WORKDIR /src
# .dockerignore keeps the context to the Cargo workspace.
COPY . .
# Cache mounts keep downloaded crates and build output between builds; the binary is copied
# out of the cached target directory because cache mounts are not part of the image. The
# binary is position-dependent, as the Makefile's `build` explains.
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    triple="$(rustc -vV | sed -n 's/^host: //p')" \
    && RUSTFLAGS="-C relocation-model=static" \
       cargo build --release --locked --target "$triple" -p agentic-operator \
    && install -D -m 0755 "target/$triple/release/agentic-operator" /out/agentic-operator

# Debian 12 glibc, as in the builder.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="agentic-operator" \
      org.opencontainers.image.description="Kubernetes operator for AI coding agents and their skills" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/agentic-operator /usr/local/bin/agentic-operator
# Numeric, so that kubelet can verify runAsNonRoot without /etc/passwd.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/agentic-operator"]
CMD ["run"]
