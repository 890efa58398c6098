import time

import httpx
import pytest
from django.test import Client

from agents.services import agent_create

pytestmark = pytest.mark.django_db(transaction=True)


def register(project, name, *urls):
    return agent_create(project=project, fields={"name": name}, instances=[{"base_url": u} for u in urls])


def test_three_5xx_in_a_row_eject_an_instance_for_a_while(project, upstreams, call):
    good, bad = upstreams("good"), upstreams("bad")
    bad.fail_status = 500
    register(project, "eject", good.url, bad.url)
    first = [call.get("/api/v1/agents/eject/invoke/echo").status_code for _ in range(6)]
    assert first.count(500) == 3
    after = [call.get("/api/v1/agents/eject/invoke/echo").status_code for _ in range(10)]
    assert after == [200] * 10
    assert bad.hits == 3


def test_a_console_session_may_invoke_and_needs_csrf_for_unsafe_methods(project, owner, upstreams, gateway):
    up = upstreams("a")
    register(project, "console", up.url)
    browser = Client()
    browser.force_login(owner)
    cookies = {"sessionid": browser.cookies["sessionid"].value}
    got = httpx.get(f"{gateway}/api/v1/agents/console/invoke/echo", cookies=cookies)
    assert got.status_code == 200
    assert "cookie" not in got.json()["headers"]
    posted = httpx.post(f"{gateway}/api/v1/agents/console/invoke/echo", cookies=cookies, content=b"x")
    assert posted.status_code == 403 and posted.json()["code"] == "csrf_failed"
    token = "a" * 32
    posted = httpx.post(
        f"{gateway}/api/v1/agents/console/invoke/echo",
        cookies={**cookies, "csrftoken": token},
        headers={"X-CSRFToken": token, "Referer": gateway + "/", "Origin": gateway},
        content=b"x",
    )
    assert posted.status_code == 200


def test_a_revoked_key_stops_working_within_twice_the_cache_ttl(project, upstreams, gateway, settings):
    from quotas.services import apikey_create, apikey_revoke

    settings.EULER_GATEWAY_KEY_CACHE_TTL = 0.2
    up = upstreams("a")
    register(project, "revoke", up.url)
    key, secret = apikey_create(project=project, label="short-lived")
    headers = {"X-Euler-API-Key": secret}
    assert httpx.get(f"{gateway}/api/v1/agents/revoke/invoke/echo", headers=headers).status_code == 200
    apikey_revoke(project=project, key_id=key.pk)
    time.sleep(0.45)
    response = httpx.get(f"{gateway}/api/v1/agents/revoke/invoke/echo", headers=headers)
    assert response.status_code == 401


def test_invoke_calls_take_the_lean_route_and_other_paths_the_full_stack(project, upstreams, call):
    from gateway.asgi import INVOKE_PATH

    assert INVOKE_PATH.match("/api/v1/agents/x/invoke/a/b")
    assert INVOKE_PATH.match("/api/v1/agents/x/invoke")
    assert not INVOKE_PATH.match("/api/v1/agents/x/instances")
    assert not INVOKE_PATH.match("/api/v1/agents/x/invokes")
    up = upstreams("a")
    register(project, "lean", up.url)
    relayed = call.get("/api/v1/agents/lean/invoke/echo", headers={"X-Request-ID": "abc-1"})
    assert relayed.headers["x-request-id"] == "abc-1"
    assert relayed.json()["headers"]["x-request-id"] == "abc-1"
    listed = call.get("/api/v1/agents")
    assert listed.status_code == 200 and "x-frame-options" in listed.headers


def test_a_large_body_is_streamed_to_the_agent(project, upstreams, call):
    up = upstreams("a")
    register(project, "big", up.url)
    body = b"z" * (3 << 20)
    response = call.post("/api/v1/agents/big/invoke/echo", content=body)
    assert response.status_code == 200
    assert len(response.json()["body"]) == len(body)


async def test_a_stale_route_is_served_while_one_background_reload_runs(project, settings):
    import asyncio

    from asgiref.sync import sync_to_async

    from gateway import routes

    settings.EULER_GATEWAY_ROUTE_TTL = 1
    await sync_to_async(register)(project, "swr", "http://127.0.0.1:9")
    first = await routes.route_for(project.pk, "swr")
    first.loaded_at -= 2  # past the TTL, within the stale window
    assert await routes.route_for(project.pk, "swr") is first
    assert await routes.route_for(project.pk, "swr") is first
    assert len(routes._reloading) == 1
    await asyncio.gather(*routes._reloading.values())
    assert await routes.route_for(project.pk, "swr") is not first
    first.loaded_at -= 10  # too old to serve: loaded inline
    routes._routes[(project.pk, "swr")] = first
    assert await routes.route_for(project.pk, "swr") is not first


def test_an_agent_slower_than_its_response_timeout_answers_504(project, upstreams, call):
    up = upstreams("slow")
    agent_create(project=project, fields={"name": "slow", "response_timeout_s": 0.3}, instances=[{"base_url": up.url}])
    response = call.get("/api/v1/agents/slow/invoke/sleep?s=3")
    assert response.status_code == 504
    assert response.json()["code"] == "upstream_timeout"
