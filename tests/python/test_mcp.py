"""Tool servers over MCP with the official `mcp` SDK: after `tollgate install
tollgate/calculator`, the SDK lists `calculator__evaluate` at /v1/mcp with a
Tollgate key and gets 14 for 2*(3+4); a bad expression is a tool error
(isError), not a transport failure; a missing or revoked key gets 401; an
uninstall removes the tools at once."""

import asyncio
import json
import os
import subprocess

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BIN


def cli(stack, *args: str, key: str | None = None) -> dict:
    env = {**os.environ, "TOLLGATE_URL": stack.url, "TOLLGATE_API_KEY": key or stack.api_key}
    out = subprocess.run([BIN, *args, "--json"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"tollgate {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return json.loads(out.stdout)


async def with_session(url: str, key: str, action):
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with streamable_http_client(url, http_client=client) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await action(session)


def text_of(result) -> str:
    return "".join(part.text for part in result.content if part.type == "text")


@pytest.fixture(scope="module")
def calculator(stack):
    installed = cli(stack, "install", "tollgate/calculator", "--name", "calc")
    assert installed["kind"] == "tool-server"
    assert installed["tools"] == ["calc__evaluate"]
    yield installed
    subprocess.run([BIN, "uninstall", "calc", "--url", stack.url, "--api-key", stack.api_key], capture_output=True)


def test_the_mcp_sdk_lists_and_calls_the_calculator(stack, calculator):
    async def run(session):
        tools = await session.list_tools()
        names = [tool.name for tool in tools.tools]
        assert "calc__evaluate" in names, names
        evaluate = next(tool for tool in tools.tools if tool.name == "calc__evaluate")
        assert evaluate.input_schema["required"] == ["expression"]
        assert evaluate.annotations.read_only_hint is True

        answer = await session.call_tool("calc__evaluate", {"expression": "2*(3+4)"})
        assert answer.is_error is False
        assert text_of(answer) == "14"

        exact = await session.call_tool("calc__evaluate", {"expression": "0.1 + 0.2"})
        assert text_of(exact) == "0.3"

        bad = await session.call_tool("calc__evaluate", {"expression": "2 +* 3"})
        assert bad.is_error is True
        assert "expected a number" in text_of(bad)
        return True

    assert asyncio.run(with_session(f"{stack.url}/v1/mcp", stack.api_key, run))


def test_one_install_is_served_with_plain_tool_names(stack, calculator):
    async def run(session):
        tools = await session.list_tools()
        assert [tool.name for tool in tools.tools] == ["evaluate"]
        answer = await session.call_tool("evaluate", {"expression": "6*7"})
        return text_of(answer)

    assert asyncio.run(with_session(f"{stack.url}/v1/mcp/calc", stack.api_key, run)) == "42"


def test_missing_and_revoked_keys_get_401(stack, calculator):
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(f"{stack.url}/v1/mcp", json=initialize, headers=headers)
    assert missing.status_code == 401
    assert missing.json()["error"]["type"] == "authentication_error" or missing.json()["error"]["code"]

    created = cli(stack, "keys", "create", "--name", "mcp-revoked")
    secret, key_id = created["api_key"], created["key_id"]
    ok = httpx.post(f"{stack.url}/v1/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {secret}"})
    assert ok.status_code == 200, ok.text
    assert ok.json()["result"]["serverInfo"]["name"] == "tollgate"
    cli(stack, "keys", "revoke", key_id)
    revoked = httpx.post(f"{stack.url}/v1/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {secret}"})
    assert revoked.status_code == 401


def test_uninstall_removes_the_tools_at_once(stack):
    cli(stack, "install", "tollgate/calculator", "--name", "gone")

    async def names(session):
        return [tool.name for tool in (await session.list_tools()).tools]

    assert "gone__evaluate" in asyncio.run(with_session(f"{stack.url}/v1/mcp", stack.api_key, names))
    assert cli(stack, "uninstall", "gone")["deleted"] is True
    assert "gone__evaluate" not in asyncio.run(with_session(f"{stack.url}/v1/mcp", stack.api_key, names))
    installs = cli(stack, "installs")["installs"]
    assert "gone" not in [install["name"] for install in installs]
