"""The official MCP conformance suite (`@modelcontextprotocol/conformance`,
pinned in tests/agents with the Node.js 22 it needs), unmodified, runs every
server scenario against `/v1/mcp/{install}`, where the install is a tool
server built in the test from `fixtures/mcp_conformance_tools.rs` (written
against tool WIT 0.3.0, built on the newest version `tollgate plugin new`
scaffolds) with the tools, prompts and resources the scenarios use, and the
questions (elicitation) its tools ask.

The suite sends no credentials, so it talks to the gateway through a small
local proxy that adds the workspace's API key (the same one the A2A TCK test
uses). The scenarios that do not pass yet are listed in
`tests/python/mcp_conformance_baseline.yml`, the suite's own baseline format:
the suite fails on any scenario that fails and is not listed, and on any
listed scenario that now passes, so the list can only shrink and stays true.
docs/mcp.md says why each listed scenario is unsupported."""

import http.server
import json
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from conftest import BIN, ROOT
from test_a2a_tck import KeyAddingProxy
from test_component_guides import publisher, scaffold_build_publish

AGENTS = ROOT / "tests" / "agents" / "node_modules"
NODE = AGENTS / ".bin" / "node"
SUITE = AGENTS / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = Path(__file__).with_name("mcp_conformance_baseline.yml")
FIXTURE = Path(__file__).parent / "fixtures" / "mcp_conformance_tools.rs"

pytestmark = pytest.mark.skipif(
    not (NODE.exists() and SUITE.exists()),
    reason="the MCP conformance suite is not installed: run `npm ci` in tests/agents (tests/run.sh does)",
)


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
    """The suite's fixture tools (`fixtures/mcp_conformance_tools.rs`) as a
    tool server: scaffolded with `tollgate plugin new`, built to wasm,
    published and installed, as docs/writing-a-tool-server.md does it."""
    env, namespace = publisher(stack, "conformance")
    with tempfile.TemporaryDirectory() as workdir:
        scaffold_build_publish(
            env, namespace, Path(workdir), "mcp-fixture", "tool-server", FIXTURE, "--name", "conformance"
        )
    yield "conformance"
    subprocess.run([BIN, "uninstall", "conformance"], env=env, capture_output=True)


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


def test_tool_log_lines_stream_as_notifications_above_the_sessions_level(stack, conformance_install):
    """A call that logs answers as SSE: the lines first, as
    notifications/message, then the result. A session whose level is above
    the lines gets them filtered out, and then a plain JSON answer."""
    url = f"{stack.url}/v1/mcp/{conformance_install}"
    headers = {"Authorization": f"Bearer {stack.api_key}", "Accept": "application/json, text/event-stream"}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "test_tool_with_logging"}}

    answer = httpx.post(url, headers=headers, json=call)
    assert answer.headers["content-type"] == "text/event-stream"
    events = [json.loads(line[len("data: "):]) for line in answer.text.splitlines() if line.startswith("data: ")]
    assert [e["params"]["data"] for e in events[:-1]] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert all(e["method"] == "notifications/message" and e["params"]["level"] == "info" for e in events[:-1])
    assert events[-1]["id"] == 7 and events[-1]["result"]["isError"] is False

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": {"name": "test", "version": "1"}}}
    session = httpx.post(url, headers=headers, json=initialize).headers["mcp-session-id"]
    in_session = {**headers, "Mcp-Session-Id": session}
    level = {"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "warning"}}
    assert httpx.post(url, headers=in_session, json=level).json()["result"] == {}
    answer = httpx.post(url, headers=in_session, json=call)
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["result"]["content"][0]["text"] == "Tool with logging executed successfully"
