#!/usr/bin/env bash
# Installs what Spear's build, demo and tests need on a fresh Debian machine:
# protoc (for the gRPC code), etcd (for the etcd store tests) and the wasm
# target. Safe to run again: it installs only what is missing.
set -euo pipefail

missing=()
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
  rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1 >&2
fi
