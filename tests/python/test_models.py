"""`/v1/models` through the official OpenAI SDK: the whole priced catalog,
Tollgate's extra fields, filters and their errors, and a bring-your-own provider
that is configured only in tollgate.toml (`acme`) serving traffic and being listed."""

import subprocess
from pathlib import Path

import openai
import pytest
from conftest import BIN


def test_the_catalog_has_130_providers(stack):
    # The promise is about what can be configured; the list shows priced models only.
    out = subprocess.run(
        [BIN, "catalog", "providers", "--config", str(Path(stack.dir.name) / "tollgate.toml")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line]
    assert len(rows) >= 130, out
    assert out.splitlines()[-1] == f"{len(rows)} providers"
    by_id = {row[0]: row for row in rows}
    assert by_id["openai"][1] == "OpenAI" and "OPENAI_API_KEY" in by_id["openai"][3]
    assert by_id["acme"][3] == "available"


def test_list_covers_the_catalog_and_keeps_the_sdk_shape(client):
    models = list(client.models.list())
    # Every model is a provider's `provider/model`, or a group of the gateway's own.
    assert all(m.object == "model" and ("/" in m.id or m.owned_by == "tollgate") for m in models)
    assert len(models) > 1000
    by_id = {m.id: m.to_dict() for m in models}
    unpriced = [id for id, m in by_id.items() if m["pricing"] is None]
    assert not unpriced, unpriced
    openai_4o = by_id["openai/gpt-4o"]
    assert openai_4o["service"]["provider_name"] == "OpenAI"
    assert "tools" in openai_4o["service"]["capabilities"]
    assert openai_4o["service"]["available"] is False
    assert "OPENAI_API_KEY" in openai_4o["service"]["unavailable_reason"]
    assert openai_4o["pricing"]["input_per_mtok"] == "2.500000"
    source = openai_4o["service"]["pricing_source"]
    assert source["name"].startswith("LiteLLM") and source["key"] == "gpt-4o"
    assert source["release"].startswith("litellm") and len(source["retrieved"]) == 10
    assert by_id["acme/small"]["service"]["pricing_source"] == {"name": "config"}
    # A local server is listed but off until the operator names it in [providers].
    ollama = by_id["ollama/llama3.2"]
    assert ollama["service"]["available"] is False
    assert "add [providers.ollama]" in ollama["service"]["unavailable_reason"]
    assert ollama["pricing"]["input_per_mtok"] == "0.000000"


def test_filters(client):
    only_acme = [m.id for m in client.models.list(extra_query={"provider": "acme"})]
    assert only_acme == ["acme/small", "acme/cached", "acme/echo", "acme/embed", "acme/moderate", "acme/image", "acme/tts", "acme/whisper"]
    two = {m.owned_by for m in client.models.list(extra_query={"provider": "acme,openai"})}
    assert two == {"acme", "openai"}
    available = list(client.models.list(extra_query={"available": "true"}))
    assert available and all(m.to_dict()["service"]["available"] for m in available)
    assert "openai/gpt-4o" not in {m.id for m in available}
    vision = list(client.models.list(extra_query={"capability": "vision", "provider": "openai,acme"}))
    assert vision and all(m.owned_by == "openai" for m in vision)


@pytest.mark.parametrize(
    "query,param",
    [({"provider": "no-such"}, "provider"), ({"available": "maybe"}, "available"), ({"capability": "x"}, "capability")],
)
def test_bad_filters_are_400(client, query, param):
    with pytest.raises(openai.BadRequestError) as raised:
        client.models.list(extra_query=query)
    error = raised.value.body
    assert raised.value.status_code == 400
    assert error["code"] == "invalid_request" and error["param"] == param


def test_bring_your_own_provider_serves_traffic_and_is_listed(client):
    # `acme` exists only in the test's tollgate.toml: an OpenAI-compatible
    # endpoint (the mock) with one priced model.
    listed = client.models.retrieve("acme/small").to_dict()
    assert listed["owned_by"] == "acme"
    assert listed["service"]["available"] is True
    assert listed["pricing"]["output_per_mtok"] == "1.500000"
    completion = client.chat.completions.create(model="acme/small", messages=[{"role": "user", "content": "byo works"}])
    assert completion.choices[0].message.content == "You said: byo works"
    assert completion.to_dict()["provider"] == "acme"
