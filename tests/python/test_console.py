"""The web console in headless Chromium (Debian's package), driven by Playwright
for Python with that system browser. The gateway runs as `serve --demo` with
a local OpenID Connect provider (`oidc-provider-mock`, started here). Each page
is screenshotted into target/console-screenshots/ (wide, 375 px, dark).

Covered: OIDC sign-in with the first key shown once; a chat made with that
key through the official `openai` SDK, then found in the request log with its
trace; creating and revoking a key (the revoked key gets 401); adding a
member; browsing models; installing a package; and permission parity (a
viewer sees no key creation, and the same op sent by hand with the viewer's
session is refused). The page must log no console errors."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import openai
import pytest

from conftest import BIN, ROOT, free_port, wait_healthy

SHOTS = ROOT / "target" / "console-screenshots"


def chromium_path():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


CHROMIUM = chromium_path()
if CHROMIUM is None and not os.environ.get("CI"):
    pytest.skip("Debian's chromium is not installed (tests/run.sh installs it)", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
oidc_mock = pytest.importorskip("oidc_provider_mock")


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
[control_plane]
signup_credit_usd = "5"
[[auth.oidc]]
name = "mock"
issuer = "{idp}"
client_id = "tollgate-console"
client_secret = "console-secret"
display_name = "Mock IdP"
"""
    )
    proc = subprocess.Popen(
        [BIN, "serve", "--demo", "--listen", f"127.0.0.1:{port}", "--config", str(config),
         "--data-dir", f"{directory.name}/data"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        directory.cleanup()


@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


class Watched:
    """A page whose console errors and uncaught exceptions are collected."""

    def __init__(self, browser, origin, **options):
        self.context = browser.new_context(**options)
        self.page = self.context.new_page()
        self.errors = []
        # Only the console's own messages: the identity provider's pages are not ours.
        self.page.on("console", lambda m: m.type == "error" and (m.location or {}).get("url", "").startswith(origin)
                     and self.errors.append(f"{m.text} at {m.location}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        # Destructive actions ask first; the tests confirm.
        self.page.on("dialog", lambda d: d.accept())

    def shot(self, name):
        self.page.wait_for_load_state("networkidle")
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self):
        self.context.close()


def a2a(url, key, method, params):
    request = urllib.request.Request(
        f"{url}/a2a", method="POST",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode(),
        headers={"content-type": "application/json", "a2a-version": "1.0",
                 **({"authorization": f"Bearer {key}"} if key else {})},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def goto(watched, url, route):
    watched.page.goto(f"{url}/console/#/{route}")
    watched.page.wait_for_selector("#page-title")


def test_console_end_to_end(gateway, browser):
    ada = Watched(browser, gateway, viewport={"width": 1280, "height": 900})
    page = ada.page

    # -- sign in through the OIDC provider; the first key is shown once
    page.goto(f"{gateway}/console/")
    page.get_by_role("link", name="Sign in with Mock IdP").wait_for()
    ada.shot("signin")
    page.get_by_role("link", name="Sign in with Mock IdP").click()
    page.locator("input[name=sub]").fill("ada@example.com")
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(re.compile(r".*/console/#/welcome"))
    secret = page.get_by_test_id("secret")
    secret.wait_for()
    first_key = secret.inner_text().strip()
    assert first_key.startswith("tg_live_")
    ada.shot("welcome")
    page.reload()
    page.wait_for_selector("#page-title")
    assert first_key not in page.content(), "the first key is shown only once"

    # -- a chat with that key through the official SDK, then in the request log
    client = openai.OpenAI(base_url=f"{gateway}/v1", api_key=first_key, max_retries=0)
    reply = client.chat.completions.create(model="demo/small", messages=[{"role": "user", "content": "hello"}])
    assert reply.choices[0].message.content == "You said: hello"
    request_id = reply.to_dict()["service"]["request_id"]
    goto(ada, gateway, "requests")
    link = page.get_by_role("link", name=request_id)
    link.wait_for()
    ada.shot("requests")
    link.click()
    page.get_by_role("heading", name="Attempts (1)").wait_for()
    assert "demo/small" in page.content()
    assert page.locator("dl.facts").inner_text().count("$0.0000") >= 1
    ada.shot("trace")

    # -- create a key (shown once, with a copy button) and revoke it
    goto(ada, gateway, "keys")
    page.get_by_label("Name").fill("ci")
    page.get_by_role("button", name="Create key").click()
    created = page.get_by_test_id("secret")
    created.wait_for()
    ci_key = created.inner_text().strip()
    assert ci_key.startswith("tg_live_")
    assert page.get_by_role("button", name="Copy").is_visible()
    ada.shot("keys")
    ok = openai.OpenAI(base_url=f"{gateway}/v1", api_key=ci_key, max_retries=0)
    ok.chat.completions.create(model="demo/small", messages=[{"role": "user", "content": "before"}])
    page.get_by_role("button", name="Revoke ci").click()
    page.locator("td", has_text="revoked").first.wait_for()
    with pytest.raises(openai.AuthenticationError):
        ok.chat.completions.create(model="demo/small", messages=[{"role": "user", "content": "after"}])

    # -- add a member (a user who signed up with an e-mail)
    bob = a2a(gateway, None, "accounts/signup", {"name": "Bob", "email": "bob@example.com"})["result"]
    goto(ada, gateway, "members")
    page.get_by_label("E-mail of a signed-up user").fill("bob@example.com")
    page.get_by_label("Role", exact=True).select_option("viewer")
    page.get_by_role("button", name="Add member").click()
    page.locator("td", has_text="bob@example.com").wait_for()
    ada.shot("members")

    # -- browse models
    goto(ada, gateway, "models")
    page.get_by_label("Search").fill("demo/")
    page.get_by_text("3 of").wait_for()
    assert page.locator("code", has_text="demo/small").is_visible()
    ada.shot("models")

    # -- install a package from the registry
    page.goto(f"{gateway}/console/#/registry?q=calculator")
    page.get_by_role("button", name="tollgate/calculator").click()
    page.get_by_role("button", name="Install tollgate/calculator").click()
    page.get_by_role("button", name="Uninstall calculator").wait_for()
    installs = a2a(gateway, first_key, "installs/list", {})["result"]["installs"]
    assert [i["name"] for i in installs] == ["calculator"]
    ada.shot("registry")

    # -- the other pages, wide, then at 375 px and in dark mode
    for route in ("overview", "usage", "workspaces", "actors"):
        goto(ada, gateway, route)
        page.locator(".loading").first.wait_for(state="detached")
        ada.shot(route)
    goto(ada, gateway, "overview")
    page.get_by_test_id("balance").wait_for()
    assert page.get_by_test_id("requests").inner_text() == "2"
    assert page.get_by_test_id("plan-limit").inner_text() == "998 / 1,000", "two of a Free workspace's 1,000 used"

    narrow = Watched(browser, gateway, viewport={"width": 375, "height": 812}, color_scheme="dark",
                     storage_state=ada.context.storage_state())
    for route in ("overview", "usage", "requests", "keys", "members", "models", "registry"):
        goto(narrow, gateway, route)
        narrow.page.locator(".loading").first.wait_for(state="detached")
        width = narrow.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 375, f"{route} scrolls sideways at 375 px ({width})"
        narrow.shot(f"{route}-375-dark")
    # Keyboard: the Menu button opens the navigation, whose links take focus.
    narrow.page.get_by_role("button", name="Menu").focus()
    narrow.page.keyboard.press("Enter")
    focused = narrow.page.evaluate("document.activeElement.textContent")
    assert focused == "Overview", focused
    narrow.page.keyboard.press("Tab")
    assert narrow.page.evaluate("document.activeElement.textContent") == "Usage"
    narrow.page.keyboard.press("Enter")
    narrow.page.get_by_role("heading", name="Usage").wait_for()
    assert narrow.page.evaluate(
        "getComputedStyle(document.body).backgroundColor") != "rgb(247, 247, 248)", "dark mode"
    assert narrow.errors == [], narrow.errors
    narrow.close()

    assert ada.errors == [], ada.errors
    ada.close()

    # -- permission parity: Bob is a viewer in Ada's workspace
    viewer = Watched(browser, gateway, viewport={"width": 1280, "height": 900})
    vpage = viewer.page
    vpage.goto(f"{gateway}/console/")
    vpage.get_by_label("API key").fill(bob["api_key"])
    vpage.get_by_role("button", name="Sign in").click()
    vpage.wait_for_url(re.compile(r".*#/overview"))
    ada_workspace = a2a(gateway, first_key, "workspaces/list", {})["result"]["workspaces"][0]["workspace_id"]
    vpage.locator("#workspace").select_option(ada_workspace)
    goto(viewer, gateway, "keys")
    vpage.get_by_test_id("readonly").wait_for()
    assert vpage.get_by_role("button", name="Create key").count() == 0
    assert vpage.get_by_role("button", name=re.compile("^Revoke")).count() == 0
    viewer.shot("keys-viewer")
    # The same op, by hand, with the viewer's session (cookie + CSRF token).
    refused = vpage.evaluate(
        """async (workspace) => {
            const session = await (await fetch('/auth/session')).json();
            const response = await fetch('/a2a', {method: 'POST', headers: {
                'content-type': 'application/json', 'a2a-version': '1.0', 'x-csrf-token': session.csrf_token},
              body: JSON.stringify({jsonrpc: '2.0', id: 1, method: 'keys/create',
                                    params: {workspace_id: workspace, name: 'sneaky'}})});
            return await response.json();
        }""",
        ada_workspace,
    )
    assert "error" in refused, refused
    assert "PERMISSION_DENIED" in json.dumps(refused), refused
    keys = a2a(gateway, first_key, "keys/list", {})["result"]["keys"]
    assert "sneaky" not in [k["name"] for k in keys]
    assert viewer.errors == [], viewer.errors
    viewer.close()
