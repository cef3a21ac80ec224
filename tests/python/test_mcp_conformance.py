"""The official MCP conformance suite (`@modelcontextprotocol/conformance`,
pinned in tests/agents with the Node.js 22 it needs), unmodified, runs every
server scenario against `/v1/mcp/{install}`.

The suite sends no credentials, so it talks to the gateway through a small
local proxy that adds the workspace's API key (the same one the A2A TCK test
uses). The scenarios that do not pass yet are listed in
`tests/python/mcp_conformance_baseline.yml`, the suite's own baseline format:
the suite fails on any scenario that fails and is not listed, and on any
listed scenario that now passes, so the list can only shrink and stays true.
docs/mcp.md says why each listed scenario fails today."""

import http.server
import json
import os
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import BIN
from test_a2a_tck import KeyAddingProxy

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "tests" / "agents" / "node_modules"
NODE = AGENTS / ".bin" / "node"
SUITE = AGENTS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = Path(__file__).with_name("mcp_conformance_baseline.yml")

pytestmark = pytest.mark.skipif(
    not (NODE.exists() and SUITE.exists()),
    reason="the MCP conformance suite is not installed: run `npm ci` in tests/agents (tests/run.sh does)",
)


def cli(stack, *args: str) -> dict:
    env = {**os.environ, "TOLLGATE_URL": stack.url, "TOLLGATE_API_KEY": stack.api_key}
    out = subprocess.run([BIN, *args, "--json"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"tollgate {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def proxied(stack):
    """The gateway behind a key-adding proxy on loopback; yields its base URL."""
    gateway = urlparse(stack.url)
    # The client's Host goes through: the DNS-rebinding scenario sends a
    # foreign one, and the gateway (on loopback) must refuse it.
    handler = type(
        "Proxy",
        (KeyAddingProxy,),
        {"upstream": (gateway.hostname, gateway.port), "api_key": stack.api_key, "keep_host": True},
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://localhost:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def conformance_install(stack):
    installed = cli(stack, "install", "tollgate/calculator", "--name", "conformance")
    yield installed["name"]
    subprocess.run(
        [BIN, "uninstall", "conformance", "--url", stack.url, "--api-key", stack.api_key], capture_output=True
    )


def test_every_server_scenario_passes_or_is_a_listed_exception(proxied, conformance_install, tmp_path):
    url = f"{proxied}/v1/mcp/{conformance_install}"
    run = subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", url, "--suite", "all", "--expected-failures", str(BASELINE)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = run.stdout[-20000:] + run.stderr[-5000:]
    assert run.returncode == 0, f"the MCP conformance suite found unexpected results:\n{report}"
