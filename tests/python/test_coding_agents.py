"""The coding agents, unmodified, through `tollgate serve --demo` (issue 34).

Claude Code (`@anthropic-ai/claude-code`, on `/v1/messages`) and OpenAI's Codex
CLI (`@openai/codex`, on `/v1/responses`) are pinned in `tests/agents/` and
installed there by tests/run.sh (`npm ci`). Each runs with nothing changed but
the base URL, the key and the model: a plain prompt, a tool round trip (Claude
Code's Read tool; Codex's shell) and structured output; Claude Code also adds
the gateway as an MCP server (`claude mcp add --transport http`) and calls a
tool through it. The demo provider is
the project's mock upstream, in-process; since an agent's request body is not
the test's, the prompt scripts the mock (`<mock>{...}</mock>`, see
mock-upstream's crate docs): which tool to call with which arguments, or the
reply.

The agents talk to the gateway through a recording proxy here, which passes
every byte unchanged and keeps each answer's `usage.cost`; the wallet must move
by exactly their sum.
"""

import http.client
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import BIN, ROOT, free_port, wait_healthy

AGENTS = ROOT / "tests" / "agents" / "node_modules" / ".bin"
CLAUDE = AGENTS / "claude"
CODEX = AGENTS / "codex"
MODEL = "demo/small"

pytestmark = pytest.mark.skipif(
    not (CLAUDE.exists() and CODEX.exists()),
    reason="the coding agents are not installed: run `npm ci` in tests/agents (tests/run.sh does)",
)


def answer_costs(body: bytes) -> list[Decimal]:
    """Every `usage.cost` an answer states: a JSON body's, or the closing event
    of an SSE stream (`message_delta`, `response.completed`, …)."""
    costs = []
    texts = [body.decode()]
    if b"\ndata: " in b"\n" + body:
        texts = [line[6:] for line in body.decode().splitlines() if line.startswith("data: ")]
    for text in texts:
        try:
            event = json.loads(text, parse_float=Decimal)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        for holder in (event, event.get("response")):
            usage = holder.get("usage") if isinstance(holder, dict) else None
            if isinstance(usage, dict) and "cost" in usage:
                costs.append(Decimal(usage["cost"]))
    return costs


class RecordingProxy:
    """Relays requests to the gateway unchanged (streams as they come) and
    records each exchange: method, path, status and the answer's costs."""

    def __init__(self, target: str) -> None:
        self.target = urlsplit(target)
        self.exchanges: list[dict] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args) -> None:
                pass

            def relay(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                upstream = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "accept-encoding")}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(name, value)
                self.send_header("connection", "close")
                self.end_headers()
                answer = b""
                while chunk := response.read1(65536):
                    answer += chunk
                    self.wfile.write(chunk)
                    self.wfile.flush()
                upstream.close()
                request = json.loads(body) if body.startswith(b"{") else None
                proxy.exchanges.append(
                    {"method": self.command, "path": self.path, "status": response.status,
                     "request": request, "answer": answer, "costs": answer_costs(answer)}
                )

            do_GET = do_POST = do_HEAD = relay

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def cost(self) -> Decimal:
        return sum((c for e in self.exchanges for c in e["costs"]), Decimal(0))

    def close(self) -> None:
        self.server.shutdown()


class DemoGateway:
    """`tollgate serve --demo` in a temp dir: the in-process demo provider and
    a demo workspace with credit, whose key the first start prints."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.config = Path(self.dir.name) / "tollgate.toml"
        self.config.write_text(f'listen = "127.0.0.1:{port}"\ndata_dir = "{self.dir.name}/data"\n')
        self.log = open(Path(self.dir.name) / "serve.out", "w+")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--demo", "--config", str(self.config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        wait_healthy(self.url, self.proc)
        deadline = time.time() + 30
        while time.time() < deadline:
            text = Path(self.log.name).read_text()
            key = re.search(r"API key:\s+(tg_\S+)", text)
            workspace = re.search(r"workspace:\s+(\S+)", text)
            if key and workspace:
                self.api_key, self.workspace_id = key.group(1), workspace.group(1)
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"serve --demo printed no key:\n{Path(self.log.name).read_text()}")

    def posted(self) -> Decimal:
        out = subprocess.run(
            [BIN, "admin", "wallet", "--config", str(self.config), "--workspace", self.workspace_id, "--json"],
            check=True, capture_output=True, text=True,
        )
        return Decimal(json.loads(out.stdout)["posted_usd"])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        self.dir.cleanup()


@pytest.fixture(scope="module")
def demo():
    gateway = DemoGateway()
    yield gateway
    gateway.close()


@pytest.fixture()
def proxy(demo):
    recording = RecordingProxy(demo.url)
    yield recording
    recording.close()


@pytest.fixture()
def workdir():
    """The agent's working directory, with its home directories beside it in
    one temp dir that is removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="agent-"))
    path = base / "work"
    path.mkdir()
    (path / "hello.txt").write_text("the tollgate fixture line\n")
    yield path
    shutil.rmtree(base, ignore_errors=True)


def run_agent(argv: list, env: dict, cwd: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    print(f"$ {argv[0]} … exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-4000:]}")
    return done


def settled(demo: DemoGateway, before: Decimal, proxy: RecordingProxy) -> None:
    """The wallet moved by exactly the sum of the answers' costs (settlement is
    committed before an answer ends, but allow the writer a moment)."""
    spent = proxy.cost()
    assert spent > 0, [(e["path"], e["status"]) for e in proxy.exchanges]
    deadline = time.time() + 5
    while demo.posted() != before - spent and time.time() < deadline:
        time.sleep(0.1)
    assert demo.posted() == before - spent


def models_answered(proxy: RecordingProxy, path: str) -> set:
    """`model` in every answer on `path`: a whole body's, and in a stream each
    chunk's, `message_start`'s `message.model` and the Responses events'
    `response.model`."""
    seen = set()
    for exchange in proxy.exchanges:
        if not exchange["path"].startswith(path) or exchange["status"] != 200:
            continue
        answer = exchange["answer"].decode()
        texts = [line[6:] for line in answer.splitlines() if line.startswith("data: ")] or [answer]
        for text in texts:
            try:
                event = json.loads(text)
            except ValueError:
                continue
            for holder in (event, event.get("message"), event.get("response")):
                if isinstance(holder, dict) and "model" in holder:
                    seen.add(holder["model"])
    return seen


# ---------------------------------------------------------------- Claude Code


def claude_env(demo: DemoGateway, proxy: RecordingProxy, home: Path) -> dict:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        # Base URL, key and model: all that is set.
        "ANTHROPIC_BASE_URL": proxy.url,
        "ANTHROPIC_API_KEY": demo.api_key,
        "ANTHROPIC_MODEL": MODEL,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": MODEL,
        # No telemetry, update checks or other traffic: the machine is offline.
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def claude(prompt: str, demo, proxy, workdir, *extra: str) -> subprocess.CompletedProcess:
    env = claude_env(demo, proxy, workdir.parent / "claude-home")
    return run_agent([str(CLAUDE), "-p", prompt, *extra], env, workdir)


def test_claude_code_plain_prompt(demo, proxy, workdir):
    before = demo.posted()
    done = claude('Say hello. <mock>{"reply": "Hello from the demo provider."}</mock>', demo, proxy, workdir)
    assert done.returncode == 0, done.stderr
    assert "Hello from the demo provider." in done.stdout
    messages = [e for e in proxy.exchanges if e["path"].startswith("/v1/messages") and "count_tokens" not in e["path"]]
    assert messages and all(e["status"] == 200 for e in messages), [(e["path"], e["status"]) for e in messages]
    # Claude Code's mid-conversation system message got through (issue 34).
    assert models_answered(proxy, "/v1/messages") == {MODEL}
    settled(demo, before, proxy)


def test_claude_code_reads_a_file(demo, proxy, workdir):
    before = demo.posted()
    script = json.dumps({"tool": "Read", "arguments": {"file_path": str(workdir / "hello.txt")}})
    done = claude(f"What does hello.txt say? <mock>{script}</mock>", demo, proxy, workdir, "--allowedTools", "Read")
    assert done.returncode == 0, done.stderr
    # The mock answers the tool result with `Tool result: <what Read returned>`.
    assert "Tool result:" in done.stdout and "the tollgate fixture line" in done.stdout
    settled(demo, before, proxy)


def test_claude_code_structured_output(demo, proxy, workdir):
    before = demo.posted()
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    # Claude Code asks for the result through its StructuredOutput tool.
    script = json.dumps({"tool": "StructuredOutput", "arguments": {"city": "Lisbon"}})
    done = claude(f"Name a city. <mock>{script}</mock>", demo, proxy, workdir,
                  "--json-schema", json.dumps(schema), "--output-format", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result.get("structured_output") == {"city": "Lisbon"}, result
    settled(demo, before, proxy)


def test_claude_code_lists_and_calls_a_gateway_tool_over_mcp(demo, proxy, workdir):
    """`claude mcp add --transport http … --header "Authorization: Bearer …"`
    (docs/mcp.md), then Claude Code lists the gateway's MCP tools and calls
    the calculator (`mcp__tollgate__calc__evaluate`) when the mock asks."""
    env = {**os.environ, "TOLLGATE_URL": demo.url, "TOLLGATE_API_KEY": demo.api_key}
    installed = subprocess.run([BIN, "install", "tollgate/calculator", "--name", "calc", "--json"],
                               env=env, capture_output=True, text=True)
    assert installed.returncode == 0 or "already" in installed.stdout + installed.stderr, installed.stderr
    agent_env = claude_env(demo, proxy, workdir.parent / "claude-home")
    added = run_agent([str(CLAUDE), "mcp", "add", "--transport", "http", "tollgate", f"{demo.url}/v1/mcp",
                       "--header", f"Authorization: Bearer {demo.api_key}"], agent_env, workdir)
    assert added.returncode == 0, added.stderr
    listed = run_agent([str(CLAUDE), "mcp", "list"], agent_env, workdir)
    assert listed.returncode == 0 and "tollgate" in listed.stdout and "Connected" in listed.stdout, listed.stdout
    before = demo.posted()
    tool = "mcp__tollgate__calc__evaluate"
    script = json.dumps({"tool": tool, "arguments": {"expression": "6*7"}})
    done = claude(f"Compute six times seven. <mock>{script}</mock>", demo, proxy, workdir, "--allowedTools", tool)
    assert done.returncode == 0, done.stderr
    # The mock answers the tool result with `Tool result: <what the tool returned>`.
    assert "Tool result:" in done.stdout and "42" in done.stdout, done.stdout
    settled(demo, before, proxy)


# ---------------------------------------------------------------------- Codex


def codex_env(demo: DemoGateway, proxy: RecordingProxy, home: Path) -> dict:
    home.mkdir(parents=True, exist_ok=True)
    # A custom model provider: base URL, the key's variable and the wire API.
    (home / "config.toml").write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "tollgate"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\nenabled = false\n"
        "[model_providers.tollgate]\n"
        'name = "Tollgate"\n'
        f'base_url = "{proxy.url}/v1"\n'
        'env_key = "TOLLGATE_API_KEY"\n'
        'wire_api = "responses"\n'
    )
    return {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home), "TOLLGATE_API_KEY": demo.api_key}


def codex(prompt: str, demo, proxy, workdir, *extra: str) -> subprocess.CompletedProcess:
    env = codex_env(demo, proxy, workdir.parent / "codex-home")
    argv = [str(CODEX), "exec", "--skip-git-repo-check", "--ephemeral", *extra, prompt]
    return run_agent(argv, env, workdir)


def test_codex_plain_prompt(demo, proxy, workdir):
    before = demo.posted()
    done = codex('Say hello. <mock>{"reply": "Hello from the demo provider."}</mock>', demo, proxy, workdir)
    assert done.returncode == 0, done.stderr
    assert "Hello from the demo provider." in done.stdout
    responses = [e for e in proxy.exchanges if e["path"] == "/v1/responses"]
    assert responses and all(e["status"] == 200 for e in responses)
    # Codex's web_search was left out, and the answer says so.
    completed = [json.loads(line[6:]) for line in responses[0]["answer"].decode().splitlines()
                 if line.startswith("data: ") and '"response.completed"' in line]
    assert completed and "web_search" in " ".join(completed[0]["response"]["service"].get("warnings", []))
    assert models_answered(proxy, "/v1/responses") == {MODEL}
    settled(demo, before, proxy)


def test_codex_runs_a_shell_command(demo, proxy, workdir):
    before = demo.posted()
    script = json.dumps({"tool": "exec_command", "arguments": {"cmd": "cat hello.txt"}})
    done = codex(f"Show hello.txt. <mock>{script}</mock>", demo, proxy, workdir)
    assert done.returncode == 0, done.stderr
    assert "Tool result:" in done.stdout and "the tollgate fixture line" in done.stdout
    settled(demo, before, proxy)


def test_codex_structured_output(demo, proxy, workdir):
    before = demo.posted()
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}
    schema_file = workdir / "schema.json"
    schema_file.write_text(json.dumps(schema))
    # An empty script: no tool call, the answer in the schema's shape.
    done = codex("Name a city. <mock>{}</mock>", demo, proxy, workdir, "--output-schema", str(schema_file))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"city": "mock"}
    settled(demo, before, proxy)
