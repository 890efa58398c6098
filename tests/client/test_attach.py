"""`euler run` following its job: progress lines from the websocket's state messages (the first, after the
connect, says where the job stands and why it waits), the job read only when they do not say enough (a move back
to queued, whose reason the move does not carry; a server that does not name the node)."""

from __future__ import annotations

from types import SimpleNamespace

from euler_client.cli.attach import Attach


class Jobs:
    def __init__(self, messages: list[dict], job: dict):
        self.messages, self.job, self.reads = messages, job, 0

    def stream(self, job_id: int, *, tick: float | None = None):
        yield from self.messages

    def get(self, job_id: int) -> dict:
        self.reads += 1
        return self.job


def follow(messages: list[dict], job: dict) -> tuple[int, Jobs]:
    jobs = Jobs(messages, job)
    return Attach(SimpleNamespace(jobs=jobs), {"id": 7}).run(), jobs


def test_states_that_name_their_node_are_shown_without_reading_the_job(capsys):
    status, jobs = follow(
        [{"type": "connected"}, {"type": "state", "state": "queued", "pending_reason": "no node has 64 GPUs"},
         {"type": "state", "state": "assigned", "node": "n1"},
         {"type": "state", "state": "running", "node": "n1"}, {"type": "end", "state": "succeeded"}],
        {"id": 7, "state": "queued", "attempts": []},
    )  # fmt: skip
    assert status == 0
    assert jobs.reads == 0
    assert capsys.readouterr().err.splitlines() == [
        "euler: job 7 submitted",
        "euler: job 7 queued: no node has 64 GPUs",
        "euler: job 7 assigned to node n1",
        "euler: job 7 running on node n1",
        "euler: job 7 succeeded",
    ]


def test_a_state_without_its_node_reads_the_job_as_before(capsys):
    running = {"id": 7, "state": "running", "attempts": [{"node": "n2"}]}
    status, jobs = follow(
        [{"type": "connected"}, {"type": "state", "state": "running"}, {"type": "end", "state": "succeeded"}], running
    )
    assert status == 0
    assert jobs.reads == 1
    assert "euler: job 7 running on node n2" in capsys.readouterr().err.splitlines()


def test_a_move_back_to_queued_reads_the_job_for_its_reason(capsys):
    queued = {"id": 7, "state": "queued", "pending_reason": "waiting for retry backoff", "attempts": []}
    status, jobs = follow(
        [{"type": "connected"}, {"type": "state", "state": "running", "node": "n1"},
         {"type": "state", "state": "queued"}, {"type": "end", "state": "succeeded"}],
        queued,
    )  # fmt: skip
    assert status == 0
    assert jobs.reads == 1
    assert "euler: job 7 queued: waiting for retry backoff" in capsys.readouterr().err.splitlines()
