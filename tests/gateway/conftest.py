"""Fixtures: upstream agents and the Euler ASGI app served on loopback in this process."""

from __future__ import annotations

import gc

import httpx
import pytest
from django.db import connections

from tests.gateway.servers import ServerThread, Upstream


@pytest.fixture(autouse=True)
def _gateway_state(settings):
    from gateway import auth, recorder, routes

    settings.EULER_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.EULER_GATEWAY_ROUTE_TTL = 0  # every call sees the latest instance health
    recorder.autostart = False
    routes.reset()
    auth.forget_keys()
    recorder.discard()
    yield
    recorder.discard()
    routes.reset()


@pytest.fixture
def upstreams():
    """make(name) → a running Upstream with `.server` (a ServerThread); all stopped afterwards."""
    started: list[ServerThread] = []

    def make(name: str) -> Upstream:
        app = Upstream(name)
        app.server = ServerThread(app).start()
        app.url = app.server.url
        started.append(app.server)
        return app

    yield make
    for server in started:
        if server.thread.is_alive():
            server.stop()


@pytest.fixture
def gateway():
    """The whole Euler ASGI app under uvicorn on loopback; yields its base URL."""
    from asgiref.sync import SyncToAsync

    from config.asgi import application

    server = ServerThread(application).start()
    yield server.url
    server.stop()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
    gc.collect()


@pytest.fixture
def call(gateway, api_key):
    """A sync httpx client for the gateway, authenticated with the project's API key."""
    with httpx.Client(base_url=gateway, headers={"X-Euler-API-Key": api_key}, timeout=15) as client:
        yield client
