"""Liveness in Redis: heartbeats write the node row only on change, last-seen times land in batches, offline
detection reads Redis (with the control-plane guards), and the interval follows the live web processes."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from nodes import cadence, liveness, livestore, services
from nodes.models import EventKind, Node

pytestmark = pytest.mark.django_db


def _writes(ctx: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in ctx.captured_queries if q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT"))]


@pytest.fixture
def known_node(platform_node, heartbeat):
    """An approved node this process has seen beat (its row cached, its hooks just run)."""
    node, cred = platform_node
    services.node_approve(node=node)
    assert heartbeat(cred).status_code == 200
    return node, cred


def test_a_heartbeat_with_nothing_changed_touches_no_database_row(known_node, heartbeat, django_assert_num_queries):
    node, cred = known_node
    with django_assert_num_queries(0):
        r = heartbeat(cred)
    assert r.status_code == 200 and r.json()["approval"] == "approved"
    assert livestore.seen_many([node.pk])[node.pk] >= time.time() - 60


def test_a_change_is_written_once(known_node, heartbeat):
    node, cred = known_node
    with CaptureQueriesContext(connection) as first:
        heartbeat(cred, cpu_milli=2000)  # less than approved: written at once (more waits for an operator)
    with CaptureQueriesContext(connection) as second:
        heartbeat(cred, cpu_milli=2000)
    assert len([q for q in _writes(first) if "nodes_node" in q]) == 1
    assert _writes(second) == []
    node.refresh_from_db()
    assert node.cpu_milli == 2000


def test_live_gpu_figures_are_usage_in_redis_not_a_row_write(enroll, platform_token, heartbeat):
    from tests.nodes.conftest import gpu

    node, cred = enroll(platform_token, "g1", resources={"cpu_milli": 1000, "memory_bytes": 1, "gpus": [gpu("GPU-a")]})
    services.node_approve(node=node)
    heartbeat(cred, gpus=[gpu("GPU-a")])
    with CaptureQueriesContext(connection) as ctx:
        heartbeat(cred, gpus=[{**gpu("GPU-a"), "utilization": 88.0}])
    assert _writes(ctx) == []
    assert livestore.usage_many([node.pk])[node.pk]["gpus"][0]["utilization"] == 88.0


def test_the_batch_flush_lands_last_heartbeat_at_for_many_nodes_in_one_statement():
    now = time.time()
    nodes = [Node.objects.create(name=f"f{i}", online=True, last_heartbeat_at=timezone.now() - timedelta(hours=1))
             for i in range(40)]  # fmt: skip
    pipe = livestore.client().pipeline()
    for i, node in enumerate(nodes):
        pipe.zadd(f"{livestore.ns()}seen", {str(node.pk): now - i * 0.01})
    pipe.execute()
    with CaptureQueriesContext(connection) as ctx:
        assert liveness.flush_seen() == 40
    assert len(_writes(ctx)) == 1
    for i, node in enumerate(nodes):
        node.refresh_from_db()
        assert abs(node.last_heartbeat_at.timestamp() - (now - i * 0.01)) < 0.001
    with CaptureQueriesContext(connection) as again:
        liveness.flush_seen()  # only the overlap is offered again; times never move backwards
    assert len(_writes(again)) <= 1


def _seen_5_minutes_ago(node) -> None:
    """The row and Redis both last saw the node 5 minutes ago: only the test's own heartbeat can make it recent
    (the enrollment and the fixture's heartbeat also wrote a last-seen time, which must not count)."""
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    livestore.client().zadd(f"{livestore.ns()}seen", {str(node.pk): time.time() - 300})


def test_a_heartbeat_lands_in_the_row_through_the_flush(known_node, heartbeat):
    node, cred = known_node
    _seen_5_minutes_ago(node)
    before = timezone.now()
    heartbeat(cred)
    liveness.flush_seen()
    node.refresh_from_db()
    assert node.last_heartbeat_at >= before


def test_the_api_shows_the_live_last_seen_time(known_node, heartbeat):
    node, cred = known_node
    _seen_5_minutes_ago(node)
    before = timezone.now()
    heartbeat(cred)
    [shown] = liveness.live_last_seen(Node.objects.filter(pk=node.pk))
    assert shown.last_heartbeat_at >= before


def _online(name: str, db_age: float, *, seen_age: float | None = None, interval: float = 5) -> Node:
    now = timezone.now()
    node = Node.objects.create(name=name, approval="approved", trust="platform", online=True,
                               last_heartbeat_at=now - timedelta(seconds=db_age))  # fmt: skip
    if seen_age is not None:
        livestore.client().zadd(f"{livestore.ns()}seen", {str(node.pk): time.time() - seen_age})
        livestore.client().hset(livestore.node_key(node.pk), "iv", interval)
    return node


@pytest.fixture
def windows(settings):
    settings.EULER_NODE_OFFLINE_AFTER = 30
    settings.EULER_NODE_SILENCE_HOLD = 90
    settings.EULER_NODE_OFFLINE_MISSED = 3
    livestore.note_born(time.time() - 3600)  # this Redis has held liveness for an hour


def test_offline_detection_reads_the_live_time_from_redis_not_the_lagging_row(windows):
    alive = _online("alive", db_age=45, seen_age=2)  # the row trails (no flush yet); Redis heard it
    dead = _online("dead", db_age=45, seen_age=40)
    assert liveness.mark_offline() == [dead.pk]
    alive.refresh_from_db()
    assert alive.online


def test_a_node_told_a_long_interval_gets_several_of_them_before_it_is_offline(windows):
    slow = _online("slow", db_age=50, seen_age=50, interval=20)  # 3 × 20 s = 60 s window
    fast = _online("fast", db_age=50, seen_age=50, interval=5)
    _online("other", db_age=0, seen_age=0)
    assert liveness.mark_offline() == [fast.pk]
    later = timezone.now() + timedelta(seconds=11)
    assert liveness.mark_offline(now=later) == [slow.pk]


def test_every_node_silent_at_once_is_a_control_plane_gap(windows):
    a = _online("a", db_age=45, seen_age=40)
    b = _online("b", db_age=45, seen_age=42)
    assert liveness.mark_offline() == []
    assert sorted(liveness.mark_offline(now=timezone.now() + timedelta(seconds=85))) == sorted([a.pk, b.pk])


def _beats(node: Node, now, start: int, end: int) -> None:
    """The node beats every 5 s from now+start to now+end (seconds), into Redis only."""
    for t in range(start, end + 1, 5):
        at = now + timedelta(seconds=t)
        livestore.client().zadd(f"{livestore.ns()}seen", {str(node.pk): at.timestamp()})
        liveness.note_intake(at)


def test_an_emptied_redis_is_a_gap_not_a_mass_death(windows):
    now = timezone.now()
    first, *others = [_online(f"n{i}", db_age=12, seen_age=1) for i in range(3)]  # rows a flush behind
    _online("never-heard", db_age=600)  # silent long before Redis lost everything
    livestore.reset()  # Redis restarted empty
    _beats(first, now, 1, 21)  # the first heartbeat into the new Redis starts its clock
    gone = liveness.mark_offline(now=now + timedelta(seconds=25))  # the rows are 37 s old; Redis knows one node
    assert [Node.objects.get(pk=pk).name for pk in gone] == ["never-heard"]
    assert Node.objects.filter(online=True).count() == 3
    # Nodes that do not beat into the new Redis within a whole window are offline after all.
    _beats(first, now, 26, 36)
    assert sorted(liveness.mark_offline(now=now + timedelta(seconds=40))) == sorted(n.pk for n in others)


def test_the_offline_transition_is_written_once_with_an_event_and_the_node_comes_back(known_node, heartbeat, settings):
    node, cred = known_node
    later = timezone.now() + timedelta(seconds=settings.EULER_NODE_OFFLINE_AFTER * 3 + 61)
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))
    assert liveness.mark_offline(now=later) == [node.pk]
    assert liveness.mark_offline(now=later) == []
    assert heartbeat(cred).status_code == 200  # the cached copy was dropped: the full path brings it back
    node.refresh_from_db()
    assert node.online and node.events.filter(kind=EventKind.ONLINE).count() == 1


def _register(name: str, budget: float, ttl: float = 15) -> None:
    livestore.client().zadd(f"{livestore.ns()}webs", {f"{name}|{budget:g}": time.time() + ttl})


def test_the_interval_follows_the_number_of_live_web_processes(settings):
    settings.EULER_NODE_HEARTBEAT_BUDGET = 500
    settings.EULER_NODE_HEARTBEAT_MIN_INTERVAL = 1
    settings.EULER_NODE_HEARTBEAT_JITTER = 0
    pipe = livestore.client().pipeline()
    for i in range(10_000):
        pipe.zadd(f"{livestore.ns()}seen", {str(10**9 + i): time.time()})
    pipe.execute()
    cadence.register_web()
    assert cadence.interval_now() == 20  # 10,000 nodes ÷ 500/s: this process alone
    _register("web-b", 500)
    cadence.register_web()
    assert cadence.interval_now() == 10  # a second process halves it
    _register("web-c", 1000, ttl=-1)  # a process that stopped renewing its registration
    cadence.register_web()
    assert cadence.interval_now() == 10
    livestore.client().zremrangebyscore(f"{livestore.ns()}webs", "-inf", "+inf")
    cadence.register_web()
    assert cadence.interval_now() == 20  # web-b went away: back to this process's budget


def test_the_heartbeat_reply_carries_the_interval_from_the_live_budget(known_node, heartbeat, settings):
    settings.EULER_NODE_HEARTBEAT_BUDGET = 1
    settings.EULER_NODE_HEARTBEAT_JITTER = 0
    settings.EULER_NODE_HEARTBEAT_MAX_INTERVAL = 600
    _, cred = known_node
    cadence.expire_registration()
    assert heartbeat(cred).json()["heartbeat_interval"] == pytest.approx(5)  # 1 node ÷ 1/s, at least MIN (5 s)
    pipe = livestore.client().pipeline()
    for i in range(99):
        pipe.zadd(f"{livestore.ns()}seen", {str(10**9 + i): time.time()})
    pipe.execute()
    cadence.expire_registration()
    assert heartbeat(cred).json()["heartbeat_interval"] == pytest.approx(100)


def test_the_poll_wait_follows_the_interval_between_the_protocol_default_and_the_cap(known_node, heartbeat, settings):
    settings.EULER_NODE_HEARTBEAT_BUDGET = 1
    settings.EULER_NODE_HEARTBEAT_JITTER = 0
    settings.EULER_NODE_HEARTBEAT_MAX_INTERVAL = 600
    settings.EULER_NODE_POLL_WAIT_MAX = 55
    _, cred = known_node
    cadence.expire_registration()
    reply = heartbeat(cred).json()
    assert reply["heartbeat_interval"] == pytest.approx(5) and reply["poll_wait"] == 25  # never below the default
    pipe = livestore.client().pipeline()
    for i in range(39):
        pipe.zadd(f"{livestore.ns()}seen", {str(10**9 + i): time.time()})
    pipe.execute()
    cadence.expire_registration()
    reply = heartbeat(cred).json()
    assert reply["heartbeat_interval"] == pytest.approx(40) and reply["poll_wait"] == pytest.approx(40)
    for i in range(39, 99):
        livestore.client().zadd(f"{livestore.ns()}seen", {str(10**9 + i): time.time()})
    cadence.expire_registration()
    assert heartbeat(cred).json()["poll_wait"] == 55  # at most the cap (a proxy's read timeout)


def test_the_pure_poll_wait():
    from nodes import policy

    assert policy.poll_wait(3, floor=25, cap=55) == 25
    assert policy.poll_wait(40, floor=25, cap=55) == 40
    assert policy.poll_wait(400, floor=25, cap=55) == 55
    assert policy.poll_wait(40, floor=25, cap=20) == 20  # an operator's cap below the default wins


def test_with_redis_down_a_known_node_heartbeat_writes_the_row_as_before(known_node, heartbeat, monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    node, cred = known_node
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))

    def down(*args, **kwargs):
        raise RedisConnectionError("Redis is down")

    monkeypatch.setattr(livestore, "client", down)
    r = heartbeat(cred)
    assert r.status_code == 200 and r.json()["approval"] == "approved"
    node.refresh_from_db()
    assert (timezone.now() - node.last_heartbeat_at).total_seconds() < 30


def _web_load(lag: float, rate: float, *, age: float = 0, proc: str = "web-a") -> None:
    livestore.client().hset(f"{livestore.ns()}webload", proc, f"{time.time() - age!r},{lag!r},{rate!r}")


def test_a_web_tier_running_late_gives_silent_nodes_more_time(windows):
    late = _online("late", db_age=45, seen_age=40)  # 5 s × 3 = 15 s < 30 s window: 10 s past it
    _online("other", db_age=0, seen_age=0)
    _web_load(lag=6, rate=1000)  # one web process runs 6 s late but takes what the nodes send
    _web_load(lag=0.1, rate=1000, proc="web-b")
    assert liveness.mark_offline() == []  # 40 s < 30 s + 2 × 6 s
    assert liveness.mark_offline(now=timezone.now() + timedelta(seconds=5)) == [late.pk]


def test_a_web_tier_far_behind_holds_offline_marking_up_to_the_silence_hold(windows):
    late = _online("late", db_age=45, seen_age=40)
    other = _online("other", db_age=0, seen_age=0)
    now = timezone.now()
    _web_load(lag=2, rate=0.01)  # late, and hearing almost none of the heartbeats the nodes send
    _beats(other, now, 55, 60)
    assert liveness.mark_offline(now=now + timedelta(seconds=60)) == []
    _web_load(lag=2, rate=0.01)
    _beats(other, now, 80, 85)
    assert liveness.mark_offline(now=now + timedelta(seconds=85)) == [late.pk]  # past 30 + 90 s


def test_a_web_tier_on_time_or_a_stale_report_changes_nothing(windows):
    late = _online("late", db_age=45, seen_age=40)
    _online("other", db_age=0, seen_age=0)
    _web_load(lag=30, rate=0, age=60)  # a process that stopped reporting a minute ago
    _web_load(lag=0.2, rate=0, proc="web-b")
    assert liveness.mark_offline() == [late.pk]
    assert livestore.client().hexists(f"{livestore.ns()}webload", "web-a") == 0


def test_the_web_process_reports_its_event_loop_lag_and_intake_with_its_registration():
    from nodes import webload

    webload.reset()
    now = time.monotonic()
    webload.record(0.01, now - 20)  # older than the window: forgotten
    webload.record(3.0, now - 1)
    webload.record(0.02, now)
    for _ in range(50):
        webload.beat()
    cadence.register_web()
    [(lag, rate)] = livestore.web_loads(time.time(), 15)
    assert lag == pytest.approx(3.0) and rate > 0
    webload.waited(7.5)  # a heartbeat that waited 7.5 s for a heartbeat thread was heard that late
    cadence.register_web()
    [(lag, _)] = livestore.web_loads(time.time(), 15)
    assert lag == pytest.approx(7.5)


def test_approving_many_nodes_at_once_is_node_approve_for_each_and_drops_their_cached_copies(
    enroll, heartbeat, django_capture_on_commit_callbacks
):
    from audit.models import AuditEvent

    pairs = [enroll(services.enrollment_token_create(trust="platform")[1], f"bulk{i}") for i in range(3)]
    for _, cred in pairs:
        assert heartbeat(cred).json()["approval"] == "pending"  # cached as pending
    with django_capture_on_commit_callbacks(execute=True):
        done = services.node_approve_many(nodes=[n for n, _ in pairs], trust="platform", public_pool=True)
    assert len(done) == 3
    for node, cred in pairs:
        node.refresh_from_db()
        assert node.approval == "approved" and node.public_pool and node.gpu_fingerprint
        assert node.events.filter(kind=EventKind.APPROVED).count() == 1
        assert heartbeat(cred).json()["approval"] == "approved"  # the generation moved: the row is read again
    assert AuditEvent.objects.filter(action="node.approved").count() == 3


def test_the_heartbeat_a_pass_judged_by_is_not_taken_for_a_newer_one_and_any_later_one_is(windows):
    """The re-check right before a node goes offline (nodes.offline._heard_since) compares the Redis time the
    pass judged by exactly, through the same microsecond datetime: equal for that heartbeat, newer for the next.

    "The next" is a heartbeat a microsecond later, the resolution the pass and the node row keep, taken as that
    datetime's own float. Not `seen + 0.000_001`: near 1.8e9 s a double steps by 0.24 us, so that sum can round to
    the same microsecond as `seen` (about 1 in 20 random times; CI run of stop 50 drew one)."""
    from nodes import offline

    node = _online("racing", db_age=300, seen_age=45)
    ((pk, _, last),) = [s for s in offline.silent_nodes(timezone.now()) if s[0] == node.pk]
    assert not offline._heard_since(pk, last)  # the same heartbeat, whatever its float's digits
    seen = livestore.seen_many([pk])[pk]
    for later in ((last + timedelta(microseconds=1)).timestamp(), seen + 0.5):
        livestore.client().zadd(f"{livestore.ns()}seen", {str(pk): later})
        assert offline._heard_since(pk, last), later
