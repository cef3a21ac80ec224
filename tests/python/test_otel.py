"""OpenTelemetry export: a small OTLP/HTTP receiver (decoded with the official
`opentelemetry-proto` package) receives the gateway's spans, carrying the GenAI
attributes and the caller's trace context, and its GenAI and gateway metrics."""

import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from openai import OpenAI
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from conftest import BIN, free_port, wait_healthy, MOCK_BIN

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"


class Collector:
    def __init__(self):
        self.lock = threading.Lock()
        self.spans = []
        self.metrics = {}
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                assert self.headers.get("content-type") == "application/x-protobuf"
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    with collector.lock:
                        for resource_spans in request.resource_spans:
                            for scope_spans in resource_spans.scope_spans:
                                collector.spans.extend(scope_spans.spans)
                elif self.path == "/v1/metrics":
                    request = ExportMetricsServiceRequest()
                    request.ParseFromString(body)
                    with collector.lock:
                        for resource_metrics in request.resource_metrics:
                            for scope_metrics in resource_metrics.scope_metrics:
                                for metric in scope_metrics.metrics:
                                    collector.metrics[metric.name] = metric
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait(self, predicate, timeout=20.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if predicate(self):
                    return
            time.sleep(0.1)
        with self.lock:
            names = sorted({s.name for s in self.spans}), sorted(self.metrics)
            chats = [attrs(s) for s in self.spans if s.name.startswith("chat ")]
        raise AssertionError(f"timed out; spans and metrics seen: {names}; chat spans: {chats}")


def attrs(item):
    out = {}
    for kv in item.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


@pytest.fixture(scope="module")
def traced():
    collector = Collector()
    tmp = tempfile.TemporaryDirectory()
    mock_port, gw_port = free_port(), free_port()
    mock_url, url = f"http://127.0.0.1:{mock_port}", f"http://127.0.0.1:{gw_port}"
    mock = subprocess.Popen([MOCK_BIN, "--listen", f"127.0.0.1:{mock_port}"])
    wait_healthy(mock_url, mock)
    config = Path(tmp.name) / "tollgate.toml"
    config.write_text(
        f"""
listen = "127.0.0.1:{gw_port}"
data_dir = "{tmp.name}/data"
[providers.acme]
base_url = "{mock_url}/v1"
api_key = "sk-anything"
models = [
  {{ id = "small", input_price_per_mtok = "0.50", output_price_per_mtok = "1.50" }},
  {{ id = "embed", operations = ["embeddings"], input_price_per_mtok = "0.02", output_price_per_mtok = "0" }},
]
[providers.primary]
base_url = "{mock_url}/v1"
api_key = "sk-primary"
models = [{{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }}]
[telemetry]
log_prompts = true
[server]
header_read_timeout_ms = 500
max_in_flight = 2
"""
    )
    out = subprocess.run(
        [BIN, "admin", "create-account", "--config", str(config), "--name", "o", "--credit-usd", "5", "--json"],
        check=True, capture_output=True, text=True,
    )
    account = json.loads(out.stdout)
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
    }
    log_path = Path(tmp.name) / "gateway.log"
    log = open(log_path, "w")
    gw = subprocess.Popen([BIN, "serve", "--config", str(config)], env=env, stderr=log)
    wait_healthy(url, gw)
    client = OpenAI(base_url=f"{url}/v1", api_key=account["api_key"], max_retries=0)
    collector.log_path = log_path
    yield client, collector
    log.close()
    for p in (gw, mock):
        p.terminate()
        p.wait(timeout=10)
    collector.server.shutdown()
    tmp.cleanup()


def test_spans_carry_genai_attributes_and_the_callers_trace(traced):
    client, collector = traced
    reply = client.chat.completions.create(
        model="acme/small",
        messages=[{"role": "user", "content": "trace me"}],
        extra_headers={"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"},
    )
    request_id = reply.to_dict()["service"]["request_id"]
    trace_id = bytes.fromhex(TRACE_ID)

    def in_trace(c):
        return [s for s in c.spans if s.trace_id == trace_id]

    collector.wait(lambda c: {"POST /v1/chat/completions", "chat small"} <= {s.name for s in in_trace(c)})
    spans = {s.name: s for s in in_trace(collector)}
    server = spans["POST /v1/chat/completions"]
    assert server.kind == Span.SPAN_KIND_SERVER
    assert server.parent_span_id == bytes.fromhex(PARENT_SPAN_ID), "the inbound traceparent is honoured"
    assert attrs(server)["request_id"] == request_id
    assert attrs(server)["http.response.status_code"] == 200

    chat = spans["chat small"]
    assert chat.kind == Span.SPAN_KIND_CLIENT
    assert chat.parent_span_id == server.span_id
    a = attrs(chat)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "acme"
    assert a["gen_ai.request.model"] == "acme/small"
    assert a["gen_ai.response.model"] == "small"
    assert a["gen_ai.usage.input_tokens"] == reply.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == reply.usage.completion_tokens
    assert "error.type" not in a
    assert chat.end_time_unix_nano >= chat.start_time_unix_nano

    adapter = [s for s in in_trace(collector) if s.name.startswith("adapter openai-compatible")]
    assert adapter, "the adapter call has its own span"


def test_an_embeddings_attempt_is_an_embeddings_span(traced):
    client, collector = traced
    answer = client.embeddings.create(model="acme/embed", input="trace me")
    request_id = answer.to_dict()["service"]["request_id"]
    collector.wait(lambda c: any(s.name == "embeddings embed" for s in c.spans))
    span = next(s for s in collector.spans if s.name == "embeddings embed")
    a = attrs(span)
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["gen_ai.request.model"] == "acme/embed"
    assert a["gen_ai.usage.input_tokens"] == answer.usage.prompt_tokens
    assert a["tollgate.request.id"] == request_id


def test_failover_and_streaming_attempts(traced):
    client, collector = traced
    reply = client.chat.completions.create(
        model="primary/limited",
        messages=[{"role": "user", "content": "fall back"}],
        extra_body={"models": ["acme/small"]},
    )
    request_id = reply.to_dict()["service"]["request_id"]
    for _ in client.chat.completions.create(
        model="acme/small", stream=True, messages=[{"role": "user", "content": "stream a few words please"}]
    ):
        pass

    def attempts(c):
        return [s for s in c.spans if attrs(s).get("tollgate.request.id") == request_id]

    collector.wait(lambda c: len(attempts(c)) == 2)
    failed, answered = sorted(attempts(collector), key=lambda s: attrs(s)["tollgate.attempt"])
    assert failed.name == "chat fail-429" and attrs(failed)["error.type"]
    assert attrs(failed)["http.response.status_code"] == 429
    assert answered.name == "chat small" and "error.type" not in attrs(answered)
    assert failed.end_time_unix_nano <= answered.start_time_unix_nano + 1_000_000

    collector.wait(
        lambda c: any("gen_ai.response.time_to_first_chunk" in attrs(s) for s in c.spans if s.name == "chat small")
    )


def test_metrics_include_token_usage_and_gateway_counters(traced):
    client, collector = traced
    client.chat.completions.create(model="acme/small", messages=[{"role": "user", "content": "count tokens"}])
    wanted = {
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "tollgate.requests",
        "tollgate.cost",
        "tollgate.ledger.reserve.duration",
        "tollgate.metering.outbox.backlog",
    }
    collector.wait(lambda c: wanted <= set(c.metrics))
    usage = collector.metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    points = usage.histogram.data_points
    types = {attrs(p)["gen_ai.token.type"] for p in points}
    assert types == {"input", "output"}
    # Each operation is its own series (an embeddings call made earlier is one).
    assert {attrs(p)["gen_ai.operation.name"] for p in points} <= {"chat", "embeddings"}
    assert any(attrs(p)["gen_ai.operation.name"] == "chat" for p in points)
    assert sum(p.sum for p in points if attrs(p)["gen_ai.provider.name"] == "acme") > 0
    requests = collector.metrics["tollgate.requests"].sum.data_points
    assert any(attrs(p)["http.response.status_code"] == 200 and p.as_int >= 1 for p in requests)


def test_server_metrics_count_connections_requests_shedding_and_timeouts(traced):
    client, collector = traced
    url = str(client.base_url).rstrip("/").removesuffix("/v1")
    host, port = url.removeprefix("http://").split(":")
    # Headers that never finish: closed at server.header_read_timeout_ms (500 ms).
    with socket.create_connection((host, int(port))) as slow:
        slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        slow.settimeout(5)
        answer = slow.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer
    # Four slow requests against server.max_in_flight = 2: some are shed.
    def slow_chat(_):
        return httpx.post(
            f"{url}/v1/chat/completions",
            headers={"Authorization": f"Bearer {client.api_key}"},
            json={"model": "acme/small", "messages": [{"role": "user", "content": "wait"}], "mock": {"latency_ms": 500}},
            timeout=10,
        ).status_code
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(slow_chat, range(4)))
    assert 503 in statuses and 200 in statuses, statuses

    wanted = {
        "tollgate.server.connections.open",
        "tollgate.server.requests.in_flight",
        "tollgate.server.requests.shed",
        "tollgate.server.timeouts",
    }
    collector.wait(lambda c: wanted <= set(c.metrics))
    timeouts = collector.metrics["tollgate.server.timeouts"].sum.data_points
    assert any(attrs(p)["tollgate.timeout"] == "header" and p.as_int >= 1 for p in timeouts)
    shed = collector.metrics["tollgate.server.requests.shed"].sum.data_points
    assert any(attrs(p)["tollgate.reason"] == "overloaded" and p.as_int >= 1 for p in shed)
    assert collector.metrics["tollgate.server.connections.open"].unit == "{connection}"


def test_logs_are_json_lines_with_the_request_id(traced):
    client, collector = traced
    reply = client.chat.completions.create(
        model="acme/small", messages=[{"role": "user", "content": "a prompt worth logging"}]
    )
    request_id = reply.to_dict()["service"]["request_id"]
    deadline = time.time() + 10
    while time.time() < deadline:
        lines = [json.loads(line) for line in collector.log_path.read_text().splitlines() if line.strip()]
        logged = [l for l in lines if l.get("span", {}).get("request_id") == request_id]
        if logged:
            break
        time.sleep(0.1)
    assert logged, "a line logged while serving the request carries its id"
    # log_prompts is on in this gateway's config, so the body was logged on purpose.
    assert "a prompt worth logging" in logged[0]["fields"]["body"]
    assert all({"timestamp", "level", "target"} <= set(l) for l in lines)


def test_a_skills_model_call_is_a_child_of_the_skill_run_with_provider_and_cost(traced):
    client, collector = traced
    url = str(client.base_url).rstrip("/").removesuffix("/v1")
    env = {**os.environ, "TOLLGATE_URL": url, "TOLLGATE_API_KEY": client.api_key}
    installed = subprocess.run([BIN, "install", "tollgate/summarize", "--json"], env=env, capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    run = httpx.post(
        f"{url}/v1/skills/summarize",
        json={"input": {"text": "Traces link a skill run to its model calls.", "model": "acme/small"}},
        headers={"Authorization": f"Bearer {client.api_key}", "traceparent": f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"},
    )
    assert run.status_code == 200, run.text
    model_call = run.json()["service"]["model_calls"][0]
    trace_id = bytes.fromhex(TRACE_ID)

    def spans(c):
        return [s for s in c.spans if s.trace_id == trace_id]

    def the_model_call(c):
        return [s for s in spans(c) if attrs(s).get("tollgate.request.id") == model_call["request_id"]]

    collector.wait(lambda c: the_model_call(c) and any(s.name == "POST /v1/skills/summarize" for s in spans(c)))
    skill_run = next(s for s in spans(collector) if s.name == "POST /v1/skills/summarize")
    chat = the_model_call(collector)[0]
    assert chat.parent_span_id == skill_run.span_id, "the model call is a child of the skill run"
    a = attrs(chat)
    assert a["gen_ai.provider.name"] == "acme"
    assert a["tollgate.cost.nano_usd"] == int(model_call["cost_usd"].replace(".", ""))
    assert a["tollgate.cost.nano_usd"] > 0
