# lockwatch container image: build with the Rust toolchain, run from a small image as a
# non-root user. Build:  docker build --build-arg LOCKWATCH_GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t lockwatch .
# Run:    docker run -p 9747:9747 -v $PWD/lockwatch.toml:/etc/lockwatch/lockwatch.toml:ro lockwatch

FROM docker.io/library/rust:1.95-slim-bookworm AS build
WORKDIR /src
# The commit for `lockwatch --version` (the build context carries no .git).
ARG LOCKWATCH_GIT_COMMIT=unknown
ENV LOCKWATCH_GIT_COMMIT=${LOCKWATCH_GIT_COMMIT}
COPY . .
RUN cargo build --release --locked --bin lockwatch \
    && cp target/release/lockwatch /lockwatch \
    && mkdir -p /state

# glibc and libgcc, CA certificates, a `nonroot` user (65532), no shell or package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /lockwatch /usr/bin/lockwatch
COPY alerts/ /usr/share/lockwatch/alerts/
COPY dashboards/ /usr/share/lockwatch/dashboards/
COPY runbooks/ /usr/share/lockwatch/runbooks/
# Owned by the runtime user, so that a volume created from it is writable.
COPY --from=build --chown=65532:65532 /state /var/lib/lockwatch
USER 65532:65532
# /etc/lockwatch: lockwatch.toml (and a web config, certificates); /var/lib/lockwatch: state.dir.
VOLUME ["/etc/lockwatch", "/var/lib/lockwatch"]
EXPOSE 9747
ENTRYPOINT ["/usr/bin/lockwatch"]
CMD ["serve", "--config", "/etc/lockwatch/lockwatch.toml"]
