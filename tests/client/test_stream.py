"""The client's log stream against a stand-in websocket server: a dropped connection resumes after the last seq."""

from __future__ import annotations

import json
import threading

import pytest
from euler_client.client import Client
from websockets.sync.server import serve


@pytest.fixture
def fake_server():
    """Sends seq 0..1 then drops the connection; the reconnect gets the rest after `after_seq`, then `end`."""
    paths: list[str] = []
    log = [(1, 0, "a\n"), (1, 1, "b\n"), (1, 2, "c\n"), (1, 3, "d\n")]

    def handler(ws):
        paths.append(ws.request.path)
        headers = ws.request.headers
        assert headers["X-Euler-API-Key"] == "euler_pk_test" and "Origin" not in headers
        from urllib.parse import parse_qs, urlparse

        query = parse_qs(urlparse(ws.request.path).query)
        after = int(query.get("after_seq", ["-1"])[0])
        for attempt, seq, data in log:
            if seq > after:
                ws.send(json.dumps({"type": "log", "attempt": attempt, "seq": seq, "stream": "stdout", "data": data}))
            if len(paths) == 1 and seq == 1:
                ws.socket.close()  # a dropped connection, no close frame
                return
        ws.send(json.dumps({"type": "end", "state": "succeeded"}))

    server = serve(handler, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.socket.getsockname()[1]}", paths
    server.shutdown()


def test_follow_resumes_after_the_last_seq_with_no_gap_and_no_duplicate(fake_server):
    url, paths = fake_server
    chunks = list(Client(url, "euler_pk_test").jobs.logs(7, follow=True))
    assert "".join(c.data for c in chunks) == "a\nb\nc\nd\n"
    assert [c.seq for c in chunks] == [0, 1, 2, 3]
    assert paths == ["/ws/jobs/7/logs/", "/ws/jobs/7/logs/?after_seq=1&attempt=1"]
