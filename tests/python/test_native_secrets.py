"""Provider credentials never reach callers or logs, whichever native adapter serves.

A gateway of its own, logging at debug level to a file, fronts the mock with a
distinctive key per native provider. Each provider answers successes, streams and
upstream 401/429/500 errors; then no response body and no log line may contain
any key (nor the AWS secret, which only ever feeds the SigV4 signature).
"""

import json
import os
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import BIN, free_port, wait_healthy, MOCK_BIN

KEYS = {
    "anthropic": "sk-ant-SECRET-anthropic-0001",
    "gemini": "AIzaSECRET-gemini-0002",
    "cohere": "co-SECRET-cohere-0003",
    "bedrock": "AKIDSECRETBEDROCK0004:SECRET-bedrock-aws-secret-0004",
    "azure-openai": "SECRET-azure-0005",
}
FAULTS = ["fail-401", "fail-429", "fail-500"]


def provider_block(name: str, base_url: str) -> str:
    models = ", ".join(
        f'{{ id = "{m}", upstream = "{m}", input_price_per_mtok = "1", output_price_per_mtok = "2" }}'
        for m in ["small", *FAULTS]
    )
    return f'[providers.{name}]\nbase_url = "{base_url}"\napi_key = "{KEYS[name]}"\nmodels = [{models}]\n'


@pytest.fixture(scope="module")
def gateway():
    tmp = tempfile.TemporaryDirectory()
    mock_port, gw_port = free_port(), free_port()
    mock_url, url = f"http://127.0.0.1:{mock_port}", f"http://127.0.0.1:{gw_port}"
    procs = [subprocess.Popen([MOCK_BIN, "--listen", f"127.0.0.1:{mock_port}"])]
    wait_healthy(mock_url, procs[0])
    bases = {
        "anthropic": mock_url,
        "gemini": f"{mock_url}/v1beta",
        "cohere": mock_url,
        "bedrock": mock_url,
        "azure-openai": f"{mock_url}?api-version=2024-10-21",
    }
    config = Path(tmp.name) / "tollgate.toml"
    config.write_text(
        f'listen = "127.0.0.1:{gw_port}"\ndata_dir = "{tmp.name}/data"\n'
        + "".join(provider_block(name, base) for name, base in bases.items())
    )
    out = subprocess.run(
        [BIN, "admin", "create-account", "--config", str(config), "--name", "s", "--credit-usd", "5", "--json"],
        check=True, capture_output=True, text=True,
    )
    account = json.loads(out.stdout)
    log_path = Path(tmp.name) / "gateway.log"
    log = open(log_path, "w")
    env = {**os.environ, "RUST_LOG": "debug"}
    gw = subprocess.Popen([BIN, "serve", "--config", str(config)], stdout=log, stderr=subprocess.STDOUT, env=env)
    procs.append(gw)
    wait_healthy(url, gw)
    yield url, account["api_key"], log_path
    for p in procs:
        p.terminate()
        p.wait(timeout=10)
    log.close()
    tmp.cleanup()


def post(url: str, api_key: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"authorization": f"Bearer {api_key}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def secrets() -> list[str]:
    parts = [key for key in KEYS.values()]
    parts += [part for key in KEYS.values() for part in key.split(":") if ":" in key]
    return parts


def test_no_key_reaches_a_caller_or_the_log(gateway):
    url, api_key, log_path = gateway
    answers = []
    for provider in KEYS:
        for stream in (False, True):
            status, text = post(url, api_key, {
                "model": f"{provider}/small",
                "messages": [{"role": "user", "content": "hello there"}],
                "stream": stream,
            })
            assert status == 200, (provider, stream, text)
            answers.append(text)
        for fault in FAULTS:
            status, text = post(url, api_key, {
                "model": f"{provider}/{fault}",
                "messages": [{"role": "user", "content": "hello"}],
            })
            assert status >= 400, (provider, fault, text)
            assert "error" in json.loads(text), text
            answers.append(text)
    log = log_path.read_text()
    # The log is really written at debug level, so its silence means something.
    assert "DEBUG" in log or '"level":"DEBUG"' in log, log[:2000]
    for secret in secrets():
        for text in answers:
            assert secret not in text, f"a response holds a provider secret: {text[:300]}"
        assert secret not in log, "the gateway log holds a provider secret"
