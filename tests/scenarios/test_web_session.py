"""Login, sessions and CSRF of the web inbox, in-process (httpx ASGITransport).

The API token logs in once and is swapped for a signed, HttpOnly, SameSite=Strict cookie;
every state-changing form must carry the session's CSRF token; anything else is refused and
changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute
from itsdangerous.encoding import base64_decode, base64_encode, bytes_to_int, int_to_bytes

from pizzabot.agent.model import Item, ItemStatus
from pizzabot.channels.web import SESSION_COOKIE, Sessions
from pizzabot.channels.web._session import MAX_AGE
from pizzabot.channels.web.router import PARTS
from tests.peers.web import TOKEN, WebApp, csrf_of

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[WebApp]:
    async with WebApp(tmp_path) as app:
        yield app


async def pending(web: WebApp) -> Item:
    return await web.action_item(schema=SCHEMA, args={"to": "ann@example.com"})


async def test_the_login_link_sets_a_strict_httponly_cookie_and_drops_the_token(
    web: WebApp,
) -> None:
    async with web.client() as c:
        r = await c.get("/login", params={"token": TOKEN, "next": "/runs"})
        assert r.status_code == 303
        assert r.headers["location"] == "/runs" and TOKEN not in r.headers["location"]
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{SESSION_COOKIE}=")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert TOKEN not in cookie
        assert r.headers["referrer-policy"] == "no-referrer"
        page = await c.get("/runs")
        assert page.status_code == 200 and TOKEN not in page.text
    assert [e.action for e in await web.store.audit_log()] == ["web_login"]


async def test_the_login_form_accepts_the_token(web: WebApp) -> None:
    async with web.client() as c:
        form = await c.get("/login")
        assert form.status_code == 200 and 'type="password"' in form.text
        r = await c.post("/login", data={"token": TOKEN, "next": "/audit"})
        assert r.status_code == 303 and r.headers["location"] == "/audit"
        assert (await c.get("/audit")).status_code == 200


@pytest.mark.parametrize("how", ["link", "form"])
async def test_a_wrong_token_is_refused(web: WebApp, how: str) -> None:
    async with web.client() as c:
        if how == "link":
            r = await c.get("/login", params={"token": "wrong"})
        else:
            r = await c.post("/login", data={"token": "wrong"})
        assert r.status_code == 401
        assert "set-cookie" not in r.headers
        assert "not the API token" in r.text
        assert (await c.get("/")).status_code == 303
    assert [e.action for e in await web.store.audit_log()] == ["web_login_failed"]


async def test_pages_without_a_session_redirect_to_login(web: WebApp) -> None:
    item = await pending(web)
    async with web.client() as c:
        for path in ("/", "/runs", "/runs/new", "/audit", f"/items/{item.id}"):
            r = await c.get(path)
            assert r.status_code == 303, path
            assert r.headers["location"].startswith("/login?next=%2F")
        for fragment in ("/boxes", f"/items/{item.id}/state", f"/runs/{item.run_id}/live"):
            assert (await c.get(fragment)).status_code == 401


async def test_a_link_from_another_site_is_loaded_again_so_the_strict_cookie_is_sent(
    web: WebApp,
) -> None:
    item = await pending(web)
    async with web.client() as c:
        r = await c.get(f"/items/{item.id}", headers={"Sec-Fetch-Site": "cross-site"})
        assert r.status_code == 200
        assert '<meta http-equiv="refresh" content="0">' in r.text
        assert item.title not in r.text  # nothing of the item leaks to a visitor without a session


async def test_a_post_without_a_session_is_refused(web: WebApp) -> None:
    item = await pending(web)
    async with web.client(logged_in=True) as c:
        csrf = csrf_of((await c.get("/")).text)
    async with web.client() as c:
        r = await c.post(f"/items/{item.id}/approve", data={"csrf": csrf})
        assert r.status_code == 401
    assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING


@pytest.mark.parametrize("csrf", [None, "", "0" * 64, "other-session"])
async def test_a_forged_post_without_the_right_csrf_token_is_refused(
    web: WebApp, csrf: str | None
) -> None:
    item = await pending(web)
    if csrf == "other-session":
        async with web.client(logged_in=True) as other:
            csrf = csrf_of((await other.get("/")).text)
    async with web.client(logged_in=True) as c:
        data = {} if csrf is None else {"csrf": csrf}
        for action in ("approve", "reject"):
            r = await c.post(f"/items/{item.id}/{action}", data=data)
            assert r.status_code == 403, action
        r = await c.post(f"/items/{item.id}/edit", data={**data, "arg.to": "eve@example.com"})
        assert r.status_code == 403
        assert (await c.post("/runs", data={**data, "skill": "test"})).status_code == 403
        assert (await c.post(f"/runs/{item.run_id}/cancel", data=data)).status_code == 403
    assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING
    assert len(await web.store.list_runs()) == 1


async def test_the_right_csrf_token_decides_as_the_owner_via_web(web: WebApp) -> None:
    item = await pending(web)
    async with web.client(logged_in=True) as c:
        csrf = csrf_of((await c.get(f"/items/{item.id}")).text)
        r = await c.post(f"/items/{item.id}/approve", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"] == f"/items/{item.id}?flash=approved"
    decided = await web.store.get_item(item.id)
    assert decided.status is ItemStatus.APPROVED
    assert (decided.decided_by, decided.decided_via) == ("owner", "web")


async def test_a_new_api_token_ends_every_session(tmp_path: Path, web: WebApp) -> None:
    async with web.client(logged_in=True) as c:
        cookie = c.cookies[SESSION_COOKIE]
    (tmp_path / "other").mkdir()
    async with WebApp(tmp_path / "other", token="a-brand-new-token") as rotated:
        transport = httpx.ASGITransport(app=rotated.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            c.cookies.set(SESSION_COOKIE, cookie)
            assert (await c.get("/")).status_code == 303


async def test_tampered_and_expired_cookies_are_refused(web: WebApp) -> None:
    async with web.client(logged_in=True) as c:
        good = c.cookies[SESSION_COOKIE]
    sid, issued, signature = good.split(".")
    later = base64_encode(int_to_bytes(bytes_to_int(base64_decode(issued)) + 1)).decode()
    flipped = ("B" if signature[0] == "A" else "A") + signature[1:]
    async with web.client() as c:
        for bad in (
            f"{sid}x.{issued}.{signature}",
            f"{sid}.{later}.{signature}",
            f"{sid}.{issued}.{flipped}",
            f"{sid}.{issued}",
            "garbage",
        ):
            r = await c.get("/", headers={"Cookie": f"{SESSION_COOKIE}={bad}"})
            assert r.status_code == 303, bad
        r = await c.get("/", headers={"Cookie": f"{SESSION_COOKIE}={good}"})
        assert r.status_code == 200
    assert Sessions(TOKEN).verify(good + "é") is None

    now = [1_000_000.0]
    sessions = Sessions(TOKEN, clock=lambda: now[0])
    cookie = sessions.issue()
    assert sessions.verify(cookie) is not None
    now[0] += MAX_AGE + 1
    assert sessions.verify(cookie) is None


def test_a_cookie_issued_by_a_server_whose_clock_is_a_little_ahead_is_good() -> None:
    now = [1_000_000.0]
    sessions = Sessions(TOKEN, clock=lambda: now[0])
    cookie = sessions.issue()
    now[0] -= 30  # this server's clock is behind the one that issued the cookie
    assert sessions.verify(cookie) is not None
    now[0] -= 60
    assert sessions.verify(cookie) is None


async def test_a_cookie_in_the_format_before_itsdangerous_asks_for_a_new_login(
    web: WebApp,
) -> None:
    # The earlier cookie: ``sid.issued.hex`` signed by a hand-made HMAC of the same token.
    # It is refused like any unknown cookie; logging in again gives one of the new kind.
    key = hmac.new(TOKEN.encode(), b"pizzabot web session v1", hashlib.sha256).digest()
    body = f"abcdefghijklmnopqrstuvwx.{int(time.time())}"
    old = f"{body}.{hmac.new(key, body.encode(), hashlib.sha256).hexdigest()}"
    async with web.client() as c:
        r = await c.get("/runs", headers={"Cookie": f"{SESSION_COOKIE}={old}"})
        assert r.status_code == 303 and r.headers["location"] == "/login?next=%2Fruns"
        r = await c.get("/login", params={"token": TOKEN, "next": "/runs"})
        assert r.status_code == 303 and c.cookies[SESSION_COOKIE] != old
        assert (await c.get("/runs")).status_code == 200


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil"])
async def test_login_never_redirects_off_the_site(web: WebApp, target: str) -> None:
    async with web.client() as c:
        r = await c.get("/login", params={"token": TOKEN, "next": target})
        assert r.status_code == 303 and r.headers["location"] == "/"


async def test_logout_needs_the_csrf_token_and_clears_the_cookie(web: WebApp) -> None:
    async with web.client(logged_in=True) as c:
        assert (await c.post("/logout")).status_code == 403
        assert (await c.get("/")).status_code == 200
        csrf = csrf_of((await c.get("/")).text)
        r = await c.post("/logout", data={"csrf": csrf})
        assert r.status_code == 303 and r.headers["location"].startswith("/login")
        assert SESSION_COOKIE not in c.cookies
        assert (await c.get("/")).status_code == 303


async def test_pages_forbid_framing_and_outside_scripts(web: WebApp) -> None:
    async with web.client(logged_in=True) as c:
        r = await c.get("/")
    csp = r.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert r.headers["cache-control"] == "no-store"
    assert "http://" not in r.text and "https://" not in r.text  # no CDN, no outside font


def _form_posts() -> list[str]:
    """Every address a form of the web page posts to, as the router declares them."""
    paths = {
        route.path
        for part in PARTS
        for route in part.routes
        if isinstance(route, APIRoute) and "POST" in (route.methods or ())
    }
    # The login form, a passkey's sign-in and a mailed link are how a session starts.
    starts = {"/login", "/login/passkey", "/login/passkey/options"}
    return sorted(paths - starts - {"/login/mail", "/login/mail/send"})


async def test_every_form_post_needs_a_session_and_its_csrf_token(web: WebApp) -> None:
    item = await pending(web)
    note = await web.unread_item()
    ids = {"item_id": item.id, "run_id": item.run_id, "grant_id": "g0001"}
    ids |= {"passkey_id": "k0001", "sub_id": "s0001"}
    posts = [path.format(**ids) for path in _form_posts()]
    assert len(posts) >= 10, posts  # the routes really were found
    fields = {"decision": "approve", "skill": "test", "input": "go", "text": "hi", "reason": "no"}
    async with web.client(logged_in=True) as c:
        csrf = csrf_of((await c.get("/")).text)
        for path in posts:
            assert (await c.post(path, data=fields)).status_code == 403, path
            forged = {**fields, "csrf": "A" + csrf[1:] if csrf[0] != "A" else "B" + csrf[1:]}
            assert (await c.post(path, data=forged)).status_code == 403, path
    async with web.client() as c:
        for path in posts:
            assert (await c.post(path, data={**fields, "csrf": csrf})).status_code == 401, path
    assert (await web.store.get_item(item.id)).status is ItemStatus.PENDING
    assert (await web.store.get_item(note.id)).status is ItemStatus.UNREAD
    assert len(await web.store.list_runs()) == 2
    assert len(await web.store.events(item.run_id)) == 1  # no message, no cancel


async def test_a_post_without_a_session_is_refused_before_its_body_is_read(web: WebApp) -> None:
    item = await pending(web)
    broken = b'--x\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n' + b"a" * 100
    headers = {"Content-Type": "multipart/form-data; boundary=x"}
    async with web.client() as c:
        r = await c.post(f"/items/{item.id}", content=broken, headers=headers)
        assert r.status_code == 401 and "Log in" in r.text
