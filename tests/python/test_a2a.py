"""The control plane through the official A2A client (`a2a-sdk`): card
resolution, sign-up and workspace creation via SendMessage, GetTask, ListTasks,
and TaskNotFoundError for an unknown task."""

import asyncio
import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, ListTasksRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a.utils.errors import TaskNotFoundError
from google.protobuf import json_format, struct_pb2


def op_message(op: str, params: dict) -> SendMessageRequest:
    data = struct_pb2.Value()
    data.struct_value.update({"op": op, "params": params})
    part = Part(data=data, media_type="application/json")
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[part])
    return SendMessageRequest(message=message)


async def client_for(url: str, api_key: str | None):
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    http = httpx.AsyncClient(headers=headers, timeout=30)
    factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
    return await factory.create_from_url(url), http


async def send(client, op: str, params: dict):
    responses = [r async for r in client.send_message(op_message(op, params))]
    assert len(responses) == 1
    assert responses[0].HasField("task"), responses[0]
    return responses[0].task


def artifact_data(task) -> dict:
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    return json_format.MessageToDict(task.artifacts[0].parts[0].data)


def run(coroutine):
    return asyncio.run(coroutine)


def test_card_resolves_in_v1_shape(stack):
    async def go():
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, stack.url).get_agent_card()
            raw = (await http.get(f"{stack.url}/.well-known/agent-card.json")).json()
        return card, raw

    card, raw = run(go())
    assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert card.supported_interfaces[0].url.endswith("/a2a")
    assert card.capabilities.extended_agent_card
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert {s.id for s in card.skills} >= {"workspaces", "namespaces", "members", "keys", "billing"}
    for legacy in ("url", "preferredTransport", "protocolVersion", "security"):
        assert legacy not in raw


def test_signup_workspace_get_and_list_tasks(stack):
    async def go():
        anonymous, http = await client_for(stack.url, None)
        email = f"py-{uuid.uuid4().hex[:8]}@example.com"
        signup = await send(anonymous, "accounts.signup", {"name": "Py", "email": email})
        account = artifact_data(signup)
        await http.aclose()
        assert account["api_key"].startswith("tg_live_")

        client, http = await client_for(stack.url, account["api_key"])
        created = await send(client, "workspaces.create", {"name": "research"})
        workspace = artifact_data(created)
        assert workspace["name"] == "research" and workspace["role"] == "owner"

        # The sign-up task belongs to the new user, so its key can read it back.
        again = await client.get_task(GetTaskRequest(id=signup.id))
        assert artifact_data(again)["workspace_id"] == account["workspace_id"]
        fetched = await client.get_task(GetTaskRequest(id=created.id))
        assert artifact_data(fetched) == workspace

        listed = await client.list_tasks(ListTasksRequest(page_size=1, include_artifacts=True))
        assert listed.total_size == 2
        assert [t.id for t in listed.tasks] == [created.id]
        rest = await client.list_tasks(ListTasksRequest(page_size=1, page_token=listed.next_page_token))
        assert [t.id for t in rest.tasks] == [signup.id]
        assert rest.next_page_token == ""

        failed = await send(client, "workspaces.get", {"workspace_id": "ws_nope"})
        assert failed.status.state == TaskState.TASK_STATE_FAILED
        error = json_format.MessageToDict(failed.status.message.parts[0].data)["error"]
        assert error["reason"] == "NOT_FOUND"

        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="task_does_not_exist"))
        # Another tenant's task is just as unknown.
        other, other_http = await client_for(stack.url, stack.api_key)
        with pytest.raises(TaskNotFoundError):
            await other.get_task(GetTaskRequest(id=created.id))
        await other_http.aclose()
        await http.aclose()

    run(go())
