# syntax=docker/dockerfile:1
# Spear's images, from one build:
#   runtime  the binaries on a distroless base: SMS, and nodes whose MCP
#            servers are all remote (Streamable HTTP)
#   node     spearlet with Node.js and Python, for stdio MCP servers (npx, uvx)
# spear-sandbox is the launcher spearlet runs each stdio server through.
# docker build --target runtime -t spear .   |   docker build --target node -t spear-node .

FROM rust:1.88-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake clang \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p spear-sms -p spearlet -p spear-sandbox \
 && install -D -m 0755 target/release/sms target/release/spearlet target/release/spear-sandbox -t /out

FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/sms /out/spearlet /out/spear-sandbox /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sms"]

FROM node:22-bookworm-slim AS node
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv pipx ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 spear && useradd --uid 65532 --gid 65532 --home-dir /tmp --no-create-home spear
COPY --from=build /out/sms /out/spearlet /out/spear-sandbox /usr/local/bin/
USER 65532:65532
ENV HOME=/tmp
# tini reaps the MCP servers' own children.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/spearlet"]
