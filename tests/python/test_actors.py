"""Hosted actors end to end, against the mock upstream: the examples in
examples/actors are published over A2A (`actors/publish`, idempotent), deployed,
and called with curl-style HTTP (JSON and SSE), the official `openai` SDK
(`model="actor/demo/greeter"`, streaming and not). Runs are billed exactly (the
wallet moves by the cost the run reports), a run past its budget stops with
`budget_exceeded`, subtasks see none of their parent's messages (as recorded
by the mock), and every trail's ed25519 signature verifies over its RFC 8785
form, and fails once one byte changes."""

import base64
import json
import urllib.request
from pathlib import Path

import httpx
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from conftest import ROOT

EXAMPLES = ROOT / "examples" / "actors"


def op(stack, method: str, params: dict, key: str | None = None) -> dict:
    """One control-plane op as a JSON-RPC extension method on /a2a."""
    response = httpx.post(
        f"{stack.url}/a2a",
        json={"jsonrpc": "2.0", "id": 1, "method": method.replace(".", "/", 1), "params": params},
        headers={"Authorization": f"Bearer {key or stack.api_key}", "A2A-Version": "1.0"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    if "error" in body:
        raise OpFailed(body["error"])
    return body["result"]


class OpFailed(Exception):
    def __init__(self, error: dict):
        super().__init__(error["message"])
        self.error = error


def nanos(usd: str) -> int:
    whole, _, fraction = usd.partition(".")
    return int(whole) * 1_000_000_000 + int((fraction + "0" * 9)[:9])


def available(stack) -> int:
    return nanos(op(stack, "wallet.get", {})["available_usd"])


def invoke(stack, path: str, body: dict, **kwargs) -> httpx.Response:
    return httpx.post(
        f"{stack.url}/v1/actors/{path}",
        json=body,
        headers={"Authorization": f"Bearer {stack.api_key}", **kwargs.pop("headers", {})},
        timeout=60,
        **kwargs,
    )


def mock_requests(stack) -> list[dict]:
    with urllib.request.urlopen(f"{stack.mock_url}/__mock/requests") as r:
        return [req for req in json.load(r) if req["path"].endswith("/chat/completions")]


def publish_file(stack, path: Path, files: dict[str, str] | None = None) -> dict:
    return op(stack, "actors.publish", {"source": path.read_text(), "files": files or {}})


@pytest.fixture(scope="module")
def greeter(stack):
    try:
        op(stack, "namespaces.create", {"name": "demo"})
    except OpFailed as e:
        assert "exists" in str(e) or "already" in str(e), e.error
    published = publish_file(stack, EXAMPLES / "greeter.yaml")
    op(stack, "deployments.create", {"namespace": "demo", "name": "greeter", "actor_id": published["id"]})
    return published


def verify(stack, run: dict) -> None:
    key = base64.urlsafe_b64decode(run["public_key"] + "==")
    signature = base64.urlsafe_b64decode(run["signature"] + "==")
    Ed25519PublicKey.from_public_bytes(key).verify(signature, rfc8785.dumps(run["trail"]))


def test_publishing_is_immutable_and_idempotent(stack, greeter):
    assert len(greeter["id"]) == 40 and greeter["created"]
    again = publish_file(stack, EXAMPLES / "greeter.yaml")
    assert again["id"] == greeter["id"] and not again["created"]
    assert again["version"] == greeter["version"]
    # The same behaviour written differently is the same actor.
    reordered = (EXAMPLES / "greeter.yaml").read_text().replace("temperature: 0", "temperature: 0  # deterministic")
    assert op(stack, "actors.compile", {"source": reordered})["id"] == greeter["id"]
    # Another word is another actor, published as the next version.
    changed = (EXAMPLES / "greeter.yaml").read_text().replace("Say hello", "Say hi")
    other = op(stack, "actors.publish", {"source": changed})
    assert other["id"] != greeter["id"] and other["version"] != greeter["version"]
    # The stored content of the first id has not changed.
    shown = op(stack, "actors.get", {"id": greeter["id"]})
    assert "Say hello" in json.dumps(shown["ir"])
    # A version cannot be reused for different content.
    with pytest.raises(OpFailed):
        op(stack, "actors.publish", {"source": changed.replace("Say hi", "Say hey"), "version": greeter["version"]})


def test_compile_errors_name_line_and_column(stack):
    with pytest.raises(OpFailed) as failed:
        op(stack, "actors.compile", {"source": "apiVersion: tollgate.dev/v1\nkind: Actor\nmetadata: [\n"})
    assert "3:" in failed.value.error["message"] or "4:" in failed.value.error["message"], failed.value.error


def test_the_greeter_answers_as_json_and_bills_exactly(stack, greeter):
    before = available(stack)
    answer = invoke(stack, "demo/greeter", {"input": {"name": "Ada"}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["output"] == "You said: Say hello to Ada."
    assert body["actor_id"] == greeter["id"]
    cost = nanos(body["service"]["cost_usd"])
    assert cost > 0
    assert before - available(stack) == cost
    run = op(stack, "runs.get", {"run_id": body["run_id"]})
    steps = run["trail"]["steps"]
    assert [s["kind"] for s in steps] == ["llm", "return"]
    assert steps[0]["model_calls"][0]["provider"] == "acme"
    assert nanos(steps[0]["cost_usd"]) == cost
    verify(stack, run)
    altered = json.loads(json.dumps(run))
    altered["trail"]["cost_usd"] = altered["trail"]["cost_usd"][:-1] + ("1" if altered["trail"]["cost_usd"][-1] != "1" else "2")
    with pytest.raises(Exception):
        verify(stack, altered)
    # The run's request-log row carries the same trail (the row is written
    # just after the answer).
    import time

    for _ in range(50):
        try:
            logged = op(stack, "requests.get", {"request_id": body["service"]["request_id"]})
            break
        except OpFailed:
            time.sleep(0.1)
    assert logged["kind"] == "actor_run" and logged["model"] == "actor/demo/greeter"
    assert logged["provenance"]["trail"] == run["trail"]
    children = [e for e in op(stack, "usage.list", {"limit": 50})["entries"]
                if e.get("parent_request_id") == body["service"]["request_id"]]
    assert len(children) == 1 and children[0]["kind"] == "chat"
    # The public key is served at a documented URL too.
    key = httpx.get(f"{stack.url}/v1/provenance/key").json()
    assert key["public_key"] == run["public_key"] and key["algorithm"] == "ed25519"


def test_the_greeter_streams_typed_events(stack, greeter):
    with httpx.stream(
        "POST",
        f"{stack.url}/v1/actors/demo/greeter",
        json={"input": {"name": "Grace"}, "stream": True},
        headers={"Authorization": f"Bearer {stack.api_key}"},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events, data = [], []
        current = None
        for line in response.iter_lines():
            if line.startswith("event:"):
                current = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append(current)
                data.append(line.split(":", 1)[1].strip())
                current = None
    assert events[0] == "step.started"
    assert "delta" in events and "step.finished" in events
    assert events[-2] == "result" and data[-1] == "[DONE]"
    result = json.loads(data[-2])
    assert result["output"] == "You said: Say hello to Grace."
    deltas = "".join(json.loads(d)["text"] for e, d in zip(events, data) if e == "delta")
    assert deltas == "You said: Say hello to Grace."


def test_the_greeter_is_a_chat_model_for_the_openai_sdk(stack, greeter, client):
    completion = client.chat.completions.create(
        model="actor/demo/greeter", messages=[{"role": "user", "content": "Lovelace"}]
    )
    assert completion.choices[0].message.content == "You said: Say hello to Lovelace."
    assert completion.model == "actor/demo/greeter"
    streamed = client.chat.completions.create(
        model="actor/demo/greeter", messages=[{"role": "user", "content": "Hopper"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices)
    assert text == "You said: Say hello to Hopper."


def test_a_run_past_its_budget_stops_and_the_wallet_shows_what_it_spent(stack, greeter):
    # Each call may cost up to its worst case; a budget smaller than that
    # refuses before any upstream call, and nothing is spent.
    before = available(stack)
    sent = len(mock_requests(stack))
    answer = invoke(stack, "demo/greeter", {"input": {"name": "Ada"}, "max_cost_usd": "0.000000001"})
    assert answer.status_code == 402, answer.text
    error = answer.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert "spent 0.000000000 USD of its 0.000000001 USD budget" in error["message"], error
    assert available(stack) == before
    assert len(mock_requests(stack)) == sent


def test_unknown_deployments_and_bad_input_get_clear_errors(stack, greeter):
    missing = invoke(stack, "demo/nobody", {"input": {}})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    bad = invoke(stack, "demo/greeter", {"input": {"nom": "Ada"}})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"
    malformed = invoke(stack, "demo/greeter", {"inptu": {}})
    assert malformed.status_code == 400
    by_id = invoke(stack, f"by-id/{greeter['id']}", {"input": {"name": "Id"}})
    assert by_id.status_code == 200 and by_id.json()["output"] == "You said: Say hello to Id."


def test_research_subtasks_are_isolated(stack, greeter):
    research = EXAMPLES / "research"
    published = publish_file(
        stack, research / "research.yaml", {"researcher.yaml": (research / "researcher.yaml").read_text()}
    )
    op(stack, "deployments.create", {"namespace": "demo", "name": "research", "actor_id": published["id"]})
    httpx.delete(f"{stack.mock_url}/__mock/requests")
    answer = invoke(stack, "demo/research", {"input": {"topic": "tides"}})
    assert answer.status_code == 200, answer.text
    sent = [req["body"]["messages"] for req in mock_requests(stack)]
    planner = [m for m in sent if "sub-questions" in json.dumps(m)]
    subtasks = [m for m in sent if "precise researcher" in json.dumps(m)]
    assert len(planner) == 1 and len(subtasks) == 2, sent
    for messages in subtasks:
        text = json.dumps(messages)
        assert "sub-questions" not in text and "plan research" not in text, text
    run = op(stack, "runs.get", {"run_id": answer.json()["run_id"]})
    findings = [s for s in run["trail"]["steps"] if s["id"] == "findings"][0]
    assert len(findings["child_runs"]) == 2
    assert all(child["depth"] == 1 for child in findings["child_runs"])
    verify(stack, run)


def test_the_calculator_agent_calls_its_tool(stack, greeter):
    published = publish_file(stack, EXAMPLES / "calculator-agent.yaml")
    op(stack, "deployments.create", {"namespace": "demo", "name": "calc", "actor_id": published["id"]})
    answer = invoke(stack, "demo/calc", {"input": {"question": "What is 2*(3+4)?"}})
    assert answer.status_code == 200, answer.text
    assert "14" in answer.json()["output"]
    run = op(stack, "runs.get", {"run_id": answer.json()["run_id"]})
    call = run["trail"]["steps"][0]["tool_calls"][0]
    assert call["tool"] == "calculator__evaluate" and call["component"]["name"] == "tollgate/calculator"


def test_the_greeter_is_an_a2a_agent(stack, greeter):
    import asyncio

    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest

    async def go(streaming: bool):
        headers = {"Authorization": f"Bearer {stack.api_key}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming))
            client = await factory.create_from_url(f"{stack.url}/v1/actors/demo/greeter")
            message = Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="Turing")])
            return [r async for r in client.send_message(SendMessageRequest(message=message))]

    whole = asyncio.run(go(False))
    assert len(whole) == 1 and whole[0].HasField("message"), whole
    assert whole[0].message.parts[0].text == "You said: Say hello to Turing."
    assert whole[0].message.metadata["actorId"] == greeter["id"]

    streamed = asyncio.run(go(True))
    kinds = [r.WhichOneof("payload") if hasattr(r, "WhichOneof") else None for r in streamed]
    finals = [r.artifact_update for r in streamed if r.HasField("artifact_update") and r.artifact_update.last_chunk]
    assert finals and finals[0].artifact.parts[0].text == "You said: Say hello to Turing.", streamed
    statuses = [r.status_update.status.state for r in streamed if r.HasField("status_update")]
    from a2a.types import TaskState

    assert statuses[-1] == TaskState.TASK_STATE_COMPLETED, kinds
    assert streamed[0].HasField("task")


def test_the_cli_publishes_deploys_and_verifies(stack, greeter):
    import os
    import subprocess

    from conftest import BIN

    env = {**os.environ, "TOLLGATE_URL": stack.url, "TOLLGATE_API_KEY": stack.api_key}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([BIN, *args], env=env, capture_output=True, text=True, timeout=60)

    published = cli("actors", "publish", str(EXAMPLES / "research" / "research.yaml"), "--json")
    assert published.returncode == 0, published.stderr
    research = json.loads(published.stdout)
    offline = cli("actors", "compile", str(EXAMPLES / "greeter.yaml"), "--json")
    assert json.loads(offline.stdout)["id"] == greeter["id"]
    deployed = cli("actors", "deploy", "demo/research-cli", research["id"], "--json")
    assert deployed.returncode == 0, deployed.stderr
    assert json.loads(deployed.stdout)["model"] == "actor/demo/research-cli"
    answer = invoke(stack, "demo/research-cli", {"input": {"topic": "tides"}})
    assert answer.status_code == 200, answer.text
    verified = cli("runs", "verify", answer.json()["run_id"])
    assert verified.returncode == 0 and "verified" in verified.stdout, verified.stderr
    missing = cli("runs", "verify", "run_nope")
    assert missing.returncode != 0


TWICE = """
apiVersion: tollgate.dev/v1
kind: Actor
metadata: {name: twice, namespace: demo}
inputs: {type: object, properties: {name: {type: string}}, required: [name]}
models:
  default: {candidates: [acme/echo], max_tokens: 16}
steps:
  - id: first
    llm: {model: default, prompt: "Say hello to {{ input.name }}."}
  - id: second
    llm: {model: default, prompt: "Say hello to {{ input.name }}."}
"""


def test_a_run_stops_mid_way_at_its_budget_and_bills_exactly_what_it_spent(stack, greeter):
    import re

    published = op(stack, "actors.publish", {"source": TWICE})
    path = f"by-id/{published['id']}"
    # Each call costs `a` and may cost up to `worst`: learn both.
    free = invoke(stack, path, {"input": {"name": "Ada"}})
    assert free.status_code == 200, free.text
    each = nanos(free.json()["service"]["cost_usd"]) // 2
    refused = invoke(stack, path, {"input": {"name": "Ada"}, "max_cost_usd": "0.000000001"})
    worst = nanos(re.search(r"could cost up to ([0-9.]+) USD", refused.json()["error"]["message"]).group(1))
    assert worst > each > 0
    # Room for the first call's worst case, but after it settles at `each`,
    # one nanodollar short of the second's.
    cap = worst + each - 1
    before = available(stack)
    stopped = invoke(stack, path, {"input": {"name": "Ada"}, "max_cost_usd": f"{cap // 10**9}.{cap % 10**9:09d}"})
    assert stopped.status_code == 402, stopped.text
    body = stopped.json()
    assert body["error"]["code"] == "budget_exceeded" and body["error"]["step"] == "second", body
    spent = f"{each // 10**9}.{each % 10**9:09d}"
    assert f"spent {spent} USD" in body["error"]["message"], body
    assert body["service"]["cost_usd"] == spent
    assert before - available(stack) == each
    trail = op(stack, "runs.get", {"run_id": body["run_id"]})["trail"]
    assert [s["status"] for s in trail["steps"]] == ["succeeded", "failed"]
    assert trail["cost_usd"] == spent and trail["status"] == "failed"


def test_deployments_are_listed_moved_and_deleted(stack, greeter):
    other = op(stack, "actors.publish", {"source": TWICE})
    op(stack, "deployments.create", {"namespace": "demo", "name": "moving", "actor_id": greeter["id"]})
    assert invoke(stack, "demo/moving", {"input": {"name": "A"}}).json()["actor_id"] == greeter["id"]
    moved = op(stack, "deployments.create", {"namespace": "demo", "name": "moving", "actor_id": other["id"]})
    assert moved["actor_id"] == other["id"] and moved["path"] == "/v1/actors/demo/moving"
    assert invoke(stack, "demo/moving", {"input": {"name": "A"}}).json()["actor_id"] == other["id"]
    names = [d["name"] for d in op(stack, "deployments.list", {})["deployments"]]
    assert "moving" in names and "greeter" in names
    assert op(stack, "deployments.get", {"namespace": "demo", "name": "moving"})["actor_id"] == other["id"]
    op(stack, "deployments.delete", {"namespace": "demo", "name": "moving"})
    assert invoke(stack, "demo/moving", {"input": {"name": "A"}}).status_code == 404
    with pytest.raises(OpFailed):
        op(stack, "deployments.create", {"namespace": "not-mine", "name": "x", "actor_id": greeter["id"]})


def test_a_registry_pinned_component_gets_no_egress_and_an_install_keeps_its_grants(stack, greeter):
    """An actor's registry reference runs the component with no grants: the
    built-in http-fetch cannot reach an origin at all. The same component
    through an install that approved the origin can."""
    import http.server
    import threading

    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "text/plain")
            self.end_headers()
            self.wfile.write(b"secret page")

        def log_message(self, *args):
            pass

    # Loopback is closed to components unless the operator allows the origin:
    # the stack allows this one port.
    port = stack.internal_port
    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{port}"
    try:
        def fetcher(reference: str) -> str:
            return f"""
apiVersion: tollgate.dev/v1
kind: Actor
metadata: {{name: fetcher, namespace: demo}}
tools:
  web: {reference}
steps:
  - id: get
    tool: {{server: web, name: fetch, arguments: {{url: "{origin}/page"}}}}
"""

        pinned = op(stack, "actors.publish", {"source": fetcher('{package: tollgate/http-fetch, version: "*"}')})
        refused = invoke(stack, f"by-id/{pinned['id']}", {"input": {}})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "tool_error"
        assert hits == [], "a registry-pinned component reached an origin nobody granted"

        op(stack, "installs.create", {"package": "tollgate/http-fetch", "name": "web-ok", "origins": [origin]})
        try:
            granted = op(stack, "actors.publish", {"source": fetcher("{install: web-ok}")})
            answer = invoke(stack, f"by-id/{granted['id']}", {"input": {}})
            assert answer.status_code == 200, answer.text
            assert "secret page" in json.dumps(answer.json()["output"])
            assert hits == ["/page"]
        finally:
            op(stack, "installs.delete", {"name": "web-ok"})
    finally:
        server.shutdown()
