#!/usr/bin/env bash
# The main job: a local SMS serving examples/mcp.d and one spearlet syncing
# from it. Shows the node's registry, drops a new server file into the
# directory, and shows the node picking it up, without any restart.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/spear/target}"
scripts/setup.sh
cargo build --quiet --bins
BIN="$CARGO_TARGET_DIR/debug"

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# A copy of the examples, so dropping a file in does not touch the repository.
mkdir -p "$work/mcp.d"
cp examples/mcp.d/*.json "$work/mcp.d/"

echo "== sms validate $work/mcp.d"
"$BIN/sms" validate "$work/mcp.d"

"$BIN/sms" serve --mcp-dir "$work/mcp.d" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --ready-file "$work/sms.ready" 2>"$work/sms.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/sms.ready" ] && break; sleep 0.1; done
SMS=$(sed -E 's/.*"grpc":"([^"]+)".*/\1/' "$work/sms.ready")
echo "== SMS listening on $SMS"

"$BIN/spearlet" run --sms "$SMS" --state-dir "$work/node" --node-id demo-node \
  --metrics-listen 127.0.0.1:0 2>"$work/spearlet.log" &
pids+=($!)

wait_for() { # wait_for <id>: until the node's persisted registry lists <id>
  for _ in $(seq 100); do
    "$BIN/spearlet" registry --state-dir "$work/node" 2>/dev/null | grep -q "^$1 " && return 0
    sleep 0.1
  done
  echo "the node never showed $1; logs:" >&2; cat "$work/sms.log" "$work/spearlet.log" >&2; exit 1
}
wait_for everything
echo
echo "== the node's registry"
"$BIN/spearlet" registry --state-dir "$work/node"

echo
echo "== dropping time.json into the directory"
cat > "$work/mcp.d/time.json" <<'JSON'
{
  "id": "time",
  "description": "Current time and time zone conversions",
  "command": "uvx",
  "args": ["mcp-server-time"]
}
JSON
wait_for time
echo "== the node's registry, a moment later"
"$BIN/spearlet" registry --state-dir "$work/node"

echo
echo "== sms status"
"$BIN/sms" status --addr "$SMS"
