#!/usr/bin/env bash
# The MCP conformance suite's client under test (tests/tests/conformance.rs):
# `spearlet mcp`, run as an operator would run it. The suite appends the
# server's URL and names the scenario in MCP_CONFORMANCE_SCENARIO.
set -euo pipefail
url="${@: -1}"
spearlet="${SPEARLET_BIN:?SPEARLET_BIN names the spearlet binary}"
scenario="${MCP_CONFORMANCE_SCENARIO:-}"

case "$scenario" in
  initialize)
    exec "$spearlet" mcp list-tools --url "$url" ;;
  tools_call)
    exec "$spearlet" mcp call --url "$url" --tool add_numbers --args '{"a": 2, "b": 3}' ;;
  elicitation-sep1034-client-defaults)
    exec "$spearlet" mcp call --url "$url" --tool test_client_elicitation_defaults \
      --elicitation accept-defaults ;;
  sse-retry)
    exec "$spearlet" mcp call --url "$url" --tool test_reconnection ;;
  *)
    echo "client.sh: no command for scenario '$scenario'" >&2
    exit 2 ;;
esac
