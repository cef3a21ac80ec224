"""Tool-server installs through the official A2A client (`a2a-sdk`): publish a
tool server with `packages.publish` (content inline), install it, list it,
upgrade it while MCP calls run at 50 per second (none fails), and uninstall it
(its tools leave MCP at once)."""

import asyncio
import base64
import hashlib
import threading
import time
import uuid

import httpx
from a2a.types import TaskState
from google.protobuf import json_format

from test_a2a import artifact_data, client_for, send


def mcp_call(stack, method: str, params: dict) -> dict:
    response = httpx.post(
        f"{stack.url}/v1/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"Authorization": f"Bearer {stack.api_key}", "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()


def tool_names(stack) -> list[str]:
    return [tool["name"] for tool in mcp_call(stack, "tools/list", {})["result"]["tools"]]


def builtin_calculator(stack) -> bytes:
    index = httpx.get(f"{stack.url}/v1/packages/tollgate/calculator").json()
    digest = index["versions"][0]["digest"]
    return httpx.get(f"{stack.url}/v1/blobs/{digest}").content


def manifest(name: str, version: str, content: bytes) -> dict:
    return {
        "schema_version": 1,
        "kind": "tool-server",
        "name": name,
        "version": version,
        "description": "A calculator republished by the test",
        "license": "Apache-2.0",
        "content": {
            "digest": "sha256:" + hashlib.sha256(content).hexdigest(),
            "size": len(content),
            "media_type": "application/wasm",
        },
        "metadata": {"world": "tollgate:tool/tool-server@0.1.0"},
    }


def test_publish_install_list_upgrade_and_uninstall_over_a2a(stack):
    content = builtin_calculator(stack)
    namespace = f"team-{uuid.uuid4().hex[:8]}"
    package = f"{namespace}/calc"
    encoded = base64.b64encode(content).decode()

    async def setup():
        client, http = await client_for(stack.url, stack.api_key)
        artifact_data(await send(client, "namespaces.create", {"name": namespace}))
        published = artifact_data(await send(client, "packages.publish", {
            "manifest": manifest(package, "1.0.0", content), "content_base64": encoded}))
        assert published["version"] == "1.0.0"
        installed = artifact_data(await send(client, "installs.create", {
            "package": package, "version": "^1.0", "name": "team-calc"}))
        assert installed["version"] == "1.0.0" and installed["requirement"] == "^1.0"
        assert installed["tools"] == ["team-calc__evaluate"]
        listed = artifact_data(await send(client, "installs.list", {}))
        assert "team-calc" in [i["name"] for i in listed["installs"]]
        # A second version to upgrade to.
        artifact_data(await send(client, "packages.publish", {
            "manifest": manifest(package, "1.1.0", content), "content_base64": encoded}))
        await http.aclose()

    asyncio.run(setup())
    assert "team-calc__evaluate" in tool_names(stack)

    # Calls at 50 per second while the install is upgraded: none may fail.
    failures, answered, stop = [], [], threading.Event()

    def caller():
        with httpx.Client(timeout=10) as http:
            while not stop.is_set():
                started = time.monotonic()
                response = http.post(
                    f"{stack.url}/v1/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "team-calc__evaluate", "arguments": {"expression": "6*7"}}},
                    headers={"Authorization": f"Bearer {stack.api_key}"},
                )
                body = response.json() if response.status_code == 200 else {}
                result = body.get("result", {})
                if result.get("isError") is not False or result["content"][0]["text"] != "42":
                    failures.append((response.status_code, response.text))
                else:
                    answered.append(1)
                time.sleep(max(0.0, 0.02 - (time.monotonic() - started)))

    thread = threading.Thread(target=caller)
    thread.start()
    time.sleep(1.0)

    async def upgrade_and_uninstall():
        client, http = await client_for(stack.url, stack.api_key)
        upgraded = artifact_data(await send(client, "installs.update", {"name": "team-calc"}))
        assert upgraded["version"] == "1.1.0", upgraded
        got = artifact_data(await send(client, "installs.get", {"name": "team-calc"}))
        assert got["version"] == "1.1.0"
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.to_thread(thread.join)
        deleted = artifact_data(await send(client, "installs.delete", {"name": "team-calc"}))
        assert deleted == {"name": "team-calc", "deleted": True}
        await http.aclose()

    asyncio.run(upgrade_and_uninstall())
    assert not failures, failures[:3]
    assert len(answered) >= 60, f"only {len(answered)} calls ran"
    assert "team-calc__evaluate" not in tool_names(stack), "uninstalled tools leave MCP at once"


def test_an_install_pins_its_dependencies(stack):
    content = builtin_calculator(stack)
    encoded = base64.b64encode(content).decode()
    namespace = f"deps-{uuid.uuid4().hex[:8]}"

    def with_dependencies(name: str, version: str, dependencies: dict) -> dict:
        return {**manifest(f"{namespace}/{name}", version, content), "dependencies": dependencies}

    async def go():
        client, http = await client_for(stack.url, stack.api_key)
        artifact_data(await send(client, "namespaces.create", {"name": namespace}))
        for name, version, dependencies in [
            ("base", "1.0.0", {}),
            ("base", "1.2.0", {}),
            ("base", "2.0.0", {}),
            ("app", "1.0.0", {f"{namespace}/base": "^1.0"}),
        ]:
            artifact_data(await send(client, "packages.publish", {
                "manifest": with_dependencies(name, version, dependencies), "content_base64": encoded}))
        installed = artifact_data(await send(client, "installs.create", {"package": f"{namespace}/app"}))
        missing = await send(client, "installs.create", {"package": f"{namespace}/base", "version": "^3", "name": "nope"})
        artifact_data(await send(client, "installs.delete", {"name": "app"}))
        await http.aclose()
        return installed, missing

    installed, missing = asyncio.run(go())
    digest = "sha256:" + hashlib.sha256(content).hexdigest()
    assert installed["lock"] == {f"{namespace}/base": {"version": "1.2.0", "digest": digest}}, installed
    assert missing.status.state == TaskState.TASK_STATE_FAILED, "no version matches ^3: the install fails"
    error = json_format.MessageToDict(missing.status.message.parts[0].data)["error"]
    assert "matches '^3'" in error["message"], error
