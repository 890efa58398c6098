"""Keep-alive: every web process the platform ships closes idle connections later than its clients drop them.

A client that sends a request on a connection at the moment the server closes it gets "Connection reset by peer"
for a request the server never read (a POST is not retried): the clients' idle expiry is below the server's, each
read from where it is set."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from nodeagent.client import ControlPlaneClient
from nodeagent.protocol_base import CLIENT_KEEPALIVE_SECONDS, SERVER_KEEPALIVE_SECONDS

REPO = Path(__file__).resolve().parents[2]


def test_the_clients_expire_idle_connections_seconds_before_the_server_closes_them():
    assert SERVER_KEEPALIVE_SECONDS - CLIENT_KEEPALIVE_SECONDS >= 2
    # The `euler` client and scripts with a stock httpx client keep httpx's default expiry.
    assert httpx._config.DEFAULT_LIMITS.keepalive_expiry <= CLIENT_KEEPALIVE_SECONDS


def test_the_agents_client_uses_the_client_expiry():
    client = ControlPlaneClient("http://127.0.0.1:9", allow_insecure=True)
    try:
        assert client._http._transport._pool._keepalive_expiry == CLIENT_KEEPALIVE_SECONDS
    finally:
        client.close()


def test_every_web_process_uses_the_server_keepalive():
    cmd = re.search(r"^CMD (\[.*\])$", (REPO / "Dockerfile").read_text(), re.M).group(1)
    argv = [a.strip(' "') for a in cmd.strip("[]").split(",")]
    assert argv[argv.index("--timeout-keep-alive") + 1] == str(SERVER_KEEPALIVE_SECONDS)

    from config.up import web_command as up_web_command

    web = up_web_command("python", host="127.0.0.1", port="8000", stop_timeout=10.0)
    assert web[web.index("--timeout-keep-alive") + 1] == str(SERVER_KEEPALIVE_SECONDS)

    from tests.e2e.harness import web_command

    web = web_command(8000)
    assert web[web.index("--timeout-keep-alive") + 1] == str(SERVER_KEEPALIVE_SECONDS)


def test_the_tls_front_drops_idle_connections_to_web_first():
    caddy = (REPO / "deploy" / "Caddyfile").read_text()
    seconds = int(re.search(r"^\s*keepalive (\d+)s$", caddy, re.M).group(1))
    assert seconds <= CLIENT_KEEPALIVE_SECONDS
