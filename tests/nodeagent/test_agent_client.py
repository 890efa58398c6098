"""The agent's HTTP client against a real HTTP server on loopback."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nodeagent.client import ControlPlaneClient, InsecureURL, Refused, Unreachable
from tests.e2e.harness import free_port


@pytest.fixture
def server():
    answers = {}
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.path, self.headers.get("Authorization"), json.loads(body or b"null")))
            status, payload = answers.get(self.path, (200, {"ok": True}))
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", answers, seen
    httpd.shutdown()
    httpd.server_close()


def test_a_call_sends_the_credential_as_a_bearer_token_under_the_node_api_prefix(server):
    url, answers, seen = server
    c = ControlPlaneClient(url, credential="euler_node_secret")
    assert c.call("POST", "heartbeat", {"a": 1}) == {"ok": True}
    assert seen == [("/node-api/v1/heartbeat", "Bearer euler_node_secret", {"a": 1})]


def test_a_4xx_is_refused_with_its_status_and_code(server):
    url, answers, _ = server
    answers["/node-api/v1/enroll"] = (401, {"code": "enrollment_token_used", "detail": "used"})
    with pytest.raises(Refused) as info:
        ControlPlaneClient(url).call("POST", "enroll", {})
    assert info.value.status == 401 and info.value.code == "enrollment_token_used"


@pytest.mark.parametrize("answer", [(503, {"code": "unavailable"}), (500, b"<html>oops")])
def test_a_5xx_is_unreachable(server, answer):
    url, answers, _ = server
    answers["/node-api/v1/heartbeat"] = answer
    with pytest.raises(Unreachable):
        ControlPlaneClient(url).call("POST", "heartbeat", {})


def test_a_closed_port_is_unreachable():
    with pytest.raises(Unreachable):
        ControlPlaneClient(f"http://127.0.0.1:{free_port()}").call("POST", "heartbeat", {}, timeout=2)


def test_plain_http_to_a_remote_host_is_refused_unless_allowed():
    with pytest.raises(InsecureURL):
        ControlPlaneClient("http://203.0.113.7:8000")
    ControlPlaneClient("http://203.0.113.7:8000", allow_insecure=True).close()
    ControlPlaneClient("https://203.0.113.7").close()


def test_the_client_is_usable_from_many_threads(server):
    url, _, seen = server
    c = ControlPlaneClient(url, credential="euler_node_x")
    threads = [threading.Thread(target=c.call, args=("POST", f"t{i}", {})) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(seen) == 8
