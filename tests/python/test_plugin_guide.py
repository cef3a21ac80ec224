"""docs/writing-a-provider-plugin.md, step by step: scaffold a provider adapter,
build it to wasm, publish it, install it for a provider on the mock upstream
(without restarting the gateway), and get an answer through it with the
official openai SDK."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from openai import OpenAI

from conftest import BIN, ROOT, free_port, wait_healthy


def tollgate(*args: str, env: dict, cwd: Path | None = None) -> str:
    out = subprocess.run([BIN, *args], env=env, cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"tollgate {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


@pytest.fixture()
def workdir():
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def test_guide_end_to_end(stack, workdir):
    if shutil.which("cargo") is None:
        pytest.fail("cargo is needed to build the plugin")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGO_") and k != "RUSTFLAGS"}

    # 1. Template: outside this repository's workspace.
    plugin = workdir / "echo-adapter"
    tollgate("plugin", "new", "echo-adapter", "--namespace", "acme", "--dir", str(plugin), env=env)
    assert (plugin / "tollgate-package.json").is_file()

    # 2. Build to wasm (a shared target dir keeps reruns fast).
    build_env = {**env, "CARGO_TARGET_DIR": str(ROOT / "target" / "plugin-guide")}
    built = subprocess.run(
        ["cargo", "build", "--release", "--target", "wasm32-wasip2"],
        cwd=plugin, env=build_env, capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stderr
    wasm = ROOT / "target" / "plugin-guide" / "wasm32-wasip2" / "release" / "echo_adapter.wasm"
    assert wasm.is_file()

    # A gateway whose operator workspace may install; provider on the mock upstream.
    config = workdir / "tollgate.toml"
    port = free_port()
    config.write_text(f'listen = "127.0.0.1:{port}"\ndata_dir = "{workdir}/data"\n')
    account = json.loads(tollgate("admin", "create-account", "--config", str(config),
                                  "--name", "guide", "--credit-usd", "5", "--json", env=env))
    # 5. Configure (the provider must exist before its adapter is installed).
    config.write_text(config.read_text() + f"""
[providers.my-provider]
base_url = "{stack.mock_url}/v1"
api_key = "sk-upstream-key"
[[providers.my-provider.models]]
id = "small"
input_price_per_mtok = "0.50"
output_price_per_mtok = "1.50"

[registry]
operator_workspaces = ["{account["workspace_id"]}"]
""")
    gateway = subprocess.Popen([BIN, "serve", "--config", str(config)], env={**env, "RUST_LOG": "warn"},
                               stdout=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, gateway)
        client_env = {**env, "TOLLGATE_URL": url, "TOLLGATE_API_KEY": account["api_key"]}
        client = OpenAI(base_url=f"{url}/v1", api_key=account["api_key"], max_retries=0)

        before = client.chat.completions.create(
            model="my-provider/small", messages=[{"role": "user", "content": "hi"}])
        assert before.system_fingerprint != "echo-adapter/0.1.0"

        # 3. Publish.
        tollgate("namespaces", "create", "acme", env=client_env)
        published = tollgate("package", "publish", str(wasm), env=client_env, cwd=plugin)
        assert "published acme/echo-adapter@0.1.0" in published
        assert "0.1.0" in tollgate("package", "show", "acme/echo-adapter", env=client_env)
        again = subprocess.run([BIN, "package", "publish", str(wasm)], env=client_env, cwd=plugin,
                               capture_output=True, text=True)
        assert again.returncode != 0 and "version_exists" in again.stderr

        # 4. Install, with the gateway running.
        installed = tollgate("plugin", "install", "acme/echo-adapter@0.1.0", "--provider", "my-provider",
                             env=client_env)
        assert "acme/echo-adapter@0.1.0" in installed

        # 6. First request through the new adapter, plain and streamed.
        answer = client.chat.completions.create(
            model="my-provider/small", messages=[{"role": "user", "content": "hello plugin"}])
        assert answer.system_fingerprint == "echo-adapter/0.1.0"
        assert answer.choices[0].message.content
        raw = answer.model_dump()
        assert raw["service"]["attempts"][0]["adapter"] == "acme/echo-adapter@0.1.0"

        chunks = list(client.chat.completions.create(
            model="my-provider/small", messages=[{"role": "user", "content": "stream it"}], stream=True))
        assert chunks and all(c.system_fingerprint == "echo-adapter/0.1.0" for c in chunks if c.choices)
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
