"""The page as a phone's app, in headless Chromium against a real `pizzabot serve`: it installs
its service worker, a browser subscribes to Web Push against a local push service, a passkey
is registered on a virtual authenticator, signs in alone, and confirms a card that needs one.

Headless Chromium reaches no push service of its own, so the browser's `PushManager.subscribe`
is stood in for by one that subscribes at the local push service (`tests.peers.push_service`,
which checks the VAPID JWT and decrypts the body as a real one would); what it decrypted is
then delivered to the real service worker through the DevTools protocol
(`ServiceWorker.deliverPushMessage`), which shows the notification. Passkeys use DevTools'
virtual authenticator (`WebAuthn.addVirtualAuthenticator`). The page is opened as
http://localhost: a browser binds no passkey to an IP address.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
import pytest_asyncio
from playwright.async_api import Browser, BrowserContext, Page, Route, async_playwright, expect

from tests.e2e.test_slack_scenarios import APPROVER, SECRET, click, events_url, mentions
from tests.e2e.test_web_browser import ARGS, EMAIL, send_then_quote, shoot
from tests.peers.push_service import PushService
from tests.peers.required import CHROMIUM
from tests.peers.server import TOKEN
from tests.peers.slack_api import SlackApi, http_mode_env, post_interaction
from tests.peers.stack import Stack
from tests.waiting import DEADLINE, eventually

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

#: The test skill's tools, with sending mail needing a passkey to approve.
TOOLS = {
    "crm.send_email": {
        "policy": "ask",
        "impact": "high",
        "reversible": False,
        "scope": "external",
        "step_up": "passkey",
    },
    "crm.lookup": "auto",
}

#: The browser's push registration, stood in for: subscribe at the local push service.
SUBSCRIBE_LOCALLY = """
(() => {
  const make = (json) => ({
    endpoint: json.endpoint, expirationTime: null,
    toJSON: () => json,
    getKey: (name) => null,
    unsubscribe: async () => true,
  });
  PushManager.prototype.subscribe = async function (options) {
    const key = btoa(String.fromCharCode(...new Uint8Array(options.applicationServerKey)))
      .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
    return make(await window.__subscribeLocally(key));
  };
})();
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def push() -> AsyncIterator[PushService]:
    async with PushService() as ps:
        yield ps


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def slack() -> AsyncIterator[SlackApi]:
    async with SlackApi() as api:
        yield api


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(slack: SlackApi, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    env = http_mode_env(slack.url, SECRET, PIZZABOT_PUSH_LOOPBACK="true")
    skill = {"tools": TOOLS, "deliver": {"slack": "C123"}, "approvers": {"slack": [APPROVER]}}
    async with Stack(
        tmp_path_factory.mktemp("phone"), script=send_then_quote, skill=skill, env=env
    ) as st:
        yield st


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


#: The notifications the service worker shows: title, body and the actions offered.
NOTIFICATIONS = (
    "navigator.serviceWorker.ready.then(r => r.getNotifications())"
    ".then(ns => ns.length ? ns.map(n => [n.title, n.body, n.actions.map(a => a.action)]) : null)"
)


async def until(page: Page, expression: str, timeout: float = DEADLINE) -> Any:
    """What `expression` gives in the page once it is truthy. (Playwright's wait_for_function
    evaluates a string, which the page's Content-Security-Policy forbids.)"""

    async def look() -> Any:
        return await page.evaluate(expression) or None

    return await eventually(look, what=expression, timeout=timeout, interval=0.1)


def here(stack: Stack) -> str:
    return f"http://localhost:{stack.server.port}"


async def signed_in(browser: Browser, stack: Stack) -> tuple[BrowserContext, Page]:
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{here(stack)}/login?token={TOKEN}")
    return context, page


async def test_a_subscribed_browser_is_pushed_that_a_card_waits_and_nothing_else(
    browser: Browser, stack: Stack, push: PushService
) -> None:
    context, page = await signed_in(browser, stack)
    try:
        await context.grant_permissions(["notifications"], origin=here(stack))
        await context.expose_function("__subscribeLocally", push.subscribe)
        await context.add_init_script(SUBSCRIBE_LOCALLY)
        cdp = await context.new_cdp_session(page)
        workers: list[dict[str, Any]] = []
        cdp.on(
            "ServiceWorker.workerRegistrationUpdated", lambda e: workers.extend(e["registrations"])
        )
        await cdp.send("ServiceWorker.enable")

        # The page is installable: a manifest, and a service worker that controls it.
        await page.goto(f"{here(stack)}/phone")
        manifest = await (await page.request.get(f"{here(stack)}/manifest.webmanifest")).json()
        assert manifest["display"] == "standalone" and manifest["start_url"] == "/"
        assert {i["sizes"] for i in manifest["icons"]} >= {"192x192", "512x512"}
        # Once the worker is active it controls the page: at once through its claim, or,
        # when the page was already loading as the worker activated, from the next load.
        await until(page, "navigator.serviceWorker.ready.then(r => r.active !== null)")
        if not await page.evaluate("navigator.serviceWorker.controller !== null"):
            await page.reload()
        await until(page, "navigator.serviceWorker.controller !== null")
        # It keeps the shell, and no page of the inbox.
        cached = await page.evaluate(
            "caches.open('pizzabot-shell-v1').then(c => c.keys()).then(k => k.map(r => r.url))"
        )
        paths = [u.removeprefix(here(stack)) for u in cached]
        assert "/offline" in paths and "/static/app.js" in paths
        assert all(p == "/offline" or p.startswith("/static/") for p in paths), paths

        await page.get_by_role("button", name="Notify this browser").click()
        await expect(page.locator("#notifications .devices li")).to_have_count(1)
        await expect(page.locator("#notifications .devices")).to_contain_text("Chrome on Linux")
        async with stack.client() as api:  # listed by the API, without what would push to it
            [listed] = (await api.get("/api/push/subscriptions")).json()["items"]
            assert listed["label"] == "Chrome on Linux" and listed["service"] == "127.0.0.1"
            assert "endpoint" not in listed and "keys" not in listed
            assert (await api.delete("/api/push/subscriptions/nope")).status_code == 404

        run = await stack.start_run("test", "Send Ann the quote she asked for")
        item = await stack.wait_item(run["id"])
        pushed = await stack.server.wait_for(
            lambda _c: _first(push), what="a push for the new card", timeout=30
        )
        said = pushed.json()
        assert said["text"] == "1 card waits" and set(said) == {"v", "kind", "text", "open"}
        for secret in ("send_email", "crm", "ann@example.com", "quote", item["id"], run["id"]):
            assert secret not in pushed.plaintext.decode(), secret
        assert pushed.headers["urgency"] == "high"

        # The service worker shows it, and its id opens the card once signed in.
        registration = next(w for w in workers if not w["isDeleted"])["registrationId"]
        message = {
            "origin": here(stack),
            "registrationId": registration,
            "data": pushed.plaintext.decode(),
        }
        shown = None
        for _ in range(3):  # a push the browser took while its worker was still starting is lost
            await cdp.send("ServiceWorker.deliverPushMessage", message)
            with contextlib.suppress(AssertionError):
                shown = await until(page, NOTIFICATIONS, timeout=5)
                break
        assert shown == [["Pizza Bot", "1 card waits", ["approve", "reject"]]]
        await page.goto(f"{here(stack)}/push/open/{said['open']}?act=approve")
        assert page.url.endswith(f"/items/{item['id']}?confirm=approve#decide")
        await expect(page.locator("#decide .banner")).to_contain_text("nothing is decided yet")
        assert (await stack.get_run(run["id"]))["status"] == "waiting"

        # A push service that says the subscription is gone has it removed.
        push.gone(_endpoint(push, pushed))
        await stack.decide(item["id"], "reject", reason="not now")
        run2 = await stack.start_run("test", "Send Ann the quote again")
        await stack.wait_item(run2["id"])
        await stack.server.wait_for(
            lambda _c: _gone(push), what="the push service to answer 410", timeout=30
        )
        await page.goto(f"{here(stack)}/phone")
        await expect(page.locator("#notifications .empty")).to_contain_text("No browser")
        async with stack.client() as api:
            assert (await api.get("/api/push/subscriptions")).json()["items"] == []
        audit = await (await page.request.get(f"{here(stack)}/audit")).text()
        assert "push_unsubscribed" in audit and "410" in audit
    finally:
        await context.close()


async def _first(push: PushService) -> Any:
    taken = push.taken()
    return taken[0] if taken else None


async def _gone(push: PushService) -> bool:
    return any(p.status == 410 for p in push.pushes)


def _endpoint(push: PushService, pushed: Any) -> str:
    return f"{push.origin}/push/{pushed.sub}"


async def add_authenticator(context: BrowserContext, page: Page) -> str:
    cdp = await context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable")
    made = await cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return str(made["authenticatorId"])


async def test_a_passkey_signs_in_and_confirms_a_card_no_button_alone_can_approve(
    browser: Browser, stack: Stack, slack: SlackApi, output_dir: Path
) -> None:
    context, page = await signed_in(browser, stack)
    try:
        await add_authenticator(context, page)
        await page.goto(f"{here(stack)}/phone")
        await page.get_by_label(re.compile("^Name")).fill("Test phone")
        await page.get_by_role("button", name="Add a passkey").click()
        await expect(page.locator("#passkeys .devices")).to_contain_text("Test phone")
        await shoot(page, output_dir / "web-phone")

        # Signed out, the passkey alone signs the owner in again.
        await page.get_by_role("button", name="Log out").click()
        await page.goto(f"{here(stack)}/login")
        await page.get_by_role("button", name="Sign in with a passkey").click()
        await page.wait_for_url(f"{here(stack)}/")
        await expect(page.get_by_role("link", name="Phone")).to_be_visible()

        # A card that needs a passkey: the API's approval alone leaves it pending, saying why.
        first = await stack.start_run("test", "Send Ann the quote she asked for")
        item = await stack.wait_item(first["id"])
        assert item["risk"]["step_up"] == "passkey" and not item["risk"].get("grants")
        refused = await stack.decide(item["id"], "approve")
        assert refused.status_code == 403
        assert (
            "passkey" in refused.json()["detail"]
            and f"/items/{item['id']}" in refused.json()["detail"]
        )
        # A Slack approver's click alone: the same; they are told why, in Slack.
        [post] = await slack.wait_for("chat.postMessage", mentions(item["id"]))
        raw = post.args["blocks"]
        shown = json.loads(raw) if isinstance(raw, str) else raw
        [approve] = [
            e for b in shown for e in b.get("elements", []) if e.get("action_id") == "pizza_approve"
        ]
        assert approve["url"] == f"{stack.server.url}/items/{item['id']}"  # it opens the page
        assert approve["text"]["text"] == "Approve with passkey"
        clicked = await post_interaction(
            events_url(stack), click(item["id"], post, "pizza_approve"), secret=SECRET
        )
        assert clicked.status_code == 200
        [note] = await slack.wait_for(
            "chat.postEphemeral", lambda c: item["id"] in c.args.get("text", "")
        )
        assert note.args["user"] == APPROVER and "passkey" in note.args["text"]
        assert (await stack.get_run(first["id"]))["status"] == "waiting"

        # On the page, the passkey confirms it; what was posted is kept to replay below.
        posted: list[str] = []

        async def keep(route: Route) -> None:
            if route.request.method == "POST":
                posted.append(route.request.post_data or "")
            await route.continue_()

        await page.route(f"**/items/{item['id']}", keep)
        await page.goto(f"{here(stack)}/items/{item['id']}")
        await expect(page.locator(".step-up")).to_contain_text("needs your passkey")
        await shoot(page, output_dir / "web-step-up-item")
        await page.get_by_role("button", name="Approve with passkey").click()
        await expect(page.locator(".decided")).to_contain_text("Approved by owner via web")
        await stack.wait_run(first["id"], {"done"})
        assert [c["args"]["to"] for c in stack.tool_calls() if c.get("event") == "called"][-1:] == [
            EMAIL["to"]
        ]
        audit = await (await page.request.get(f"{here(stack)}/audit")).text()
        assert "step_up_confirmed" in audit and "passkey_login" in audit

        # The same assertion, replayed on another card that needs one, is refused.
        second = await stack.start_run("test", "Send Ann the quote once more")
        other = await stack.wait_item(second["id"])
        form = {k: v[0] for k, v in parse_qs(posted[0]).items()}
        assert json.loads(form["assertion"])["type"] == "public-key"
        await page.goto(f"{here(stack)}/items/{other['id']}")
        seen = await page.locator("#decide input[name=seen]").first.get_attribute("value")
        csrf = await page.locator("#decide input[name=csrf]").first.get_attribute("value")
        replay = await page.request.post(
            f"{here(stack)}/items/{other['id']}",
            form={**form, "seen": seen or "", "csrf": csrf or ""},
        )
        assert replay.status == 403
        assert "not accepted" in await replay.text()
        assert (await stack.get_run(second["id"]))["status"] == "waiting"
        slack.check()  # and Slack took every message as it was sent
    finally:
        await context.close()
