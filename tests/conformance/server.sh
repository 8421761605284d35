#!/usr/bin/env bash
# The MCP conformance suite's server under test: Spear's own fixture
# (tests/conformance/fixture_server.py, a stdio server in its sandbox)
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
port="${1:-0}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

cat >"$dir/fixture.json" <<JSON
{"id": "fixture", "command": "$python", "args": ["$here/fixture_server.py"]}
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
conf = {"virtual_server": "conf",
        "description": "The conformance suite's fixture",
        "offers": [{"server": "fixture", "aliases": {t: t for t in tools}}]}
json.dump(conf, open(sys.argv[1], "w"))
PY
"$spearlet" mcp serve --mcp-dir "$dir" --virtual-server conf --listen "127.0.0.1:$port" &
served=$!
trap 'kill -TERM $served 2>/dev/null; wait $served 2>/dev/null; rm -rf "$dir"' EXIT TERM INT
wait $served
