#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, the store conformance suite
# against a real etcd, and the end-to-end tests that start the real `sms` and
# `spearlet` binaries. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/spear/target}"
scripts/setup.sh
cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
