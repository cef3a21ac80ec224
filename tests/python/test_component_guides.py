"""docs/writing-a-tool-server.md and docs/writing-a-skill.md, step by step:
scaffold with `tollgate plugin new --kind …`, build to wasm, publish, install,
then call the tool over MCP with the official SDK, or run the skill over
HTTP against the mock upstream."""

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BIN, ROOT


def publisher(stack, prefix: str) -> tuple[dict, str]:
    """The environment the CLI and cargo run in (no outer cargo's variables),
    and a fresh namespace to publish in."""
    if shutil.which("cargo") is None:
        pytest.fail("cargo is needed to build the components")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGO_") and k != "RUSTFLAGS"}
    env = {**env, "TOLLGATE_URL": stack.url, "TOLLGATE_API_KEY": stack.api_key}
    namespace = f"{prefix}-{uuid.uuid4().hex[:8]}"
    tollgate(env, "namespaces", "create", namespace)
    return env, namespace


@pytest.fixture(scope="module")
def guide(stack):
    env, namespace = publisher(stack, "guide")
    with tempfile.TemporaryDirectory() as workdir:
        yield env, namespace, Path(workdir)


def tollgate(env: dict, *args: str, cwd: Path | None = None) -> str:
    out = subprocess.run([BIN, *args], env=env, cwd=cwd, capture_output=True, text=True)
    assert out.returncode == 0, f"tollgate {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def scaffold_build_publish(
    env: dict, namespace: str, workdir: Path, name: str, kind: str, source: Path | None = None, *install: str
) -> None:
    """The guides' steps; `source` replaces the template's `src/lib.rs`,
    `install` adds arguments to `tollgate install`."""
    crate = workdir / name
    # 1. Template.
    tollgate(env, "plugin", "new", name, "--kind", kind, "--namespace", namespace, "--dir", str(crate))
    manifest = json.loads((crate / "tollgate-package.json").read_text())
    assert manifest["kind"] == kind
    if source is not None:
        shutil.copy(source, crate / "src" / "lib.rs")
    # 2. Build (a shared target dir keeps reruns fast).
    target = ROOT / "target" / "plugin-guide"
    built = subprocess.run(
        ["cargo", "build", "--release", "--target", "wasm32-wasip2"],
        cwd=crate, env={**env, "CARGO_TARGET_DIR": str(target)}, capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stderr
    wasm = target / "wasm32-wasip2" / "release" / f"{name.replace('-', '_')}.wasm"
    # 3. Publish; 4. install.
    published = tollgate(env, "package", "publish", str(wasm), cwd=crate)
    assert f"published {namespace}/{name}@0.1.0" in published
    tollgate(env, "install", f"{namespace}/{name}", *install)


def test_the_tool_server_guide(stack, guide):
    env, namespace, workdir = guide
    scaffold_build_publish(env, namespace, workdir, "word-tools", "tool-server")

    # 5. Call it over MCP.
    async def call():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {stack.api_key}"})
        async with streamable_http_client(f"{stack.url}/v1/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                names = [tool.name for tool in (await session.list_tools()).tools]
                assert "word-tools__word_count" in names, names
                return await session.call_tool("word-tools__word_count", {"text": "one two three"})

    result = asyncio.run(call())
    assert result.is_error is False
    assert result.structured_content == {"words": 3}
    tollgate(env, "uninstall", "word-tools")


def test_the_skill_guide(stack, guide):
    env, namespace, workdir = guide
    scaffold_build_publish(env, namespace, workdir, "ask", "skill")

    # 3. Run it.
    answer = httpx.post(
        f"{stack.url}/v1/skills/ask",
        json={"input": {"question": "What is a gateway?", "model": "acme/small"}},
        headers={"Authorization": f"Bearer {stack.api_key}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert isinstance(body["output"]["answer"], str) and body["output"]["answer"]
    [model_call] = body["service"]["model_calls"]
    assert model_call["provider"] == "acme"
    assert body["service"]["cost_usd"] == model_call["cost_usd"]
    tollgate(env, "uninstall", "ask")


def test_the_guardrail_guide(stack, guide):
    """docs/writing-a-guardrail.md: the scaffolded guardrail, installed,
    refuses a prompt with its word (seen by the official `openai` client as
    a 400 `guardrail_denied`) and lets others through, marked in `service`."""
    import openai

    env, namespace, workdir = guide
    scaffold_build_publish(env, namespace, workdir, "word-guard", "guardrail")
    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=stack.api_key, max_retries=0)
    try:
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model="acme/small", messages=[{"role": "user", "content": "say the forbidden thing"}]
            )
        assert refused.value.code == "guardrail_denied"
        assert "word-guard" in refused.value.message
        answer = client.chat.completions.create(
            model="acme/small", messages=[{"role": "user", "content": "say something kind"}]
        )
        decisions = answer.model_extra["service"]["guardrails"]
        assert [d["guardrail"] for d in decisions] == ["word-guard", "word-guard"]
        assert [d["stage"] for d in decisions] == ["request", "response"]
    finally:
        tollgate(env, "uninstall", "word-guard")
