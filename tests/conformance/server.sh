#!/usr/bin/env bash
# The MCP conformance suite's server under test: Spear's own fixtures
# (tests/conformance/fixture_server.py, protocol 2025-11-25, and
# fixture_server_2026.py, 2026-07-28: stdio servers in their sandboxes)
# behind virtual server `conf`, served by `spearlet mcp serve` as a user
# runs it on one machine. Prints the endpoint URL as its first line, then
# serves until stopped (SIGTERM or Ctrl-C).
#
#   tests/conformance/server.sh [PORT]       # default: any free port
#
# The suite calls the fixture's tools and prompts by their own names, so
# `conf` aliases each one to it (the fixture's server id would otherwise
# prefix them, as `fixture__test_simple_text`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
spearlet="${SPEARLET_BIN:-spearlet}"
python="${SPEAR_VENV:-$HOME/.cache/spear/venv}/bin/python"
python2="${SPEAR_VENV2:-$HOME/.cache/spear/venv-mcp2}/bin/python"
port="${1:-0}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

cat >"$dir/fixture.json" <<JSON
{"id": "fixture", "command": "$python", "args": ["$here/fixture_server.py"]}
JSON
cat >"$dir/fixture2026.json" <<JSON
{"id": "fixture2026", "command": "$python2", "args": ["$here/fixture_server_2026.py"]}
JSON
"$python" - "$dir/conf.json" <<'PY'
import json, sys
tools = ["test_simple_text", "test_image_content", "test_audio_content",
         "test_embedded_resource", "test_multiple_content_types",
         "test_tool_with_logging", "test_tool_with_progress", "test_error_handling",
         "test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults",
         "test_elicitation_sep1330_enums", "test_trigger_tool_change",
         "test_trigger_prompt_change", "test_logging_tool", "test_streaming_elicitation",
         # prompts: an offer's aliases name its prompts as they name its tools
         "test_simple_prompt", "test_prompt_with_arguments",
         "test_prompt_with_embedded_resource", "test_prompt_with_image"]
# The second fixture's tools ask for input the 2026-07-28 way.
asking = ["test_input_required_result_" + t for t in (
    "elicitation", "sampling", "list_roots", "request_state", "multiple_inputs",
    "multi_round", "tampered_state", "capabilities")] + [
    "test_missing_capability", "test_input_required_result_prompt"]
conf = {"virtual_server": "conf",
        "description": "The conformance suite's fixture",
        "offers": [{"server": "fixture", "aliases": {t: t for t in tools}},
                   {"server": "fixture2026", "aliases": {t: t for t in asking}}]}
json.dump(conf, open(sys.argv[1], "w"))
PY
"$spearlet" mcp serve --mcp-dir "$dir" --virtual-server conf --listen "127.0.0.1:$port" &
served=$!
trap 'kill -TERM $served 2>/dev/null; wait $served 2>/dev/null; rm -rf "$dir"' EXIT TERM INT
wait $served
