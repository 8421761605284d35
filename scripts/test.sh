#!/usr/bin/env bash
# Runs every test of the workspace: unit tests, the store conformance suite
# against a real etcd, and the end-to-end tests that start the real `sms` and
# `spearlet` binaries. Installs what it needs first. Ends with one line:
# "tests: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/spear/target}"
# The cached target dir is shared by every clone that runs this; keep it
# bounded: no incremental state per clone path, no test or bench
# executables of earlier runs (each clone links its own under a hash of its
# path, and the old ones filled the disk: cargo links them again when
# needed), and no build of this workspace's own crates from a clone of
# more than a day ago (a new clone builds its own). Dependencies stay.
export CARGO_INCREMENTAL=0
if [ -d "$CARGO_TARGET_DIR" ]; then
  find "$CARGO_TARGET_DIR"/*/deps -maxdepth 1 -type f -executable ! -name '*.so' -delete 2>/dev/null || true
  find "$CARGO_TARGET_DIR"/*/deps -maxdepth 1 -type f \( -name 'libspear*' -o -name 'spear*' \) -mtime +1 -delete 2>/dev/null || true
  rm -rf "$CARGO_TARGET_DIR"/*/incremental
fi
scripts/setup.sh
cargo build --workspace --bins
# The docs are the map of each crate: no broken or private links.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# The example guests, built from source for wasm32-wasip1, run by the end-to-end tests (tests/tests/guests*.rs and others).
cargo build --target wasm32-wasip1 -p spear-guest --examples

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
counts=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
             END { printf "%d passed, %d failed", p, f }' "$log")
echo
echo "tests: $counts"
exit "$status"
