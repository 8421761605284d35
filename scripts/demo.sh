#!/usr/bin/env bash
# The main job: a local SMS serving a directory of MCP server files, one
# spearlet syncing from it, and the fs-agent example guest registered as a
# task and invoked through SMS. The agent answers a question with the real
# filesystem MCP server.
#
#   scripts/demo.sh [--lang rust|python|js|c]
#
# The fs-agent of that language's SDK: Rust (sdk-guest, for wasm32-wasip1;
# the default), Python or JavaScript (components, sdk-guest/python and
# sdk-guest/js), or C (sdk-guest/c), the last three built with `spearlet
# guest build` after scripts/setup.sh installs their toolchain.
#
# The model: the OpenAI-compatible endpoint in OPENAI_BASE_URL (with
# OPENAI_API_KEY and OPENAI_MODEL when set); without one, an offline replay
# of a recorded conversation (examples/replay/fs-agent.json), which says so.
set -euo pipefail
cd "$(dirname "$0")/.."
lang=rust
if [ "${1:-}" = "--lang" ]; then lang="${2:-}"; fi
case "$lang" in
  rust) source_file="" ;;
  python) source_file=sdk-guest/python/examples/fs_agent.py ;;
  js) source_file=sdk-guest/js/examples/fs_agent.js ;;
  c) source_file=sdk-guest/c/examples/fs_agent.c ;;
  *) echo "demo: --lang takes rust, python, js or c" >&2; exit 2 ;;
esac
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/spear/target}"
scripts/setup.sh --demo
scripts/setup.sh --guest "$lang"
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
fail() { echo "$1; logs:" >&2; cat "$work"/*.log >&2; exit 1; }
wait_file() { for _ in $(seq 150); do [ -s "$1" ] && return 0; sleep 0.1; done; fail "$2 did not start"; }

if [ "$lang" = rust ]; then
  cargo build --quiet --target wasm32-wasip1 -p spear-guest --examples
  GUEST="$CARGO_TARGET_DIR/wasm32-wasip1/debug/examples/fs-agent.wasm"
else
  mkdir -p "$work/guests"
  GUEST="$work/guests/fs-agent.wasm"
  echo "== spearlet guest build $source_file -o fs-agent.wasm"
  "$BIN/spearlet" guest build "$source_file" -o "$GUEST"
fi

# The files the agent may read, and the server file that exposes them.
mkdir -p "$work/files" "$work/mcp.d"
echo "Spear demo notes: the quarterly review moved to Thursday 14:00, room Blue." > "$work/files/notes.txt"
cat > "$work/mcp.d/filesystem.json" <<JSON
{
  "mcpServers": {
    "fs": {
      "command": "${SPEAR_NPM_DIR:-$HOME/.cache/spear/npm}/node_modules/.bin/mcp-server-filesystem",
      "args": ["$work/files"],
      "allowed_tools": ["read_*", "list_*"]
    }
  }
}
JSON
echo "== sms validate"
"$BIN/sms" validate "$work/mcp.d"

"$BIN/sms" serve --mcp-dir "$work/mcp.d" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --ready-file "$work/sms.ready" 2>"$work/sms.log" &
pids+=($!)
wait_file "$work/sms.ready" "SMS"
SMS=$(sed -E 's/.*"grpc":"([^"]+)".*/\1/' "$work/sms.ready")
echo "== SMS listening on $SMS"

# The node's model backend.
if [ -n "${OPENAI_BASE_URL:-}" ]; then
  key_line=""
  [ -n "${OPENAI_API_KEY:-}" ] && key_line='api_key_env = "OPENAI_API_KEY"'
  cat > "$work/node.toml" <<TOML
[llm.backends.openai]
kind = "openai"
base_url = "$OPENAI_BASE_URL"
model = "${OPENAI_MODEL:-gpt-4o-mini}"
$key_line
TOML
  echo "== model: ${OPENAI_MODEL:-gpt-4o-mini} at $OPENAI_BASE_URL"
else
  SPEAR_DEMO_FILES="$work/files" "$BIN/replay-llm" --recording examples/replay/fs-agent.json \
    --ready-file "$work/model.ready" 2>"$work/model.log" &
  pids+=($!)
  wait_file "$work/model.ready" "replay-llm"
  cat > "$work/node.toml" <<TOML
[llm.backends.replay]
kind = "openai"
base_url = "$(cat "$work/model.ready")"
model = "recorded"
TOML
  echo "== model: OFFLINE REPLAY of a recorded conversation (examples/replay/fs-agent.json)."
  echo "   No OPENAI_BASE_URL is set, so the model's words are recorded; the MCP tool call and"
  echo "   its result are real. Set OPENAI_BASE_URL (and OPENAI_API_KEY, OPENAI_MODEL) for a live model."
fi

# The node's policy: modules only from where the example guests are
# built. A component carries its language's runtime: its first compile
# (kept after) takes longer than a Rust module's.
cat >> "$work/node.toml" <<TOML

[guests]
compile_timeout_ms = 600000

[policy]
modules = ["file://$(dirname "$(realpath "$GUEST")")/"]
TOML

"$BIN/spearlet" run --sms "$SMS" --state-dir "$work/node" --node-id demo-node \
  --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --config "$work/node.toml" 2>"$work/spearlet.log" &
pids+=($!)

# SMS routes invocations once the node's heartbeat brought its address.
for _ in $(seq 150); do
  "$BIN/sms" status --addr "$SMS" --json 2>/dev/null | grep -q '"invoke_addr": "[0-9]' && break
  sleep 0.1
done
for _ in $(seq 100); do
  "$BIN/spearlet" registry --state-dir "$work/node" 2>/dev/null | grep -q "^fs " && break
  sleep 0.1
done
echo
echo "== sms status"
"$BIN/sms" status --addr "$SMS"
echo
echo "== the node's registry"
"$BIN/spearlet" registry --state-dir "$work/node"

cat > "$work/task.json" <<'JSON'
{"mcp": {"enabled": true, "allowed_server_ids": ["fs"], "default_server_ids": ["fs"]},
 "limits": {"wall_ms": 600000}}
JSON
echo
echo "== sms tasks register --id fs-agent --module fs-agent.wasm --config task.json"
"$BIN/sms" tasks register --addr "$SMS" --id fs-agent --module "$GUEST" --config "$work/task.json" \
  --description "answers questions from the files it can read"
"$BIN/sms" tasks list --addr "$SMS"

echo
echo "== sms invoke fs-agent --input \"What does $work/files/notes.txt say?\""
"$BIN/sms" invoke --addr "$SMS" fs-agent --input "What does $work/files/notes.txt say?" \
  || fail "the task failed"
