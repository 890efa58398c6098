"""Nothing from an upstream runs on Euler's origin: the header rules, and what a caller receives."""

import httpx
import pytest
from django.test import Client

from agents.services import agent_create
from gateway import safety

SCRIPT_PAGE = b"<html><body><script>document.title='PWNED'</script></body></html>"


@pytest.mark.parametrize(
    "content_type",
    [
        "text/html",
        "TEXT/HTML; charset=utf-8",
        "application/xhtml+xml",
        "image/svg+xml",
        "text/xml",
        "application/xml",
        "application/atom+xml",
        "text/javascript",
        "application/javascript",
        "",
        None,
        "garbage",
    ],
)
def test_active_or_unknown_types_go_to_a_console_session_as_attachments(content_type):
    headers = {} if content_type is None else {"content-type": content_type}
    hardened = safety.harden(headers, by_session=True)
    assert hardened["content-disposition"] == "attachment"
    assert hardened["x-content-type-options"] == "nosniff"
    assert hardened["content-security-policy"].startswith("sandbox; default-src 'none'")


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "text/event-stream", "image/png"])
def test_passive_types_stay_inline(content_type):
    hardened = safety.harden({"content-type": content_type}, by_session=True)
    assert "content-disposition" not in hardened
    assert hardened["content-type"] == content_type


def test_an_api_key_caller_gets_the_body_inline_but_still_sandboxed():
    hardened = safety.harden({"content-type": "text/html", "access-control-allow-origin": "*"}, by_session=False)
    assert "content-disposition" not in hardened
    assert hardened["access-control-allow-origin"] == "*"
    assert hardened["content-security-policy"] == safety.CSP


def test_the_upstream_cannot_loosen_the_policy_or_reach_the_origins_state():
    hardened = safety.harden(
        {
            "content-type": "text/html",
            "content-security-policy": "script-src *",
            "x-content-type-options": "sniff",
            "clear-site-data": '"cookies"',
            "access-control-allow-origin": "https://evil.example",
            "access-control-allow-credentials": "true",
            "content-disposition": "inline",
        },
        by_session=True,
    )
    assert hardened["content-security-policy"] == safety.CSP
    assert hardened["x-content-type-options"] == "nosniff"
    assert hardened["content-disposition"] == "attachment"
    assert "clear-site-data" not in hardened
    assert not any(name.startswith("access-control-") for name in hardened)


@pytest.mark.django_db(transaction=True)
def test_a_console_session_downloads_an_html_answer_and_a_key_reads_it(project, owner, upstreams, gateway, api_key):
    up = upstreams("a")
    up.pages["/page"] = ("text/html; charset=utf-8", SCRIPT_PAGE)
    agent_create(project=project, fields={"name": "web"}, instances=[{"base_url": up.url}])
    browser = Client()
    browser.force_login(owner)
    url = f"{gateway}/api/v1/agents/web/invoke/page"
    by_session = httpx.get(url, cookies={"sessionid": browser.cookies["sessionid"].value})
    assert by_session.status_code == 200
    assert by_session.headers["content-disposition"] == "attachment"
    assert by_session.headers["x-content-type-options"] == "nosniff"
    assert by_session.headers["content-security-policy"] == safety.CSP
    by_key = httpx.get(url, headers={"X-Euler-API-Key": api_key})
    assert by_key.content == SCRIPT_PAGE
    assert "content-disposition" not in by_key.headers
    assert by_key.headers["content-security-policy"] == safety.CSP
    sse = httpx.get(f"{gateway}/api/v1/agents/web/invoke/sse?n=3&gap=0", headers={"X-Euler-API-Key": api_key})
    assert sse.headers["content-type"] == "text/event-stream" and sse.text.count("data: ") == 3
    assert "content-disposition" not in sse.headers
    missing = httpx.get(f"{gateway}/api/v1/agents/nope/invoke/x", headers={"X-Euler-API-Key": api_key})
    assert missing.status_code == 404 and missing.headers["x-content-type-options"] == "nosniff"
