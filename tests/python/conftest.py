"""Starts the real `tollgate` binary twice: once as the mock upstream, once as the
gateway (with a temp data dir), and creates an account. Tests then talk to the
gateway with the official OpenAI SDK, changing only base_url and api_key."""

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("TOLLGATE_BIN", str(ROOT / "target" / "debug" / "tollgate"))
# The fake provider is a program of its own, built beside the gateway.
# The fake Stripe in mock-upstream accepts any `sk_` key; the webhook secrets
# are the gateway's (the current one and one still accepted mid-rotation).
STRIPE_SECRET_KEY = "sk_test_tollgate"
STRIPE_WEBHOOK_SECRET = "whsec_tollgate_current"
STRIPE_OLD_WEBHOOK_SECRET = "whsec_tollgate_previous"
MOCK_BIN = os.environ.get("TOLLGATE_MOCK_BIN", str(Path(BIN).with_name("tollgate-mock-upstream")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not become healthy")


class Stack:
    def __init__(self) -> None:
        if not Path(BIN).exists():
            raise RuntimeError(f"{BIN} not found: build with `cargo build -p tollgate` first")
        self.dir = tempfile.TemporaryDirectory()
        mock_port, gw_port = free_port(), free_port()
        self.mock_url = f"http://127.0.0.1:{mock_port}"
        # A loopback port tests may serve on for components to call: the one
        # internal origin the operator allows (docs/components.md).
        self.internal_port = free_port()
        self.url = f"http://127.0.0.1:{gw_port}"
        self.procs = []
        mock = subprocess.Popen([MOCK_BIN, "--listen", f"127.0.0.1:{mock_port}"])
        self.procs.append(mock)
        wait_healthy(self.mock_url, mock)

        config = Path(self.dir.name) / "tollgate.toml"
        config.write_text(
            f"""
listen = "127.0.0.1:{gw_port}"
data_dir = "{self.dir.name}/data"
[providers.acme]
adapter = "openai-compatible"
base_url = "{self.mock_url}/v1"
api_key = "sk-anything"
[[providers.acme.models]]
id = "small"
input_price_per_mtok = "0.50"
output_price_per_mtok = "1.50"
context_length = 128000
[[providers.acme.models]]
id = "cached"
upstream = "small"
input_price_per_mtok = "0.50"
output_price_per_mtok = "1.50"
cache_read_price_per_mtok = "0.05"
context_length = 128000
[[providers.acme.models]]
id = "echo"
input_price_per_mtok = "1.00"
output_price_per_mtok = "2.00"
context_length = 128000
[[providers.acme.models]]
id = "embed"
operations = ["embeddings"]
input_price_per_mtok = "20"
output_price_per_mtok = "0"
[[providers.acme.models]]
id = "moderate"
operations = ["moderation"]
input_price_per_mtok = "20"
output_price_per_mtok = "0"
[[providers.acme.models]]
id = "image"
operations = ["image_generation", "image_edit"]
image_prices = {{ "standard/1024x1024" = "0.04", "1024x1024" = "0.08" }}
[[providers.acme.models]]
id = "tts"
operations = ["speech"]
speech_price_per_mchars = "15"
[[providers.acme.models]]
id = "whisper"
operations = ["transcription", "translation"]
audio_price_per_second = "0.0001"
[providers.azure-openai]
base_url = "{self.mock_url}?api-version=2024-10-21"
api_key = "test-key"
[providers.bedrock]
base_url = "{self.mock_url}"
api_key = "AKIDEXAMPLE:fake-secret-for-tests"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "throttled", upstream = "ratelimit-2", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
]
[providers.gemini]
base_url = "{self.mock_url}/v1beta"
api_key = "test-key"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "throttled", upstream = "ratelimit-2", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
]
[providers.anthropic]
base_url = "{self.mock_url}"
api_key = "test-key"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "throttled", upstream = "ratelimit-2", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
]
[providers.cohere]
base_url = "{self.mock_url}"
api_key = "test-key"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "throttled", upstream = "ratelimit-2", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
]
[billing.plans.metered]
request_fee_usd = "0.001"
[billing.stripe]
api_base = "{self.mock_url}"
secret_key = "{STRIPE_SECRET_KEY}"
webhook_secret = "{STRIPE_WEBHOOK_SECRET}"
previous_webhook_secrets = ["{STRIPE_OLD_WEBHOOK_SECRET}"]
[providers.primary]
base_url = "{self.mock_url}/v1"
api_key = "sk-primary"
models = [
  {{ id = "limited", upstream = "fail-429", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "limited-embed", upstream = "fail-429", operations = ["embeddings"], input_price_per_mtok = "1", output_price_per_mtok = "0" }},
  {{ id = "cutter", upstream = "cut-3", input_price_per_mtok = "1", output_price_per_mtok = "2" }},
  {{ id = "pro", upstream = "gpt-9-pro", adapter = "openai-responses", input_price_per_mtok = "15", output_price_per_mtok = "120" }},
]
[routing.groups.acme-pair]
strategy = "lowest-cost"
deployments = [{{ model = "acme/echo" }}, {{ model = "acme/small" }}]
[components]
allow_internal_origins = ["http://127.0.0.1:{self.internal_port}"]
"""
        )
        out = subprocess.run(
            [BIN, "admin", "create-account", "--config", str(config), "--name", "py", "--credit-usd", "5", "--json"],
            check=True,
            capture_output=True,
            text=True,
        )
        account = json.loads(out.stdout)
        self.api_key = account["api_key"]
        self.workspace_id = account["workspace_id"]
        # Every test file shares this workspace: on Enterprise (no monthly request or
        # endpoint limit, no fee) Free's limits don't bind across the whole suite.
        self.admin("plan", "set", "--workspace", self.workspace_id, "--plan", "enterprise")
        gw = subprocess.Popen([BIN, "serve", "--config", str(config)], env={**os.environ, "RUST_LOG": "warn"})
        self.procs.append(gw)
        wait_healthy(self.url, gw)

    def admin(self, *args: str) -> str:
        """Runs `tollgate admin ARGS` against this stack's configuration; returns stdout."""
        config = Path(self.dir.name) / "tollgate.toml"
        out = subprocess.run([BIN, "admin", *args, "--config", str(config)], check=True, capture_output=True, text=True)
        return out.stdout

    def last_upstream_request(self, path_prefix: str) -> dict:
        """The newest request the mock recorded on a path starting with `path_prefix`."""
        with urllib.request.urlopen(f"{self.mock_url}/__mock/requests") as r:
            sent = [req for req in json.load(r) if req["path"].startswith(path_prefix)]
        assert sent, f"no request reached the mock's {path_prefix} route"
        return sent[-1]

    def close(self) -> None:
        for p in self.procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.dir.cleanup()


@pytest.fixture(scope="session")
def stack():
    s = Stack()
    yield s
    s.close()


@pytest.fixture()
def client(stack):
    from openai import OpenAI

    return OpenAI(base_url=f"{stack.url}/v1", api_key=stack.api_key, max_retries=0)
