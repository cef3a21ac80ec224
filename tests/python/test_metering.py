"""Usage events are valid CloudEvents: every event the gateway delivers, in structured,
binary and batch mode, passes the strict parser of the Python `cloudevents` package
(`cloudevents.v1.http.from_http`, which rejects missing required attributes)."""

import json
import os
import subprocess
import tempfile
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cloudevents.v1.http import from_http
from openai import OpenAI

from conftest import BIN, free_port, wait_healthy, MOCK_BIN

MODES = ("structured", "binary", "batch")


class Received:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = {mode: [] for mode in MODES}

    def add(self, mode, headers, body):
        with self.lock:
            self.requests[mode].append((headers, body))

    def snapshot(self):
        with self.lock:
            return {mode: list(reqs) for mode, reqs in self.requests.items()}


def start_sink(received: Received):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            mode = self.path.strip("/")
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            received.add(mode, {k.lower(): v for k, v in self.headers.items()}, body)
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def metered():
    received = Received()
    sink = start_sink(received)
    sink_url = f"http://127.0.0.1:{sink.server_address[1]}"
    tmp = tempfile.TemporaryDirectory()
    mock_port, gw_port = free_port(), free_port()
    mock_url, url = f"http://127.0.0.1:{mock_port}", f"http://127.0.0.1:{gw_port}"
    procs = [subprocess.Popen([MOCK_BIN, "--listen", f"127.0.0.1:{mock_port}"])]
    wait_healthy(mock_url, procs[0])
    sinks = "".join(
        f'[[metering.sinks]]\nkind = "http"\nurl = "{sink_url}/{mode}"\nmode = "{mode}"\n'
        f'headers = {{ Authorization = "Bearer sink-secret" }}\n'
        for mode in MODES
    )
    config = Path(tmp.name) / "tollgate.toml"
    config.write_text(
        f"""
listen = "127.0.0.1:{gw_port}"
data_dir = "{tmp.name}/data"
[providers.acme]
base_url = "{mock_url}/v1"
api_key = "sk-anything"
models = [{{ id = "small", input_price_per_mtok = "0.50", output_price_per_mtok = "1.50" }}]
[metering]
linger_ms = 20
{sinks}
"""
    )
    out = subprocess.run(
        [BIN, "admin", "create-account", "--config", str(config), "--name", "m", "--credit-usd", "5", "--json"],
        check=True, capture_output=True, text=True,
    )
    account = json.loads(out.stdout)
    log_path = Path(tmp.name) / "gateway.log"
    log = open(log_path, "w")
    gw = subprocess.Popen([BIN, "serve", "--config", str(config)], stderr=log)
    procs.append(gw)
    wait_healthy(url, gw)
    yield url, account, received, log_path
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
    log.close()
    sink.shutdown()
    tmp.cleanup()


def events_by_mode(received: Received, expected: int, timeout: float = 20.0):
    """Parses everything received with the strict parser; waits for `expected` per mode."""
    deadline = time.time() + timeout
    while True:
        parsed = {mode: [] for mode in MODES}
        for mode, reqs in received.snapshot().items():
            for headers, body in reqs:
                if mode == "batch":
                    assert headers["content-type"] == "application/cloudevents-batch+json"
                    for item in json.loads(body):
                        parsed[mode].append(
                            from_http({"content-type": "application/cloudevents+json"}, json.dumps(item))
                        )
                else:
                    if mode == "structured":
                        assert headers["content-type"] == "application/cloudevents+json"
                    else:
                        assert headers["ce-specversion"] == "1.0"
                    parsed[mode].append(from_http(headers, body))
                assert headers["authorization"] == "Bearer sink-secret"
        if all(len({e["id"] for e in evs}) >= expected for evs in parsed.values()) or time.time() > deadline:
            return parsed
        time.sleep(0.1)


def test_every_mode_delivers_strictly_valid_cloudevents(metered):
    url, account, received, _ = metered
    client = OpenAI(base_url=f"{url}/v1", api_key=account["api_key"], max_retries=0)
    ids, costs = set(), {}
    for i in range(4):
        raw = client.chat.completions.with_raw_response.create(
            model="acme/small", messages=[{"role": "user", "content": f"hello {i}"}]
        )
        reply = raw.parse().to_dict()
        ids.add(reply["service"]["request_id"])
        costs[reply["service"]["request_id"]] = Decimal(reply["service"]["cost_usd"])
    stream = client.chat.completions.create(
        model="acme/small", stream=True, messages=[{"role": "user", "content": "stream it"}]
    )
    last = None
    for chunk in stream:
        last = chunk
    streamed_id = last.to_dict()["service"]["request_id"]
    ids.add(streamed_id)
    costs[streamed_id] = Decimal(last.to_dict()["service"]["cost_usd"])

    parsed = events_by_mode(received, len(ids))
    for mode, events in parsed.items():
        assert {e["id"] for e in events} == ids, mode
        for event in events:
            assert event["specversion"] == "1.0"
            assert event["type"] == "dev.tollgate.usage.v1"
            assert event["source"].startswith("urn:tollgate:instance:")
            assert event["subject"] == account["workspace_id"]
            assert event["datacontenttype"] == "application/json"
            assert event["dataschema"].endswith("/schemas/usage.v1.json")
            assert event["time"]
            data = event.data
            assert data["model"] == "acme/small" and data["provider"] == "acme"
            assert data["currency"] == "USD"
            assert Decimal(data["cost"]) == costs[event["id"]], "event cost = the cost the answer showed"
            assert data["streamed"] == (event["id"] == streamed_id)
            assert data["attempts"] == 1 and data["outcome"] == "success"

    # Neither prompts nor the sink's credential reach the log (log_prompts is off).
    log = metered[3].read_text()
    assert "hello 0" not in log and "stream it" not in log
    assert "sink-secret" not in log and account["api_key"] not in log


def test_the_strict_parser_rejects_an_incomplete_event():
    # Guards the test above: the parser really is strict.
    incomplete = {"specversion": "1.0", "id": "x", "type": "dev.tollgate.usage.v1"}  # no source
    with pytest.raises(Exception):
        from_http({"content-type": "application/cloudevents+json"}, json.dumps(incomplete))


def test_tool_calls_and_skill_runs_have_events_of_their_own_linked_to_their_parent(metered):
    url, account, received, _ = metered
    key = account["api_key"]
    env = {**os.environ, "TOLLGATE_URL": url, "TOLLGATE_API_KEY": key}
    for package in ("tollgate/calculator", "tollgate/summarize"):
        done = subprocess.run([BIN, "install", package, "--json"], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    auth = {"Authorization": f"Bearer {key}"}
    called = httpx.post(f"{url}/v1/mcp", headers=auth, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "calculator__evaluate", "arguments": {"expression": "2*(3+4)"}}}).json()
    assert called["result"]["content"][0]["text"] == "14"
    run = httpx.post(f"{url}/v1/skills/summarize", headers=auth, timeout=30,
                     json={"input": {"text": "Events link runs to calls.", "model": "acme/small"}}).json()
    run_id = run["service"]["request_id"]
    model_call_id = run["service"]["model_calls"][0]["request_id"]

    def structured():
        return [from_http(h, b) for h, b in received.snapshot().get("structured", [])]

    deadline = time.time() + 20
    while time.time() < deadline:
        events = structured()
        kinds = {e["type"] for e in events}
        if {"dev.tollgate.tool.call.v1", "dev.tollgate.skill.run.v1"} <= kinds and model_call_id in {e["id"] for e in events}:
            break
        time.sleep(0.1)
    by_id = {e["id"]: e for e in events}
    [tool] = [e for e in events if e["type"] == "dev.tollgate.tool.call.v1"]
    assert tool.data["kind"] == "tool_call" and tool.data["model"] == "calculator__evaluate"
    assert tool.data["provider"] == "tollgate/calculator" and tool.data["status"] == 200
    assert tool.data["cost"] == "0.000000000" and tool.data["duration_ms"] >= 0
    skill_run = by_id[run_id]
    assert skill_run["type"] == "dev.tollgate.skill.run.v1"
    assert skill_run.data["model"] == "summarize__run" and skill_run.data["cost"] == "0.000000000"
    model_call = by_id[model_call_id]
    assert model_call["type"] == "dev.tollgate.usage.v1"
    assert model_call.data["parent_request_id"] == run_id, "the model call names the skill run"
    assert Decimal(model_call.data["cost"]) == Decimal(run["service"]["cost_usd"])
