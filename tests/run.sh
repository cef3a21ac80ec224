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

echo "== chromium for the console's browser tests (Debian's package; Playwright uses it, downloads none)"
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q chromium
fi

echo "== coding agents (pinned in tests/agents: Claude Code and Codex, for tests/python/test_coding_agents.py)"
# npm ci installs exactly the lockfile; a stamp of the lockfile's hash skips it
# when node_modules already matches, so later runs need no registry.
if command -v npm >/dev/null 2>&1; then
  agents="$root/tests/agents"
  stamp="$agents/node_modules/.installed-lock.sha256"
  want=$(sha256sum "$agents/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    if (cd "$agents" && npm ci --no-audit --no-fund --loglevel=error); then
      echo "$want" >"$stamp"
    else
      echo "npm ci failed in tests/agents: the coding-agent tests will be skipped" >&2
    fi
  fi
else
  echo "npm not found: the coding-agent tests will be skipped" >&2
fi

echo "== build (host + wasm plugins)"
# The A2A kit's scripted mode is a test double: built for the tests only.
features="--features tollgate/a2a-conformance"
cargo build --locked -p tollgate -p tollgate-mock-upstream $features

echo "== rust tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --locked --workspace $features --exclude tollgate-bench --exclude tollgate-test-misbehaving --exclude tollgate-test-hostile-tool --exclude tollgate-test-tool-caller --no-fail-fast
else
  cargo test --locked --workspace $features --exclude tollgate-bench --exclude tollgate-test-misbehaving --exclude tollgate-test-hostile-tool --exclude tollgate-test-tool-caller --no-fail-fast
fi

echo "== python client tests (with the A2A TCK at MUST level when ../shared/conformance/a2a-tck exists)"
# -rs prints why a test was skipped (e.g. the TCK is absent).
TOLLGATE_BIN="$root/target/debug/tollgate" "$venv/bin/python" -m pytest -q -rs tests/python
