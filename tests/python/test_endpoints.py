"""The official OpenAI Python SDK, unmodified, on the endpoints besides chat
(docs/endpoints.md): each answer carries the provider and the exact cost, and
the wallet moves by exactly their sum."""

import json
from decimal import Decimal

import openai
import pytest


def posted(stack) -> Decimal:
    return Decimal(json.loads(stack.admin("wallet", "--workspace", stack.workspace_id, "--json"))["posted_usd"])


def cost(answer) -> Decimal:
    body = answer.to_dict()
    shown = Decimal(body["service"]["cost_usd"])
    # usage.cost is written exactly: the same number as service.cost_usd.
    assert Decimal(str(body["usage"]["cost"])) == shown
    assert body["provider"] == "acme"
    assert body["service"]["request_id"].startswith("req_")
    return shown


def test_embeddings_float_and_base64_and_moderations_bill_exactly(client, stack):
    before = posted(stack)
    # Float, as asked.
    floats = client.embeddings.create(model="acme/embed", input=["hello world", "three words here"], encoding_format="float")
    assert [d.index for d in floats.data] == [0, 1]
    assert len(floats.data[0].embedding) == 8
    assert floats.usage.prompt_tokens == 5
    # 5 tokens at 20 USD per million.
    assert cost(floats) == Decimal("0.0001")
    # The SDK's default asks for base64 and decodes it: the same vectors.
    decoded = client.embeddings.create(model="acme/embed", input=["hello world", "three words here"])
    assert len(decoded.data) == 2
    for a, b in zip(decoded.data[0].embedding, floats.data[0].embedding):
        assert abs(a - b) < 1e-6
    moderation = client.moderations.create(model="acme/moderate", input=["a calm sentence", "flagme please"])
    assert [r.flagged for r in moderation.results] == [False, True]
    total = cost(floats) + cost(decoded) + cost(moderation)
    assert before - posted(stack) == total


def test_fallback_and_refusals(client, stack):
    # The first candidate answers 429; the second answers, billed once.
    answer = client.embeddings.create(
        model="primary/limited-embed", input="fall back", extra_body={"models": ["acme/embed"]}
    )
    attempts = answer.to_dict()["service"]["attempts"]
    assert [a["outcome"] for a in attempts] == ["upstream_rate_limited", "success"]
    assert cost(answer) == Decimal("0.00004")
    # A chat model is not an embedding model: refused with the documented shape.
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="acme/small", input="x")
    assert refused.value.code == "operation_not_supported"


def wav(seconds: int, path) -> None:
    """A silent mono 16 kHz WAV of `seconds`, written with the standard library."""
    import wave

    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(b"\0\0" * 16000 * seconds)


def test_images_speech_and_transcriptions_bill_exactly(client, stack, tmp_path):
    before = posted(stack)
    images = client.images.generate(model="acme/image", prompt="a lighthouse", n=2, size="1024x1024", quality="standard")
    assert len(images.data) == 2 and images.data[0].b64_json
    # Two standard images at 0.04 USD.
    assert cost(images) == Decimal("0.08")

    # Speech, streamed to a file: 11 characters at 15 USD per million.
    out = tmp_path / "hello.mp3"
    with client.audio.speech.with_streaming_response.create(
        model="acme/tts", voice="alloy", input="hello world"
    ) as response:
        response.stream_to_file(out)
        assert response.headers["x-tollgate-provider"] == "acme"
        speech_cost = Decimal(response.headers["x-tollgate-cost-usd"])
        assert response.headers["x-request-id"].startswith("req_")
    assert out.read_bytes().startswith(b"ID3")
    assert speech_cost == Decimal("0.000165")

    # A 3-second WAV made here: 3 s at 0.0001 USD per second.
    audio = tmp_path / "hello.wav"
    wav(3, audio)
    with audio.open("rb") as f:
        transcript = client.audio.transcriptions.create(model="acme/whisper", file=f)
    assert "hello.wav" in transcript.text
    assert cost(transcript) == Decimal("0.0003")
    assert before - posted(stack) == cost(images) + speech_cost + cost(transcript)


def test_files_and_batches(client, stack, tmp_path):
    lines = [
        {"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "acme/small", "messages": [{"role": "user", "content": f"question {i}"}]}}
        for i in range(5)
    ]
    path = tmp_path / "batch.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    before = posted(stack)
    with path.open("rb") as f:
        uploaded = client.files.create(file=f, purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == path.stat().st_size
    batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    import time

    deadline = time.time() + 60
    while batch.status not in ("completed", "failed", "cancelled", "expired"):
        assert time.time() < deadline, batch
        time.sleep(0.2)
        batch = client.batches.retrieve(batch.id)
    assert batch.status == "completed"
    assert batch.request_counts.total == 5 and batch.request_counts.completed == 5
    results = [json.loads(line) for line in client.files.content(batch.output_file_id).text.splitlines()]
    assert sorted(r["custom_id"] for r in results) == [f"q{i}" for i in range(5)]
    answers = [r["response"]["body"] for r in results]
    assert all(a["provider"] == "acme" for a in answers)
    assert answers[0]["choices"][0]["message"]["content"].startswith("You said: question")
    # Each line was billed as a request of its own: the wallet moved by their sum.
    total = sum(Decimal(a["service"]["cost_usd"]) for a in answers)
    assert before - posted(stack) == total


def test_native_adapters_serve_their_operations(client, stack):
    """Gemini, Cohere and Azure OpenAI translate the operations natively
    (WIT 0.3.0), priced from the catalog's table."""
    for model in ("gemini/gemini-embedding-001", "cohere/embed-v4.0", "azure-openai/text-embedding-3-small"):
        floats = client.embeddings.create(model=model, input=["hello world", "again"], encoding_format="float")
        decoded = client.embeddings.create(model=model, input=["hello world", "again"])
        assert len(floats.data) == 2 and len(floats.data[0].embedding) == 8, model
        for a, b in zip(decoded.data[0].embedding, floats.data[0].embedding):
            assert abs(a - b) < 1e-6, model
        body = floats.to_dict()
        assert body["provider"] == model.split("/")[0]
        assert Decimal(body["service"]["cost_usd"]) > 0, model
    # Cohere's rerank, and an Imagen model priced per image.
    reranked = client.post(
        "/rerank",
        body={"model": "cohere/rerank-v3.5", "query": "tea", "documents": ["coffee", "green tea", "tea time"]},
        cast_to=object,
    )
    assert [r["index"] for r in reranked["results"]][:1] in ([1], [2])
    assert Decimal(reranked["service"]["cost_usd"]) == Decimal("0.002")
    images = client.images.generate(model="gemini/imagen-3.0-generate-001", prompt="a lighthouse", n=2)
    assert len(images.data) == 2 and images.data[0].b64_json
    assert Decimal(images.to_dict()["service"]["cost_usd"]) == Decimal("0.08")


def test_bedrock_embeddings_and_images(client):
    """Bedrock's InvokeModel, SigV4-signed by the gateway: Titan embeddings
    (one text a call) and a Titan image model priced per image."""
    titan = client.embeddings.create(model="bedrock/amazon.titan-embed-text-v2:0", input="hello world", encoding_format="float")
    assert len(titan.data[0].embedding) == 8 and titan.usage.prompt_tokens == 2
    assert titan.to_dict()["provider"] == "bedrock"
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="bedrock/amazon.titan-embed-text-v2:0", input=["one", "two"])
    images = client.images.generate(model="bedrock/amazon.titan-image-generator-v1", prompt="a boat", n=2)
    assert len(images.data) == 2
    assert Decimal(images.to_dict()["service"]["cost_usd"]) == Decimal("0.016")
