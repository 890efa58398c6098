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

    def send(self, body):
        chunks = body["chunks"]
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
    again.rewind()
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
    again.rewind()
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


class StrictServer(FakeServer):
    """Refuses like the real route: bodies over the protocol limit with 413, and chosen seqs with 400."""

    def __init__(self, *, body_limit=None, bad_seqs=(), cap=None):
        super().__init__()
        from nodeagent import protocol

        self.body_limit = body_limit or protocol.MAX_LOG_REQUEST_BYTES
        self.bad_seqs = set(bad_seqs)
        self.cap = cap
        self.sizes: list[int] = []
        self.gaps: dict[int, dict] = {}
        self.kept = 0

    def send(self, body):
        from nodeagent import protocol

        size = len(protocol.encode_json(body))
        self.sizes.append(size)
        if size > self.body_limit:
            raise Refused(413, "log_batch_too_large", {})
        if any(c["seq"] in self.bad_seqs for c in body["chunks"]):
            raise Refused(400, "invalid_log_batch", {})
        for g in body.get("gaps", []):
            self.gaps[g["seq"]] = g
        capped = False
        for c in body["chunks"]:
            if self.cap is not None and self.kept + len(c["data"]) > self.cap:
                capped = True
                break
            self.kept += len(c["data"])
            self.stored.setdefault(c["seq"], c)
        return {"stored": len(body["chunks"]), "capped": capped}


def test_batches_are_sized_by_their_encoded_body_and_control_characters_arrive_byte_exact(tmp_path):
    from nodeagent import protocol

    server = StrictServer()
    s = shipper(tmp_path, server)
    raw = bytes(range(1, 32)) * 40_000  # each byte escapes to 6 on the wire: 1.2 MB becomes ~7 MB
    for i in range(0, len(raw), 50_000):
        s.feed("stdout", raw[i : i + 50_000])
    s.finish()
    assert s.ship(force=True) is True
    assert max(server.sizes) <= protocol.MAX_LOG_REQUEST_BYTES and len(server.sizes) >= 2
    assert server.text() == raw.decode()


def test_a_batch_refused_as_too_large_is_split_and_sent_again(tmp_path):
    server = StrictServer(body_limit=150_000)  # a server with a smaller limit than ours
    s = shipper(tmp_path, server)
    data = b"".join(f"line {i}\n".encode() for i in range(60_000))
    s.feed("stdout", data)
    s.finish()
    assert s.ship(force=True) is True
    assert server.text() == data.decode() and not server.gaps


def test_a_chunk_refused_even_alone_becomes_a_recorded_gap_and_the_rest_is_stored(tmp_path):
    server = StrictServer(bad_seqs={1})
    s = shipper(tmp_path, server)
    s.feed("stdout", b"a" * CHUNK_BYTES + b"b" * CHUNK_BYTES + b"c" * 10)
    s.finish()
    assert s.ship(force=True) is True
    assert sorted(server.stored) == [0, 2]
    assert server.gaps == {
        1: {"seq": 1, "offset": CHUNK_BYTES, "bytes": CHUNK_BYTES, "reason": "400 invalid_log_batch"}
    }


def test_once_the_server_says_capped_nothing_more_is_taken_or_sent(tmp_path):
    server = StrictServer(cap=100)
    s = shipper(tmp_path, server)
    s.feed("stdout", b"x" * 150)
    s.finish()
    assert s.ship(force=True) is True and s.capped
    sent = len(server.sizes)
    s.feed("stdout", b"more output\n")
    s.finish()
    assert s.ship(force=True) is True and len(server.sizes) == sent
    assert shipper(tmp_path, server).capped  # remembered across an agent restart


def test_reading_the_log_again_from_the_start_adds_only_what_is_new_even_mid_utf8_sequence(tmp_path):
    server, clock = FakeServer(), Clock()
    s = shipper(tmp_path, server, clock)
    text = "欧拉 line\n".encode() * 3
    s.rewind()  # the engine log's reader always starts so
    s.feed("stdout", text[:4])  # ends inside the second character
    s.ship()
    s.rewind()  # the follow stream ended early: a plain read returns everything from the first byte
    s.feed("stdout", text)
    s.finish()
    assert s.ship(force=True) is True
    assert server.text() == text.decode()


def test_a_reopened_stream_takes_only_what_is_new_and_starts_a_little_before_the_last_frame():
    from nodeagent.enginelog import LogCursor

    cursor = LogCursor()
    t = 1_764_500_000_000_000_000  # engine timestamps are ns since the epoch
    first = [(t + 1, b"a" * 10), (t + 1, b"b" * 5 + b"\n"), (t + 2, b"c" * 7 + b"\n")]  # a long line's two partials
    assert b"".join(cursor.take(ts, d, "stdout") for ts, d in first) == b"a" * 10 + b"b" * 5 + b"\n" + b"c" * 7 + b"\n"
    assert cursor.since == t + 2 - LogCursor.REOPEN_MARGIN_NS
    cursor.reopen()  # the engine resends from a little before the last frame
    again = [(t + 1, b"a" * 10), (t + 1, b"b" * 5 + b"\n"), (t + 2, b"c" * 7 + b"\n"), (t + 3, b"d\n"), (t + 3, b"e\n")]
    assert b"".join(cursor.take(ts, d, "stdout") for ts, d in again) == b"d\n"  # e: a second whole line at t+3
    assert cursor.take(None, b"unstamped") == b"unstamped"
    assert not cursor.rotated_away


def test_the_entries_the_engine_resends_at_a_rotation_are_taken_once_and_so_is_the_other_streams_interleaving():
    from nodeagent.enginelog import LogCursor

    cursor = LogCursor()
    frames = [
        ("stderr", 10, b"e1\n"),
        ("stderr", 11, b"e2\n"),
        ("stdout", 9, b"o1\n"),  # stamped before, written after: the other stream's order is its own
        ("stderr", 10, b"e1\n"),  # Docker 20.10 resends the last entries at a rotation
        ("stderr", 11, b"e2\n"),
        ("stderr", 12, b"e3\n"),
        ("stdout", 13, b"o2\n"),
    ]
    assert b"".join(cursor.take(ts, d, k) for k, ts, d in frames) == b"e1\ne2\no1\ne3\no2\n"
    cursor.reopen()  # since a second before 13: everything comes again
    assert b"".join(cursor.take(ts, d, k) for k, ts, d in frames) == b""
    assert cursor.take(14, b"o3\n", "stdout") == b"o3\n" and not cursor.rotated_away


def test_a_reopened_stream_that_lost_the_frame_it_stopped_at_says_so():
    from nodeagent.enginelog import LogCursor

    cursor = LogCursor()
    cursor.take(5, b"out\n", "stdout")
    cursor.take(7, b"err\n", "stderr")
    cursor.reopen()  # err@7 was deleted by a rotation; a stdout frame first says nothing about it
    assert cursor.take(9, b"out2\n", "stdout") == b"out2\n" and not cursor.rotated_away
    assert cursor.take(12, b"err3\n", "stderr") == b"err3\n" and cursor.rotated_away


def test_the_engines_timestamps_parse_to_nanoseconds():
    from nodeagent.docker_runner import parse_stamp

    assert parse_stamp(b"1970-01-01T00:00:01.000000002Z") == 1_000_000_002
    assert parse_stamp(b"1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert parse_stamp(b"1970-01-01T00:00:01Z") == 1_000_000_000
    assert parse_stamp(b"not a stamp") is None


def test_a_replay_skips_each_stream_by_its_own_count_whatever_the_engines_interleaving(tmp_path):
    server = FakeServer()
    s = shipper(tmp_path, server)
    for stream, data in [("stdout", b"o1\n"), ("stderr", b"e1\n"), ("stdout", b"o2\n")]:
        s.feed(stream, data)  # as the attach gave them
    s.finish()
    s.ship(force=True)
    again = shipper(tmp_path, server)  # a restarted agent: the engine's copy, interleaved its own way
    again.rewind()
    for stream, data in [("stderr", b"e1\n"), ("stdout", b"o1\n"), ("stdout", b"o2\n"), ("stderr", b"e2\n")]:
        again.feed(stream, data)
    again.finish()
    again.ship(force=True)
    assert server.text() == "o1\ne1\no2\ne2\n"


def test_invalid_utf8_is_counted_as_the_engine_stores_it_so_a_replay_lines_up(tmp_path):
    server = FakeServer()
    s = shipper(tmp_path, server)
    s.feed("stdout", b"a\xffb\xe6\xac")  # an invalid byte, and a sequence torn by the end of a read
    s.feed("stdout", b"\xa7c\n")
    s.finish()
    s.ship(force=True)
    assert s.resume_ends == {"stdout": 0, "stderr": 0}  # the shipper as loaded; its chunks carry the counts
    again = shipper(tmp_path, server)
    assert again.resume_ends == {"stdout": len("a\ufffdb欧c\n".encode()), "stderr": 0}
    again.rewind()
    again.feed("stdout", "a\ufffdb欧c\n".encode() + b"more\n")  # json-file replaced the invalid byte
    again.finish()
    again.ship(force=True)
    assert "".join(server.stored[k]["data"] for k in sorted(server.stored)) == "a\ufffdb欧c\nmore\n"


def test_a_recorded_gap_is_sent_with_its_offset_and_what_follows_counts_as_new(tmp_path):
    server = StrictServer()
    s = shipper(tmp_path, server)
    s.rewind()
    s.feed("stdout", b"first\n")
    s.record_gap("rotated away")
    s.feed("stdout", b"first\n")  # no longer skipped by count: the engine's copy does not line up
    s.finish()
    assert s.ship(force=True) is True
    assert server.gaps == {1: {"seq": 1, "offset": 6, "bytes": 0, "reason": "rotated away"}}
    assert [server.stored[k]["offset"] for k in sorted(server.stored)] == [0, 6]
    again = shipper(tmp_path, server)
    assert again.resume_ends == {"stdout": 12, "stderr": 0} and again.resume_read_at


def test_the_engine_log_still_holds_its_first_entry_while_it_holds_less_than_all_files_but_one():
    from nodeagent.enginelog import engine_entry_bytes_at_most, engine_log_never_rotated

    assert engine_entry_bytes_at_most(b"y\n") >= len(
        '{"log":"y\\n","stream":"stdout","time":"2026-11-30T13:23:09.123456789Z"}\n'
    )
    assert engine_entry_bytes_at_most(b"\x01") >= 6 + 70
    assert engine_log_never_rotated(3 * 100 - 1, max_size=100, max_file=4)
    assert not engine_log_never_rotated(3 * 100, max_size=100, max_file=4)
    assert not engine_log_never_rotated(0, max_size=100, max_file=1)  # one file is truncated in place


def test_a_refused_last_chunk_keeps_where_a_replay_resumes(tmp_path):
    server = StrictServer(bad_seqs={0})
    s = shipper(tmp_path, server)
    s.feed("stderr", b"refused\n")
    s.finish()
    assert s.ship(force=True) is True and server.gaps
    assert shipper(tmp_path, server).resume_ends == {"stdout": 0, "stderr": 8}


def test_a_wire_batch_is_a_validated_log_batch_that_names_gaps_only_when_it_has_some():
    from nodeagent import protocol
    from nodeagent.logbatch import as_gap, wire_batch

    chunk = {"seq": 0, "offset": 0, "end": 3, "stream": "stdout", "data": "hi\n", "ends": [3, 0], "read_at": 7}
    batch, body = wire_batch([chunk])
    assert batch == [chunk] and body == {"chunks": [{"seq": 0, "offset": 0, "stream": "stdout", "data": "hi\n"}]}
    gap = as_gap(chunk, "400 invalid_log_batch")
    assert gap == {"seq": 0, "offset": 0, "end": 3, "gap": "400 invalid_log_batch", "ends": [3, 0], "read_at": 7}
    _, body = wire_batch([gap])
    assert body == {"chunks": [], "gaps": [{"seq": 0, "offset": 0, "bytes": 3, "reason": "400 invalid_log_batch"}]}
    with pytest.raises(ValueError):  # pydantic's ValidationError: a bad entry never reaches the wire
        wire_batch([{**chunk, "stream": "stdin"}])
    assert protocol.LogBatch.model_validate(body).gaps[0].bytes == 3
