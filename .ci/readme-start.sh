#!/usr/bin/env bash
# The README's start command on a machine where rustup installs nothing by
# itself (RUSTUP_AUTO_INSTALL=0) and the wasm32-wasip2 target is missing: it
# must set up what it needs, start the demo, and answer a chat with the key
# it prints. Run by .ci/run before the test command; the build it makes is
# the one the tests reuse.
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(grep -m1 '# start:' README.md | sed 's/ *#.*$//')
if [[ "$start" != cargo\ run* ]]; then
  echo "readme-start: no 'cargo run … # start:' line in README.md" >&2
  exit 1
fi
echo "== README start command, wasm target removed, RUSTUP_AUTO_INSTALL=0: $start"
rustup target remove wasm32-wasip2 >/dev/null 2>&1 || true
if rustup target list --installed | grep -qx wasm32-wasip2; then
  echo "readme-start: could not remove the wasm32-wasip2 target; this check would prove nothing" >&2
  exit 1
fi

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log="$work/start.log"
RUSTUP_AUTO_INSTALL=0 setsid bash -c "$start --listen 127.0.0.1:$port --data-dir '$work/data'" >"$log" 2>&1 &
group=$!
stop() { kill -TERM -- "-$group" 2>/dev/null || true; }
trap stop EXIT

# The first build takes minutes; the gateway prints its key once it listens.
deadline=$((SECONDS + 2400))
until key=$(grep -o 'tg_live_[A-Za-z0-9]*' "$log" | head -1) && [ -n "$key" ] \
    && curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
  if ! kill -0 "$group" 2>/dev/null; then
    tail -40 "$log" >&2
    echo "readme-start: the start command exited before serving" >&2
    exit 1
  fi
  if [ $SECONDS -ge $deadline ]; then
    tail -40 "$log" >&2
    echo "readme-start: not serving after 40 minutes" >&2
    exit 1
  fi
  sleep 2
done
answer=$(curl -fsS "http://127.0.0.1:$port/v1/chat/completions" \
  -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
  -d '{"model":"demo/small","messages":[{"role":"user","content":"hello"}]}')
echo "$answer" | python3 -c 'import json, sys; a = json.load(sys.stdin); assert a["choices"][0]["message"]["content"] and "cost" in a["usage"], a; print("readme-start: the demo answered, cost", a["usage"]["cost"])'
# The build put the target back itself (rustup was told to install nothing).
grep -m1 'wasm32-wasip2 target is missing' "$log" || echo "readme-start: (the target was added by another build meanwhile)"
rustup target list --installed | grep -qx wasm32-wasip2
