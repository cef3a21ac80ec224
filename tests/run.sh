#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs (the wasm
# target, a Python venv with pinned clients), builds everything once, and runs
# the Rust unit + integration tests and the Python client tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

echo "== toolchain"
rustup target add wasm32-wasip2

echo "== python venv (pinned clients; Rust tests use moto from it too)"
venv="$root/target/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/python/requirements.txt

echo "== build (host + wasm plugins)"
cargo build --locked -p tollgate

echo "== rust tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --locked --workspace --exclude tollgate-bench --exclude tollgate-test-misbehaving --no-fail-fast
else
  cargo test --locked --workspace --exclude tollgate-bench --exclude tollgate-test-misbehaving --no-fail-fast
fi

echo "== python client tests"
TOLLGATE_BIN="$root/target/debug/tollgate" "$venv/bin/python" -m pytest -q tests/python
