"""Fallback through the official OpenAI SDK: the `models` candidate list goes in
`extra_body`, and the mock's scripted faults make the primary fail."""

from decimal import Decimal


def cost(body) -> Decimal:
    return Decimal(body["service"]["cost_usd"])


def test_a_rate_limited_primary_falls_over_invisibly(client):
    completion = client.chat.completions.create(
        model="primary/limited",
        messages=[{"role": "user", "content": "fall back"}],
        extra_body={"models": ["acme/small"]},
    )
    body = completion.to_dict()
    assert completion.choices[0].message.content == "You said: fall back"
    assert body["provider"] == "acme"
    attempts = body["service"]["attempts"]
    assert [a["outcome"] for a in attempts] == ["upstream_rate_limited", "success"]
    assert [a["status"] for a in attempts] == [429, 200]
    assert sum(Decimal(a["cost_usd"]) for a in attempts) == cost(body)


def test_a_stream_cut_midway_continues_as_one_answer(client):
    stream = client.chat.completions.create(
        model="primary/cutter",
        stream=True,
        messages=[{"role": "user", "content": "one two three four five"}],
        extra_body={"models": ["acme/small"]},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "You said: one two three four five"
    final = chunks[-1].to_dict()
    assert final["provider"] == "acme"
    attempts = final["service"]["attempts"]
    assert [a["provider"] for a in attempts] == ["primary", "acme"]
    assert all(Decimal(a["cost_usd"]) > 0 for a in attempts)
    assert sum(Decimal(a["cost_usd"]) for a in attempts) == cost(final) == Decimal(str(final["usage"]["cost"]))
