"""The web console in headless Chromium (Debian's package), driven by Playwright
for Python with that system browser. The gateway runs as `serve --demo` with
a local OpenID Connect provider (`oidc-provider-mock`, started here). Each page
is screenshotted into target/console-screenshots/ (wide, 375 px, dark).

Covered: OIDC sign-in with the first key shown once; a chat made with that
key through the official `openai` SDK, then found in the request log with its
trace; creating and revoking a key (the revoked key gets 401); adding a
member; browsing models; installing a package; and permission parity (a
viewer sees no key creation, no plan change, top-up, budget form, audit log
or playground, and the same op sent by hand with the viewer's session is
refused). At 1280 and at 375 px: a plan change and a top-up paid on
mock-upstream's fake Stripe Checkout (its Pay button delivers the signed
webhooks, then sends the browser back), a budget set, installs managed, a
streamed playground answer with its cost and trace, and the audit log listing
those changes; a refused OIDC sign-in lands back on the console. The page
must log no console errors."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from decimal import Decimal

import httpx
import openai
import pytest

from conftest import BIN, MOCK_BIN, ROOT, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET, free_port, wait_healthy

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


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def stripe_mock():
    """mock-upstream, for its fake Stripe (Checkout Sessions, the hosted Pay page, signed webhooks)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([MOCK_BIN, "--listen", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL)
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def gateway(idp, stripe_mock):
    directory = tempfile.TemporaryDirectory()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = Path(directory.name) / "tollgate.toml"
    config.write_text(
        f"""
[control_plane]
signup_credit_usd = "5"
[billing.stripe]
api_base = "{stripe_mock}"
secret_key = "{STRIPE_SECRET_KEY}"
webhook_secret = "{STRIPE_WEBHOOK_SECRET}"
success_url = "{url}/console/#/billing?checkout=done"
cancel_url = "{url}/console/#/billing?checkout=cancelled"
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
        # The fake Stripe delivers its signed events to the gateway's webhook.
        registered = httpx.post(f"{stripe_mock}/__stripe/webhook_endpoints",
                                json={"url": f"{url}/v1/billing/stripe/webhook", "secret": STRIPE_WEBHOOK_SECRET})
        assert registered.status_code == 200, registered.text
        yield url
    finally:
        stop(proc)
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
    assert "null" not in page.locator("main").inner_text(), "no stray null under the table"
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
    assert "bob@example.com (API key) · viewer" in vpage.locator("#who").inner_text()
    # The new pages offer a viewer only what it may read.
    goto(viewer, gateway, "billing")
    vpage.get_by_test_id("current-plan").wait_for()
    assert vpage.get_by_role("button", name=re.compile("^Change plan")).count() == 0
    assert vpage.get_by_test_id("topup").count() == 0
    goto(viewer, gateway, "budgets")
    vpage.get_by_test_id("readonly").wait_for()
    assert vpage.get_by_test_id("set-budget").count() == 0
    goto(viewer, gateway, "installs")
    vpage.get_by_test_id("readonly").wait_for()
    vpage.get_by_role("button", name="Details of calculator").wait_for()
    assert vpage.get_by_role("button", name=re.compile("^Uninstall")).count() == 0
    for route in ("audit", "playground"):
        goto(viewer, gateway, route)
        vpage.get_by_test_id("readonly").wait_for()
    assert vpage.get_by_role("link", name="Audit log").is_hidden()
    assert vpage.get_by_role("link", name="Playground").is_hidden()
    # The same ops, by hand, with the viewer's session (cookie + CSRF token).
    for method, params in (("keys/create", {"name": "sneaky"}), ("billing/topups.create", {"amount_usd": "25"}),
                           ("billing/limits.set", {"scope": "workspace", "remove": True}), ("audit/list", {})):
        refused = vpage.evaluate(
            """async ([method, params]) => {
                const session = await (await fetch('/auth/session')).json();
                const response = await fetch('/a2a', {method: 'POST', headers: {
                    'content-type': 'application/json', 'a2a-version': '1.0', 'x-csrf-token': session.csrf_token},
                  body: JSON.stringify({jsonrpc: '2.0', id: 1, method, params})});
                return await response.json();
            }""",
            [method, {"workspace_id": ada_workspace, **params}],
        )
        assert "error" in refused, (method, refused)
        assert "PERMISSION_DENIED" in json.dumps(refused), (method, refused)
    keys = a2a(gateway, first_key, "keys/list", {})["result"]["keys"]
    assert "sneaky" not in [k["name"] for k in keys]
    assert viewer.errors == [], viewer.errors
    viewer.close()


def shown_usd(text: str) -> str:
    """An exact USD amount as the console shows it (ui.js `usd`): 2 to 9 decimals."""
    value = Decimal(text).quantize(Decimal("0.000000001"))
    whole, _, fraction = f"{abs(value):f}".partition(".")
    return f"{'-' if value < 0 else ''}${whole}.{fraction.rstrip('0').ljust(2, '0')}"


def pay_on_fake_stripe(watched, stripe_mock, amount):
    """Pays on the fake Stripe Checkout page the console sent the browser to;
    its Pay button delivers the signed webhooks, then redirects back."""
    page = watched.page
    page.wait_for_url(f"{stripe_mock}/checkout/pay/**")
    assert amount in page.locator("body").inner_text()
    page.get_by_role("button", name="Pay").click()
    page.wait_for_url(re.compile(r".*/console/#/billing\?checkout=done$"))
    page.get_by_test_id("checkout-done").wait_for()


def fits(watched, route, width):
    """At phone width, a page must not scroll sideways."""
    scroll = watched.page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width, f"{route} scrolls sideways at {width} px ({scroll})"


@pytest.mark.parametrize("width", [1280, 375])
def test_console_billing_budgets_installs_playground_and_audit(gateway, stripe_mock, browser, width):
    expect = sync_api.expect
    grace = Watched(browser, gateway, viewport={"width": width, "height": 900})
    page = grace.page
    tag = f"{width}px"

    # -- a refused OIDC sign-in lands back on the console, with the reason and a way back
    page.goto(f"{gateway}/auth/oidc/mock/callback?error=access_denied")
    page.wait_for_url(re.compile(r".*/console/#/signin-failed\?"))
    expect(page.get_by_test_id("signin-failed")).to_contain_text("refused the sign-in: access_denied")
    grace.shot(f"signin-failed-{tag}")

    # -- a first sign-in: a new user, workspace (5 USD of credit) and key
    email = f"grace-{width}@example.com"
    page.get_by_role("link", name="Sign in with Mock IdP").click()
    page.locator("input[name=sub]").fill(email)
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(re.compile(r".*/console/#/welcome"))
    key = page.get_by_test_id("secret").inner_text().strip()
    expect(page.locator("#who")).to_have_text(f"{email} · owner")

    # -- a plan change paid through the fake Stripe Checkout
    goto(grace, gateway, "billing")
    expect(page.get_by_test_id("balance")).to_have_text("$5.00")
    expect(page.get_by_test_id("current-plan")).to_have_text("free")
    fits(grace, "billing", width)
    grace.shot(f"billing-{tag}")
    page.get_by_role("button", name="Change plan to team").click()
    pay_on_fake_stripe(grace, stripe_mock, "299.00 USD")
    expect(page.get_by_test_id("current-plan")).to_have_text("team")
    assert a2a(gateway, key, "billing/plan.get", {})["result"]["plan"]["id"] == "team"

    # -- a top-up through the same Checkout, ending in a credited wallet
    page.get_by_label("Amount (USD)").fill("25")
    page.get_by_role("button", name="Top up").click()
    pay_on_fake_stripe(grace, stripe_mock, "25.00 USD")
    expect(page.get_by_test_id("balance")).to_have_text("$30.00")
    wallet = a2a(gateway, key, "wallet/get", {})["result"]
    assert Decimal(wallet["available_usd"]) == 30, wallet
    expect(page.locator("td[data-label=State]", has_text="paid")).to_have_count(2)
    fits(grace, "billing", width)
    grace.shot(f"billing-paid-{tag}")

    # -- the bank refunds part of the top-up, then the payer disputes it: the page shows both
    topup = [c for c in a2a(gateway, key, "billing/topups.list", {})["result"]["checkouts"] if c["kind"] == "topup"][0]
    session = httpx.get(f"{stripe_mock}/v1/checkout/sessions/{topup['session_id']}",
                        headers={"Authorization": f"Bearer {STRIPE_SECRET_KEY}"}).json()
    refund = httpx.post(f"{stripe_mock}/__stripe/charges/{session['payment_intent']}/refund", json={"amount": 500})
    assert [d["status"] for d in refund.json()["deliveries"]] == [200], refund.text
    goto(grace, gateway, "billing")
    expect(page.get_by_test_id("balance")).to_have_text("$25.00")
    expect(page.locator("td[data-label=State]", has_text="partly refunded ($5.00)")).to_have_count(1)
    dispute = httpx.post(f"{stripe_mock}/__stripe/charges/{session['payment_intent']}/dispute", json={})
    assert [d["status"] for d in dispute.json()["deliveries"]] == [200], dispute.text
    page.get_by_label("Amount (USD)").fill("10")
    page.get_by_role("button", name="Top up").click()
    expect(page.get_by_role("alert")).to_contain_text("is disputed")
    assert page.url.startswith(gateway), "a held workspace is not sent to pay"
    # The history says the dispute holds top-ups.
    page.reload()
    expect(page.get_by_test_id("topup-hold")).to_contain_text("is disputed")
    grace.shot(f"billing-refunded-{tag}")

    # -- a budget set, then shown with what is left
    goto(grace, gateway, "budgets")
    page.get_by_label("Limit (USD)").fill("10")
    page.get_by_label("Most one request may cost (USD)").fill("1")
    page.get_by_role("button", name="Save budget").click()
    expect(page.get_by_test_id("budget-remaining")).to_have_text("$10.00")
    limits = a2a(gateway, key, "billing/limits.get", {})["result"]
    assert limits["workspace"]["limit_usd"] == "10" and limits["workspace"]["max_request_usd"] == "1", limits
    fits(grace, "budgets", width)
    grace.shot(f"budgets-{tag}")

    # -- an install made, shown with its tools and MCP URL, upgraded and removed
    goto(grace, gateway, "installs")
    page.get_by_label("Package").fill("tollgate/calculator")
    page.get_by_role("button", name="Install", exact=True).click()
    page.get_by_role("button", name="Manage calculator").wait_for()
    expect(page.locator("td[data-label='MCP URL']")).to_have_text(f"{gateway}/v1/mcp/calculator")
    listed = httpx.post(f"{gateway}/v1/mcp/calculator",
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                        headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"})
    tools = [t["name"] for t in listed.json()["result"]["tools"]]
    expect(page.locator("td[data-label=Tools]")).to_have_text(", ".join(f"calculator__{t}" for t in tools))
    page.get_by_role("button", name="Manage calculator").click()
    page.get_by_role("button", name="Upgrade to the newest match").click()
    expect(page.locator("#toast")).to_contain_text("Upgraded: calculator")
    fits(grace, "installs", width)
    grace.shot(f"installs-{tag}")
    page.get_by_role("button", name="Uninstall calculator").click()
    page.get_by_text("Nothing installed.").wait_for()
    assert a2a(gateway, key, "installs/list", {})["result"]["installs"] == []

    # -- a streamed playground answer, with its cost and a link to its trace
    goto(grace, gateway, "playground")
    page.get_by_label("Model").select_option("demo/small")
    page.get_by_label("Message").fill("hello")
    page.get_by_role("button", name="Send").click()
    cost = page.get_by_test_id("answer-cost")
    cost.wait_for()
    expect(page.locator(".turn.assistant .answer")).to_have_text("You said: hello")
    trace = page.get_by_role("link", name=re.compile(r"^trace req_"))
    request_id = trace.inner_text().removeprefix("trace ")
    logged = a2a(gateway, key, "requests/get", {"request_id": request_id})["result"]
    assert logged["streamed"] is True and logged["model"] == "demo/small", logged
    assert Decimal(logged["cost_usd"]) > 0, logged
    assert cost.inner_text() == f"Cost {shown_usd(logged['cost_usd'])}"
    fits(grace, "playground", width)
    grace.shot(f"playground-{tag}")
    trace.click()
    page.get_by_role("heading", name="Attempts (1)").wait_for()

    # -- the audit log lists the changes just made, filtered, with their details
    goto(grace, gateway, "audit")
    for op in ("billing.plan.change", "billing.topups.create", "billing.limits.set",
               "installs.create", "installs.update", "installs.delete"):
        page.locator(f"tr[data-op='{op}']").first.wait_for()
    fits(grace, "audit", width)
    grace.shot(f"audit-{tag}")
    page.get_by_label("Op").fill("billing.limits.set")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*#/audit\?op=billing\.limits\.set"))
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-op", "billing.limits.set")
    rows.first.locator("summary", has_text="Show").click()
    expect(rows.first.locator("pre").first).to_contain_text('"limit_usd": "10"')
    entries = a2a(gateway, key, "audit/list", {"op": "billing.limits.set"})["result"]["entries"]
    assert len(entries) == 1 and entries[0]["outcome"] == "ok", entries
    fits(grace, "audit-filtered", width)

    assert grace.errors == [], grace.errors
    grace.close()
