import asyncio
import math
import threading
import time

import pytest

from nodeagent import protocol
from nodes import channel, services

POLL = "/node-api/v1/poll"


def _assignment(attempt_id: int = 1) -> protocol.Assignment:
    return protocol.Assignment(
        attempt_id=attempt_id,
        job_id=1,
        attempt_number=1,
        image="euler-test/busybox",
        command=["true"],
        cpu_milli=100,
        memory_bytes=1 << 20,
        timeout_seconds=60,
    )


@pytest.fixture
def provider(monkeypatch):
    state = {"work": [], "asked": threading.Event(), "nodes": []}

    def fn(node):
        state["nodes"].append(node.name)
        state["asked"].set()
        return list(state["work"]), []

    monkeypatch.setattr(channel, "_poll_providers", [fn])
    return state


@pytest.mark.django_db
def test_a_poll_answers_at_once_when_the_provider_has_work(platform_node, node_client, provider):
    node, cred = platform_node
    services.node_approve(node=node)
    provider["work"] = [_assignment(5)]
    r = node_client(cred).post(POLL, {"wait": 20}, format="json")
    assert r.status_code == 200
    assert [a["attempt_id"] for a in r.json()["assignments"]] == [5]


@pytest.mark.django_db
def test_a_poll_with_nothing_to_do_answers_empty_after_its_wait(platform_node, node_client, provider):
    node, cred = platform_node
    services.node_approve(node=node)
    r = node_client(cred).post(POLL, {"wait": 0}, format="json")
    assert r.json() == {"assignments": [], "commands": []}


@pytest.mark.django_db
def test_a_pending_node_is_not_offered_work(platform_node, node_client, provider):
    _, cred = platform_node
    provider["work"] = [_assignment()]
    r = node_client(cred).post(POLL, {"wait": 0}, format="json")
    assert r.json()["assignments"] == [] and provider["nodes"] == []


@pytest.mark.django_db
def test_a_malformed_poll_gets_400_and_a_bad_credential_401(platform_node, node_client, provider):
    _, cred = platform_node
    r = node_client(cred).post(POLL, {"wait": 1000}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_poll"
    r = node_client("euler_node_" + "z" * 43).post(POLL, {}, format="json")
    assert r.status_code == 401 and r.json()["code"] == "invalid_node_credential"


@pytest.mark.django_db
def test_a_poll_over_plain_http_from_outside_gets_403(platform_node, node_client):
    _, cred = platform_node
    r = node_client(cred, REMOTE_ADDR="198.51.100.4").post(POLL, {}, format="json")
    assert r.status_code == 403 and r.json()["code"] == "https_required"


@pytest.mark.django_db(transaction=True)
def test_a_wake_up_answers_a_held_poll_with_the_new_work(platform_node, node_client, provider):
    node, cred = platform_node
    services.node_approve(node=node)
    result = {}

    def hold():
        result["response"] = node_client(cred).post(POLL, {"wait": 30}, format="json")

    thread = threading.Thread(target=hold)
    thread.start()
    assert provider["asked"].wait(20), "the poll never asked the providers"
    provider["work"] = [_assignment(9)]
    channel.wake(node.pk)
    thread.join(25)
    assert not thread.is_alive(), "the wake-up did not answer the poll"
    assert [a["attempt_id"] for a in result["response"].json()["assignments"]] == [9]


def _in_loop(coro_fn):
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro_fn())
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0.05))
        loop.close()


async def _until(check, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.django_db(transaction=True)
def test_an_empty_answer_is_trusted_until_a_wake_up_or_its_quiet_time():
    """A poll that found nothing lets the node's next poll skip the providers (no database work for an idle
    node), until a wake-up for that node, a reconnected subscription or the providers' own `quiet_until`."""
    node_id = 987654

    async def scenario():
        listener = await channel._listener()
        assert listener.ready.is_set()
        await _until(lambda: listener.snapshot is not None)
        listener.snapshot = None  # this test is about what polls learn; the snapshot's test is below
        async with channel.Waiter(node_id) as w:
            assert not w.quiet()
            w.asked(channel.Work([], [], quiet_until=time.time() + 60))
        async with channel.Waiter(node_id) as w:
            assert w.quiet()  # nothing woke it: the next poll need not ask
        channel.wake(node_id)
        await _until(lambda: node_id not in listener.quiet)
        async with channel.Waiter(node_id) as w:
            assert not w.quiet()  # woken: ask again
            w.asked(channel.Work([_assignment()], [], quiet_until=math.inf))
            assert not w.quiet()  # work is never remembered as nothing
            w.asked(channel.Work([], []))
            assert not w.quiet()  # a provider that cannot say: ask every time
            w.asked(channel.Work([], [], quiet_until=time.time() - 1))
            assert not w.quiet()  # its quiet time is over (a redelivery is due)
        async with channel.Waiter(node_id) as w:
            channel.wake(node_id)  # a wake-up while the providers were being asked: their answer may be stale
            await _until(w.event.is_set)
            w.asked(channel.Work([], [], quiet_until=math.inf))
        async with channel.Waiter(node_id) as w:
            assert not w.quiet()
            w.asked(channel.Work([], [], quiet_until=math.inf))
        async with channel.Waiter(node_id) as w:
            assert w.quiet()
            listener._wake_all()  # what a reconnected subscription does: wake-ups may have been missed
            assert not w.quiet()

    _in_loop(scenario)


@pytest.mark.django_db(transaction=True)
def test_an_approval_ends_a_pending_node_s_quiet(platform_node):
    """The quiet must end after the approval commits: a poll answered between the row's change and its commit
    still saw a pending node and went quiet again (an invalidation sent before the commit does not end that)."""
    from django.db import transaction

    node, _ = platform_node
    written, commit = threading.Event(), threading.Event()

    def approve_and_hold_the_commit():
        with transaction.atomic():
            services.node_approve(node=node)
            written.set()
            commit.wait(10)

    async def scenario():
        listener = await channel._listener()
        await _until(lambda: listener.snapshot is not None)
        listener.snapshot = None
        async with channel.Waiter(node.pk) as w:
            w.asked(channel.Work([], [], quiet_until=math.inf))  # pending: nothing until approved
            assert w.quiet()
        approving = asyncio.create_task(asyncio.to_thread(approve_and_hold_the_commit))
        await _until(written.is_set)
        await _until(lambda: node.pk not in listener.quiet)  # the invalidation sent as the row was saved
        async with channel.Waiter(node.pk) as w:
            w.asked(channel.Work([], [], quiet_until=math.inf))  # a poll that still read the pending row
            assert w.quiet()
        commit.set()
        await approving
        await _until(lambda: node.pk not in listener.quiet)

    _in_loop(scenario)


def test_no_snapshot_unless_every_poll_provider_has_one(provider):
    """A provider that cannot name its busy nodes in one query leaves every first poll to ask it."""
    assert channel.busy_nodes() is None
