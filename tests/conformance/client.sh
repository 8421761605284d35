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
  auth/*)
    # The suite's authorization servers redirect straight back, so the
    # "browser" is curl following that redirect to spearlet's loopback
    # listener. Pre-registered credentials come in MCP_CONFORMANCE_CONTEXT;
    # secrets reach spearlet as ${REFERENCES}, as an operator gives them.
    context() {
      python3 -c 'import json, os, sys
print(json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}").get(sys.argv[1]) or "")' "$1"
    }
    export CONFORMANCE_CLIENT_SECRET="$(context client_secret)"
    export CONFORMANCE_PRIVATE_KEY="$(context private_key_pem)"
    login=(--browser "curl -sS -o /dev/null -L")
    case "$scenario" in
      auth/pre-registration)
        login+=(--client-id "$(context client_id)" --client-secret '${CONFORMANCE_CLIENT_SECRET}') ;;
      auth/client-credentials-basic)
        login+=(--client-credentials --client-id "$(context client_id)"
                --client-secret '${CONFORMANCE_CLIENT_SECRET}') ;;
      auth/cross-app-access-complete-flow|auth/enterprise-managed-authorization)
        export CONFORMANCE_ID_TOKEN="$(context idp_id_token)"
        login+=(--client-id "$(context client_id)" --client-secret '${CONFORMANCE_CLIENT_SECRET}'
                --id-token '${CONFORMANCE_ID_TOKEN}' --idp-issuer "$(context idp_issuer)"
                --idp-token-endpoint "$(context idp_token_endpoint)"
                --idp-client-id "$(context idp_client_id)") ;;
      auth/client-credentials-jwt)
        login+=(--client-credentials --client-id "$(context client_id)"
                --private-key '${CONFORMANCE_PRIVATE_KEY}'
                --signing-algorithm "$(context signing_algorithm)") ;;
      *)
        # The Client ID Metadata Document the suite's servers expect.
        login+=(--oauth --client-metadata-url https://conformance-test.local/client-metadata.json) ;;
    esac
    exec "$spearlet" mcp call --url "$url" "${login[@]}" --tool test-tool ;;
  *)
    echo "client.sh: no command for scenario '$scenario'" >&2
    exit 2 ;;
esac
