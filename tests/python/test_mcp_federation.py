"""Remote MCP servers federated behind one Tollgate key, against a server built
with the official Python SDK (`fixtures/mcp_sdk_remote.py`, its own process on
the loopback port the operator allows in `[components] allow_internal_origins`):

- added with a static bearer token, its tools show in `/v1/mcp` beside a
  component's (the calculator), a call is logged as a `tool_call` whose parent
  is the MCP request that carried it, and a key limited to one tool neither
  sees nor calls the others;
- when the server restarts (a new process: its sessions are gone), a client
  that kept its gateway session open calls on without noticing;
- added over the older HTTP+SSE transport (the same SDK server's `sse_app`),
  its tools are listed and called through the event stream the gateway holds
  open, and when the server restarts (the stream ends) the next call opens a
  new one;
- added with OAuth 2.1 client credentials against the authorization server
  in the same fixture process (authlib's client-credentials grant), the
  gateway fetches a token the SDK server's token verifier accepts, reuses it,
  and fetches another when the server (restarted with a new signing key)
  refuses it; the client secret is never shown, and a wrong one fails only
  that remote's calls, naming the OAuth error and nothing secret."""

import asyncio
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from test_mcp import cli

FIXTURE = Path(__file__).parent / "fixtures" / "mcp_sdk_remote.py"


def a2a(stack, method: str, params: dict, key: str | None = None) -> dict:
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {key or stack.api_key}"}
    answer = httpx.post(f"{stack.url}/a2a", headers=headers, timeout=30,
                        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
    assert "result" in answer, answer
    return answer["result"]


class Remote:
    """The SDK server as a process that can be restarted."""

    def __init__(self, port: int, *args: str) -> None:
        self.port, self.args, self.proc = port, list(args), None
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> "Remote":
        self.proc = subprocess.Popen([sys.executable, "-W", "ignore", str(FIXTURE), str(self.port), *self.args])
        deadline = time.time() + 30
        while time.time() < deadline:
            assert self.proc.poll() is None, f"the SDK server exited with {self.proc.returncode}"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise RuntimeError("the SDK server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def restart(self, *args: str) -> None:
        self.stop()
        self.args = list(args) or self.args
        self.start()


def mcp_rpc(stack, method: str, params: dict, key: str | None = None, path: str = "/v1/mcp") -> httpx.Response:
    return httpx.post(f"{stack.url}{path}", timeout=30,
                      headers={"Authorization": f"Bearer {key or stack.api_key}", "Accept": "application/json"},
                      json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def call_text(stack, name: str, arguments: dict, key: str | None = None) -> dict:
    answer = mcp_rpc(stack, "tools/call", {"name": name, "arguments": arguments}, key).json()
    assert "result" in answer, answer
    return answer["result"]


async def in_session(stack, action, key: str | None = None):
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {key or stack.api_key}"})
    async with streamable_http_client(f"{stack.url}/v1/mcp", http_client=client) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            return await action(session)


def text_of(result) -> str:
    return "".join(part.text for part in result.content if part.type == "text")


def tool_calls(stack, name: str, at_least: int) -> list[dict]:
    calls: list[dict] = []
    for _ in range(100):
        entries = a2a(stack, "usage/list", {"limit": 200})["entries"]
        calls = [e for e in entries if e["kind"] == "tool_call" and e["model"] == name]
        if len(calls) >= at_least:
            break
        time.sleep(0.05)
    return calls


@pytest.fixture(scope="module")
def calculator(stack):
    cli(stack, "install", "tollgate/calculator", "--name", "fedcalc")
    yield
    cli(stack, "uninstall", "fedcalc")


def test_an_sdk_server_with_a_static_token_is_federated_beside_a_component(stack, calculator):
    token = secrets.token_urlsafe(24)
    remote = Remote(stack.internal_port, "static", token).start()
    try:
        a2a(stack, "mcp_servers/create", {"name": "sdk", "url": f"{remote.url}/mcp",
                                          "auth": {"header": "Authorization", "value": f"Bearer {token}"}})

        async def listed_and_called(session):
            names = [tool.name for tool in (await session.list_tools()).tools]
            for name in ("sdk__add", "sdk__whoami", "fedcalc__evaluate"):
                assert name in names, names
            first = await session.call_tool("sdk__add", {"a": 2, "b": 3})
            assert first.is_error is False and text_of(first) == "5", first
            assert text_of(await session.call_tool("sdk__whoami", {})).startswith("client=static ")
            # The SDK server restarts: its sessions are gone. The gateway
            # initializes again; this client's session with it goes on.
            remote.restart()
            again = await session.call_tool("sdk__add", {"a": 4, "b": 5})
            assert again.is_error is False and text_of(again) == "9", again
            return text_of(await session.call_tool("fedcalc__evaluate", {"expression": "6*7"}))

        assert asyncio.run(in_session(stack, listed_and_called)) == "42"

        # A call is a tool_call in the request log, under the MCP request
        # that carried it (its x-request-id).
        response = mcp_rpc(stack, "tools/call", {"name": "sdk__add", "arguments": {"a": 20, "b": 22}})
        assert response.json()["result"]["content"][0]["text"] == "42", response.text
        carried = response.headers["x-request-id"]
        calls = tool_calls(stack, "sdk__add", 3)
        linked = [call for call in calls if call.get("parent_request_id") == carried]
        assert len(linked) == 1, calls
        assert linked[0]["status"] == 200 and linked[0]["request_id"] != carried, linked
        assert all(call["status"] == 200 for call in calls), calls

        # A key limited to one remote tool neither sees nor calls the others.
        limited = a2a(stack, "keys/create", {"name": "sdk-add-only", "tools": ["sdk__add"]})["api_key"]

        async def names(session):
            return [tool.name for tool in (await session.list_tools()).tools]

        assert asyncio.run(in_session(stack, names, limited)) == ["sdk__add"]
        assert call_text(stack, "sdk__add", {"a": 1, "b": 1}, limited)["content"][0]["text"] == "2"
        for other in ("sdk__whoami", "fedcalc__evaluate"):
            refused = mcp_rpc(stack, "tools/call", {"name": other, "arguments": {}}, limited).json()
            assert refused["error"]["code"] == -32602, refused
        assert mcp_rpc(stack, "tools/list", {}, limited, "/v1/mcp/fedcalc").status_code == 404
    finally:
        a2a(stack, "mcp_servers/delete", {"name": "sdk"})
        remote.stop()


def test_an_sdk_server_on_the_older_sse_transport_is_federated(stack, calculator):
    token = secrets.token_urlsafe(24)
    remote = Remote(stack.internal_port, "static", token).start()
    try:
        created = a2a(stack, "mcp_servers/create", {
            "name": "sdk-sse", "url": f"{remote.url}/legacy/sse", "transport": "sse",
            "auth": {"header": "Authorization", "value": f"Bearer {token}"}})
        assert created["transport"] == "sse", created

        async def listed(session):
            return [tool.name for tool in (await session.list_tools()).tools]

        tools = asyncio.run(in_session(stack, listed))
        assert "sdk-sse__add" in tools and "fedcalc__evaluate" in tools, tools
        assert call_text(stack, "sdk-sse__add", {"a": 2, "b": 3})["content"][0]["text"] == "5"
        who = call_text(stack, "sdk-sse__whoami", {})["content"][0]["text"]
        assert who.startswith("client=static "), who

        # The server restarts: the event stream (the session) ends, and the
        # next call opens another without the caller noticing.
        remote.restart()
        again = call_text(stack, "sdk-sse__add", {"a": 4, "b": 5})
        assert again["isError"] is False and again["content"][0]["text"] == "9", again
        calls = tool_calls(stack, "sdk-sse__add", 2)
        assert [call["status"] for call in calls] == [200, 200], calls

        # A wrong token fails that remote's calls only, as a tool error.
        a2a(stack, "mcp_servers/create", {
            "name": "sdk-sse-bad", "url": f"{remote.url}/legacy/sse", "transport": "sse",
            "auth": {"header": "Authorization", "value": "Bearer wrong"}})
        failed = call_text(stack, "sdk-sse-bad__add", {"a": 1, "b": 1})
        assert failed["isError"] is True and "401" in failed["content"][0]["text"], failed
    finally:
        for name in ("sdk-sse", "sdk-sse-bad"):
            httpx.post(f"{stack.url}/a2a", headers={"A2A-Version": "1.0", "Authorization": f"Bearer {stack.api_key}"},
                       json={"jsonrpc": "2.0", "id": 1, "method": "mcp_servers/delete", "params": {"name": name}})
        remote.stop()


def test_oauth_client_credentials_are_fetched_held_and_refreshed(stack, calculator):
    client_id, secret = "tollgate-gateway", secrets.token_urlsafe(24)
    remote = Remote(stack.internal_port, "oauth", secrets.token_hex(32), client_id, secret).start()
    token_url = f"{remote.url}/oauth/token"
    try:
        created = a2a(stack, "mcp_servers/create", {
            "name": "sdk-oauth", "url": f"{remote.url}/mcp",
            "auth": {"client_credentials": {"token_url": token_url, "client_id": client_id,
                                            "client_secret": secret, "scopes": ["tools"]}}})
        assert created["oauth"] == {"token_url": token_url, "client_id": client_id, "scopes": ["tools"]}
        listed = a2a(stack, "mcp_servers/list", {})
        audit = a2a(stack, "audit/list", {"limit": 20})
        for shown in (created, listed, audit):
            assert secret not in str(shown), "the client secret is shown"

        # The SDK server's token verifier accepted the gateway's token; the
        # next call reuses it.
        first = call_text(stack, "sdk-oauth__whoami", {})["content"][0]["text"]
        assert first.startswith(f"client={client_id} scopes=tools jti="), first
        assert call_text(stack, "sdk-oauth__whoami", {})["content"][0]["text"] == first

        async def names(session):
            return [tool.name for tool in (await session.list_tools()).tools]

        tools = asyncio.run(in_session(stack, names))
        assert "sdk-oauth__add" in tools and "fedcalc__evaluate" in tools, tools

        # Restarted with a new signing key: the held token is refused (401),
        # so the gateway fetches another, once, and opens a new session.
        remote.restart("oauth", secrets.token_hex(32), client_id, secret)
        after = call_text(stack, "sdk-oauth__whoami", {})
        assert after["isError"] is False, after
        assert after["content"][0]["text"] != first, "the refused token was used again"
        assert call_text(stack, "sdk-oauth__add", {"a": 2, "b": 2})["content"][0]["text"] == "4"

        # A wrong secret fails that remote's calls only, naming the OAuth
        # error and nothing secret; the good remote stays listed.
        wrong = secrets.token_urlsafe(24)
        a2a(stack, "mcp_servers/create", {
            "name": "sdk-wrong", "url": f"{remote.url}/mcp",
            "auth": {"client_credentials": {"token_url": token_url, "client_id": client_id,
                                            "client_secret": wrong}}})
        failed = call_text(stack, "sdk-wrong__add", {"a": 1, "b": 1})
        assert failed["isError"] is True, failed
        text = failed["content"][0]["text"]
        assert "invalid_client" in text and wrong not in text and secret not in text, text
        tools = asyncio.run(in_session(stack, names))
        assert "sdk-oauth__add" in tools and not any(t.startswith("sdk-wrong__") for t in tools), tools
        calls = tool_calls(stack, "sdk-oauth__whoami", 3)
        assert [call["status"] for call in calls] == [200, 200, 200], calls
    finally:
        for name in ("sdk-oauth", "sdk-wrong"):
            httpx.post(f"{stack.url}/a2a", headers={"A2A-Version": "1.0", "Authorization": f"Bearer {stack.api_key}"},
                       json={"jsonrpc": "2.0", "id": 1, "method": "mcp_servers/delete", "params": {"name": name}})
        remote.stop()
