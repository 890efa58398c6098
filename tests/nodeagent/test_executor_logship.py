"""The log shipper: chunking, same seq on retry, spool while unreachable, resume after restart, no gap or duplicate."""

from __future__ import annotations

import threading

import pytest

from nodeagent.client import Refused, Unreachable
from nodeagent.logship import CHUNK_BYTES, LogShipper, Stale, utf8_cut


class FakeServer:
    """Stores chunks idempotently by seq, like the ingest view; can be made unreachable or fenced."""

    def __init__(self):
        self.stored: dict[int, dict] = {}
        self.sent: list[int] = []
        self.down = False
        self.stale = False

    def send(self, chunks):
        self.sent.extend(c["seq"] for c in chunks)
        if self.down:
            raise Unreachable("down")
        if self.stale:
            raise Refused(409, "stale_attempt", {})
        for c in chunks:
            self.stored.setdefault(c["seq"], c)
        return {"stored": len(chunks)}

    def text(self) -> str:
        chunks = [self.stored[s] for s in sorted(self.stored)]
        offset = 0
        for c in chunks:
            assert c["offset"] == offset, "a gap or an overlap in the stored offsets"
            offset += len(c["data"].encode())
        return "".join(c["data"] for c in chunks)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def shipper(tmp_path, server, clock=None, **kw):
    return LogShipper(attempt_id=5, spool_dir=tmp_path, send=server.send, clock=clock or Clock(), **kw)


def test_it_ships_the_first_line_at_once_then_batches_by_interval(tmp_path):
    server, clock = FakeServer(), Clock()
    s = shipper(tmp_path, server, clock)
    s.feed("stdout", b"one\n")
    assert s.ship() is True
    s.feed("stdout", b"two\n")
    s.feed("stdout", b"three\n")
    assert s.ship() is False  # within 200 ms of the last chunk: waits
    clock.now += 0.2
    assert s.ship() is True
    assert [c["data"] for c in server.stored.values()] == ["one\n", "two\nthree\n"]
    assert [c["offset"] for c in server.stored.values()] == [0, 4]


def test_it_cuts_chunks_at_64_kib_and_by_stream(tmp_path):
    server = FakeServer()
    s = shipper(tmp_path, server)
    s.feed("stdout", b"a" * (CHUNK_BYTES + 10))
    s.feed("stderr", b"err\n")
    s.finish()
    s.ship(force=True)
    chunks = [server.stored[k] for k in sorted(server.stored)]
    assert [(c["stream"], len(c["data"])) for c in chunks] == [("stdout", CHUNK_BYTES), ("stdout", 10), ("stderr", 4)]


def test_it_never_splits_a_utf8_character_between_chunks():
    text = ("欧拉" * 30000).encode()
    n = utf8_cut(text, CHUNK_BYTES)
    assert n <= CHUNK_BYTES and n % 3 == 0
    assert utf8_cut(b"abc", 10) == 3


def test_it_retries_with_the_same_seq_and_stores_each_chunk_once(tmp_path):
    server, clock = FakeServer(), Clock()
    s = shipper(tmp_path, server, clock)
    server.down = True
    for i in range(5):
        s.feed("stdout", f"line {i}\n".encode())
        clock.now += 0.3
        s.ship(force=True)
    server.down = False
    assert s.ship(force=True) is True
    assert server.text() == "".join(f"line {i}\n" for i in range(5))
    assert len(set(server.sent)) == len(server.stored)  # retries reused the seqs


def test_it_resumes_after_a_restart_from_the_spool_without_gap_or_duplicate(tmp_path):
    server, clock = FakeServer(), Clock()
    log = [("stdout" if i % 3 else "stderr", f"line {i}\n".encode()) for i in range(40)]
    s = shipper(tmp_path, server, clock)
    for stream, data in log[:10]:
        s.feed(stream, data)
    clock.now += 1
    s.ship()
    server.down = True
    for stream, data in log[10:25]:
        s.feed(stream, data)
    clock.now += 1
    s.ship(force=True)  # sealed into the spool, not acknowledged
    # the agent dies here; a new one reads the container's log again from the first byte
    server.down = False
    again = shipper(tmp_path, server, clock)
    for stream, data in log:
        again.feed(stream, data)
    again.finish()
    assert again.ship(force=True) is True
    assert server.text() == "".join(d.decode() for _, d in log)


def test_a_torn_spool_line_is_dropped_and_read_again_from_docker(tmp_path):
    server = FakeServer()
    server.down = True
    s = shipper(tmp_path, server)
    s.feed("stdout", b"first\n")
    s.ship(force=True)
    s.feed("stdout", b"second\n")
    s.finish()
    with s.spool_path.open("a") as fh:
        fh.write('{"seq": 9, "offs')
    server.down = False
    again = shipper(tmp_path, server)
    again.feed("stdout", b"first\n")
    again.feed("stdout", b"second\n")
    again.feed("stdout", b"third\n")
    again.finish()
    again.ship(force=True)
    assert server.text() == "first\nsecond\nthird\n"


def test_a_fenced_attempt_raises_stale(tmp_path):
    server = FakeServer()
    server.stale = True
    s = shipper(tmp_path, server)
    s.feed("stdout", b"x\n")
    with pytest.raises(Stale):
        s.ship(force=True)
    assert s.stale


def test_the_spool_is_bounded_and_the_reader_waits_for_room(tmp_path):
    server = FakeServer()
    server.down = True
    s = shipper(tmp_path, server, max_spool_bytes=10)
    s.feed("stdout", b"0123456789AB\n")
    s.finish()
    stop = threading.Event()
    waited = threading.Thread(target=s.wait_for_room, args=(stop,))
    waited.start()
    waited.join(0.3)
    assert waited.is_alive()  # full: the reader is held back
    server.down = False
    s.ship(force=True)
    waited.join(5)
    assert not waited.is_alive()


def test_nul_bytes_become_replacement_characters_but_offsets_stay_exact(tmp_path):
    server = FakeServer()
    s = shipper(tmp_path, server)
    s.feed("stdout", b"a\x00b\n")
    s.feed("stderr", b"c\n")
    s.finish()
    s.ship(force=True)
    assert [c["data"] for c in server.stored.values()] == ["a\ufffdb\n", "c\n"]
    assert [c["offset"] for c in server.stored.values()] == [0, 4]
