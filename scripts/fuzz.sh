#!/usr/bin/env bash
# Runs each cargo-fuzz target for a short bounded time (FUZZ_SECONDS, 20 by
# default). A crash fails the script and leaves the input under
# fuzz/artifacts/. Installs cargo-fuzz first if it is missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${FUZZ_SECONDS:-20}"
target_dir="${FUZZ_TARGET_DIR:-$HOME/.cache/spear/fuzz-target}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
# cargo-fuzz needs nightly-only flags; this allows them on stable.
export RUSTC_BOOTSTRAP=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in $(cargo fuzz list); do
    echo "fuzz: $target for ${seconds}s"
    if ! cargo fuzz run --target-dir "$target_dir" "$target" -- \
        -max_total_time="$seconds" >"$log" 2>&1; then
        # The build error or the crash and its input, in full.
        cat "$log"
        echo "fuzz: $target failed"
        exit 1
    fi
    grep -E '^Done [0-9]+ runs' "$log" || tail -n 1 "$log"
done
