"""Routing through the official OpenAI SDK: a model group is a model the SDK
lists and retrieves, and OpenRouter's `provider` preferences ride in
`extra_body` (docs/routing.md)."""

import openai
import pytest


def test_a_group_is_a_model_the_sdk_lists_and_retrieves(client):
    group = client.models.retrieve("acme-pair").to_dict()
    assert group["owned_by"] == "tollgate"
    assert group["service"]["group"]["strategy"] == "lowest-cost"
    assert [d["model"] for d in group["service"]["group"]["deployments"]] == ["acme/echo", "acme/small"]
    # Priced at its dearest deployment: what the wallet holds for.
    assert group["pricing"]["input_per_mtok"] == "1.000000"
    assert "acme-pair" in {m.id for m in client.models.list()}


def test_the_cheapest_deployment_answers_and_the_answer_says_why(client):
    completion = client.chat.completions.create(
        model="acme-pair", messages=[{"role": "user", "content": "route me"}]
    )
    body = completion.to_dict()
    assert body["model"] == "acme/small"
    route = body["service"]["route"]
    assert route["strategy"] == "lowest-cost" and route["group"] == "acme-pair"
    assert route["order"] == ["acme/small", "acme/echo"]
    assert route["reason"].startswith("lowest price")


def test_provider_preferences_ride_in_extra_body(client, stack):
    completion = client.chat.completions.create(
        model="acme-pair",
        messages=[{"role": "user", "content": "route me"}],
        extra_body={"provider": {"order": ["acme/echo"], "allow_fallbacks": False}},
    )
    body = completion.to_dict()
    assert body["model"] == "acme/echo"
    assert body["service"]["route"]["order"] == ["acme/echo"]

    stream = client.chat.completions.create(
        model="acme-pair",
        stream=True,
        messages=[{"role": "user", "content": "stream me"}],
        extra_body={"provider": {"sort": "price"}, "session_id": "py-session"},
    )
    final = list(stream)[-1].to_dict()
    assert final["model"] == "acme/small"
    assert final["service"]["route"]["strategy"] == "sort:price"
    # The session names no upstream field: the gateway keeps it.
    sent = stack.last_upstream_request("/v1/chat/completions")["body"]
    assert "session_id" not in sent and "provider" not in sent


def test_preferences_that_leave_no_candidate_are_a_400(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="acme-pair",
            messages=[{"role": "user", "content": "too dear"}],
            extra_body={"provider": {"max_price": {"prompt": 0.1}}},
        )
    error = refused.value.body
    assert error["code"] == "no_eligible_provider"
    assert error["param"] == "provider"
    with pytest.raises(openai.BadRequestError) as unknown:
        client.chat.completions.create(
            model="acme-pair",
            messages=[{"role": "user", "content": "policy"}],
            extra_body={"provider": {"data_collection": "deny"}},
        )
    assert "data_collection" in unknown.value.body["message"]
