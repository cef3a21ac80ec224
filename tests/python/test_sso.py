"""Enforced SSO (docs/console.md, "Enforced SSO"), against a local OpenID Connect
provider (`oidc-provider-mock`): once an owner on a plan with `sso` requires it,
an API key no longer signs in to the console for that workspace, a console
session made with a key before is refused, and keys are created only from a
session signed in through the identity provider. The owner's existing key keeps
working. The OIDC code flow is driven over HTTP, as a browser would follow it."""

import json
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

from conftest import BIN, free_port, wait_healthy

oidc_mock = pytest.importorskip("oidc_provider_mock")

EMAIL = "alice@example.com"


@pytest.fixture(scope="module")
def idp():
    with oidc_mock.run_server_in_thread(require_nonce=True) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def gateway(idp):
    directory = tempfile.TemporaryDirectory()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = Path(directory.name) / "tollgate.toml"
    config.write_text(
        f"""
data_dir = "{directory.name}/data"
[[auth.oidc]]
name = "corp"
issuer = "{idp}"
client_id = "tollgate-console"
client_secret = "console-secret"
"""
    )

    def admin(*args):
        out = subprocess.run([BIN, "admin", *args, "--config", str(config)], check=True, capture_output=True, text=True)
        return out.stdout

    owner = json.loads(admin("create-account", "--name", "Alice", "--email", EMAIL, "--json"))
    other = json.loads(admin("create-account", "--name", "Bob", "--json"))
    admin("plan", "set", "--workspace", owner["workspace_id"], "--plan", "enterprise")
    proc = subprocess.Popen([BIN, "serve", "--listen", f"127.0.0.1:{port}", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(url, proc)
        yield {"url": url, "owner": owner, "other": other}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        directory.cleanup()


def rpc(url, method, params, key=None, session=None):
    """A control-plane extension method, with a key or a console session (cookie + CSRF)."""
    headers = {"A2A-Version": "1.0"}
    client = session or httpx.Client()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if session is not None:
        headers["X-CSRF-Token"] = session.csrf
    reply = client.post(f"{url}/a2a", headers=headers,
                        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
    if "error" in reply:
        return None, reply["error"]["data"][0]["reason"], reply["error"]["message"]
    return reply["result"], None, None


def key_session(url, key):
    client = httpx.Client()
    response = client.post(f"{url}/auth/session", json={"api_key": key})
    if response.status_code != 201:
        return response
    client.csrf = client.get(f"{url}/auth/session").json()["csrf_token"]
    return client


def oidc_session(url, idp, email):
    """The authorization-code flow, followed by hand: the gateway's login, the
    provider's consent form, the gateway's callback."""
    claims = {"email": email, "email_verified": True, "name": "Alice"}
    assert httpx.put(f"{idp}/users/{email}", json=claims).status_code == 204
    client = httpx.Client()
    login = client.get(f"{url}/auth/oidc/corp/login")
    assert login.status_code in (302, 303), login.text
    authorize = login.headers["location"]
    consent = client.post(authorize, data={"sub": email})
    assert consent.status_code in (302, 303), consent.text
    callback = client.get(urljoin(url, consent.headers["location"]))
    assert callback.status_code == 303, callback.text
    info = client.get(f"{url}/auth/session").json()
    client.csrf = info["csrf_token"]
    return client, info


def test_enforced_sso_refuses_key_sign_in_and_key_creation_until_signed_in_through_the_provider(gateway, idp):
    url, owner = gateway["url"], gateway["owner"]
    key = owner["api_key"]
    before = key_session(url, key)
    assert isinstance(before, httpx.Client), "a key signs in before SSO is required"

    # A plan without `sso` cannot require it.
    _, reason, message = rpc(url, "workspaces/sso.set", {"required": True}, key=gateway["other"]["api_key"])
    assert reason == "FAILED_PRECONDITION" and "sso" in message
    workspace, reason, _ = rpc(url, "workspaces/sso.set", {"required": True}, key=key)
    assert reason is None and workspace["require_sso"] is True

    refused = key_session(url, key)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "sso_required"
    # A session made with the key before is refused too.
    _, reason, message = rpc(url, "keys/list", {}, session=before)
    assert reason == "PERMISSION_DENIED" and "sso_required" in message
    # The key itself keeps working, but makes no keys.
    keys, reason, _ = rpc(url, "keys/list", {}, key=key)
    assert reason is None and keys["keys"]
    _, reason, message = rpc(url, "keys/create", {"name": "ci"}, key=key)
    assert reason == "PERMISSION_DENIED" and "sso_required" in message

    session, info = oidc_session(url, idp, EMAIL)
    assert info["kind"] == "oidc" and info["workspace_id"] == owner["workspace_id"], info
    created, reason, _ = rpc(url, "keys/create", {"name": "from-sso"}, session=session)
    assert reason is None and created["api_key"].startswith("tg_live_")

    # The audit log shows who did what, and how they signed in.
    rows, reason, _ = rpc(url, "audit/list", {}, key=key)
    assert reason is None
    ops = [(row["op"], row["actor"]["kind"], row["outcome"]) for row in rows["entries"]]
    assert ("keys.create", "oidc", "ok") in ops
    assert ("auth.signin", "oidc", "ok") in ops
    assert ("keys.create", "key", "error") in ops
    assert ("workspaces.sso.set", "key", "ok") in ops

    # Turning it off lets the key sign in again.
    _, reason, _ = rpc(url, "workspaces/sso.set", {"required": False}, key=key)
    assert reason is None
    assert isinstance(key_session(url, key), httpx.Client)
