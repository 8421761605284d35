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
  request-metadata|json-schema-ref-no-deref)
    exec "$spearlet" mcp list-tools --url "$url" ;;
  sep-2322-client-request-state)
    # Each tool once, as an operator would try them; the server asks for
    # input part-way through two of them.
    for tool in test_mrtr_echo_state test_mrtr_unrelated test_mrtr_no_state test_mrtr_no_result_type; do
      "$spearlet" mcp call --url "$url" --tool "$tool" --elicitation accept-defaults
    done ;;
  http-standard-headers)
    for tool in test_headers my-hyphenated-tool; do
      "$spearlet" mcp call --url "$url" --tool "$tool"
    done ;;
  http-custom-headers)
    # The calls the suite asks for, from MCP_CONFORMANCE_CONTEXT.
    python3 -c 'import json, os
for call in json.loads(os.environ["MCP_CONFORMANCE_CONTEXT"])["toolCalls"]:
    print(call["name"]); print(json.dumps(call["arguments"]))' |
    while read -r tool && read -r args; do
      "$spearlet" mcp call --url "$url" --tool "$tool" --args "$args"
    done ;;
  http-invalid-tool-headers)
    # The node keeps the valid tool and refuses the others by name.
    "$spearlet" mcp call --url "$url" --tool valid_tool --args '{"region": "us-west1"}'
    for tool in invalid_empty_header invalid_object_header invalid_number_header invalid_space_in_name; do
      if "$spearlet" mcp call --url "$url" --tool "$tool" --args '{}'; then
        echo "client.sh: $tool was called" >&2; exit 1
      fi
    done ;;
  json-schema-2020-12-preservation)
    # The focal tool's input schema as the node holds it, echoed back.
    schema="$("$spearlet" mcp list-tools --url "$url" --json | python3 -c 'import json, sys
tools = json.load(sys.stdin)["tools"]
print(json.dumps(next(t for t in tools if t["name"] == "json_schema_2020_12_tool")["inputSchema"]))')"
    exec "$spearlet" mcp call --url "$url" --tool json_schema_echo --args "{\"schema\": $schema}" ;;
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
      auth/wif-jwt-bearer)
        # The workload's JWT, as its platform would hand it over.
        # (WIF_ASSERTION names another of the suite's JWTs, to see a refusal.)
        export CONFORMANCE_WIF_JWT="$(context "${WIF_ASSERTION:-valid_jwt}")"
        login+=(--client-id "$(context client_id)" --assertion '${CONFORMANCE_WIF_JWT}') ;;
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
