"""Fair per project, end to end: project B's `job.queued` webhook delivery latency with and without project A
flooding job events (arrays of 10,000 tasks submitted and cancelled) while A keeps 20 hooks to a black hole; then
B's per-minute schedule ticks while A has thousands of per-minute schedules.

    DATABASE_URL=postgres://root@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/fairness.py [--events 200000] [--minutes 3] [--a-schedules 5000]

Real processes (tests/e2e/harness.py: web, worker-control, worker, worker-dispatch, beat, their own Redis) on
a scratch PostgreSQL database (created and dropped). The black hole accepts connections and never answers, so
each of A's tries lasts the whole EULER_WEBHOOK_TIMEOUT (5 s). B's latency is the receipt time at B's receiver
minus the event's `created_at` in the payload (one clock: the same machine). B's schedule lateness is the time
its run row was written minus the tick.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SPEC = {"name": "flood", "image": "euler-test/busybox", "command": ["true"], "cpu_milli": 100,
        "memory_bytes": 64 << 20, "timeout_seconds": 600}  # fmt: skip


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


class BlackHole:
    """Accepts connections and never answers (a receiver that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            if len(self.held) > 2000:
                self.held.pop(0).close()

    def close(self) -> None:
        self.stopped = True
        self.sock.close()
        for c in self.held:
            c.close()


class Receiver:
    """B's receiver: records (event id, job id, created_at, received at) of each delivery."""

    def __init__(self) -> None:
        got = self.got = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                at = time.time()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                event = json.loads(body)
                created = datetime.fromisoformat(event["created_at"]).timestamp()
                got.append((event["data"]["job"]["id"], created, at))

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def sample_b(b_project, receiver: Receiver, *, seconds: float, every: float = 0.5, during=None) -> list[float]:
    """Submit one job in B every `every` s for `seconds` (and while `during` is alive); wait for their
    deliveries; their latencies (s)."""
    from jobs import services

    ids = []
    end = time.monotonic() + seconds
    while time.monotonic() < end or (during is not None and during.is_alive()):
        ids.append(services.job_submit(project=b_project, spec={**SPEC, "name": "b"}).pk)
        time.sleep(every)
    wanted = set(ids)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and wanted - {j for j, _, _ in receiver.got}:
        time.sleep(0.2)
    return [at - created for j, created, at in receiver.got if j in wanted]


def flood_a(a_project, *, events: int, count: int, out: dict) -> None:
    from django.db import connection

    from jobs import arrays

    started, made = time.monotonic(), 0
    try:
        while made < events:
            arr = arrays.array_submit(project=a_project, spec=dict(SPEC), array={"count": count}, depends_on=[])
            arrays.array_cancel(project=a_project, array_id=arr.pk)
            made += 2 * count
    finally:
        out["events"], out["seconds"] = made, time.monotonic() - started
        connection.close()


def webhooks_part(args, a, b) -> None:
    from jobs.models import JobEvent
    from workflows import webhooks
    from workflows.models import Delivery

    hole, receiver = BlackHole(), Receiver()
    try:
        webhooks.webhook_create(project=b, url=receiver.url, event_names=["job.queued"])
        warm = sample_b(b, receiver, seconds=0.1)  # the workers' first pass (imports, connections) is not measured
        print(f"warm-up delivery after {warm[0]:.1f} s", flush=True)
        receiver.got.clear()
        alone = sample_b(b, receiver, seconds=args.alone_seconds)
        print(f"B alone: {len(alone)} deliveries, job.queued latency p50 {pct(alone, 50):.2f} s, "
              f"p99 {pct(alone, 99):.2f} s, max {max(alone):.2f} s  ({load()})", flush=True)  # fmt: skip
        for i in range(20):
            webhooks.webhook_create(project=a, url=f"http://127.0.0.1:{hole.port}/hook/{i}",
                                    event_names=["job.state_changed"])  # fmt: skip
        before = receiver.got[:]
        receiver.got.clear()
        out: dict = {}
        flood = threading.Thread(target=flood_a, args=(a,), kwargs={"events": args.events, "count": 10_000, "out": out})
        flood.start()
        time.sleep(1.0)
        contended = sample_b(b, receiver, seconds=args.flood_seconds, during=flood)
        flood.join()
        a_events = JobEvent.objects.filter(job__project=a).count()
        a_open = Delivery.objects.filter(hook__project=a, state__in=["pending", "sending"]).count()
        a_all = Delivery.objects.filter(hook__project=a).count()
        print(
            f"A flooded {out['events']} job events ({a_events} rows) in {out['seconds']:.1f} s; A's deliveries: "
            f"{a_all} made, {a_open} open (cap {os.environ['EULER_WEBHOOK_PENDING_PER_PROJECT']})",
            flush=True,
        )
        print(f"B with A: {len(contended)} deliveries, job.queued latency p50 {pct(contended, 50):.2f} s, "
              f"p99 {pct(contended, 99):.2f} s, max {max(contended):.2f} s  ({load()})", flush=True)  # fmt: skip
        receiver.got[:0] = before
    finally:
        hole.close()
        receiver.close()


def schedules_part(args, a, b) -> None:
    from django.utils import timezone

    from quotas.models import Quota
    from workflows import schedules
    from workflows.models import Schedule, ScheduleRun

    Quota.objects.filter(project=a).update(max_schedules=args.a_schedules, schedule_runs_per_minute=args.a_schedules)
    first = (timezone.now() + timedelta(minutes=1)).replace(second=0, microsecond=0)
    if (first - timezone.now()).total_seconds() < 20:
        first += timedelta(minutes=1)
    Schedule.objects.bulk_create(
        [Schedule(project=a, name=f"a{i}", cron="* * * * *", spec=dict(SPEC), overlap=args.a_overlap,
                  next_tick_at=first, min_period=60) for i in range(args.a_schedules)],
        batch_size=1000,
    )  # fmt: skip
    schedules.schedule_create(project=b, fields={"name": "b", "cron": "* * * * *", "timezone": "UTC",
                                                 "overlap": "allow", "enabled": True}, spec=dict(SPEC))  # fmt: skip
    Schedule.objects.filter(project=b).update(next_tick_at=first)
    end = first + timedelta(minutes=args.minutes)
    print(f"schedules: A {args.a_schedules} per-minute ({args.a_overlap}), B 1 per-minute; ticks from "
          f"{first:%H:%M} for {args.minutes} min  ({load()})", flush=True)  # fmt: skip
    while timezone.now() < end + timedelta(seconds=55):
        time.sleep(1.0)
    ticks = [first + timedelta(minutes=m) for m in range(args.minutes)]
    b_late, lines = [], []
    for tick in ticks:
        b_run = ScheduleRun.objects.filter(schedule__project=b, tick=tick).first()
        a_runs = ScheduleRun.objects.filter(schedule__project=a, tick=tick)
        a_times = sorted((r - tick).total_seconds() for r in a_runs.values_list("created_at", flat=True))
        late = (b_run.created_at - tick).total_seconds() if b_run else float("nan")
        b_late.append(late)
        lines.append(f"  {tick:%H:%M}: B {late:.2f} s late; A ran {len(a_times)} of {args.a_schedules} at this tick"
                     + (f", p50 {pct(a_times, 50):.1f} s, last {a_times[-1]:.1f} s late" if a_times else ""))  # fmt: skip
    print("\n".join(lines))
    catch_up = ScheduleRun.objects.filter(schedule__project=a, catch_up=True).count()
    print(f"B's per-minute ticks: max {max(b_late):.2f} s late over {len(ticks)} minutes; A's catch-up runs "
          f"(ticks it missed, one run for the latest): {catch_up}  ({load()})", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="job events A floods (arrays + cancels)")
    parser.add_argument("--alone-seconds", type=float, default=20.0)
    parser.add_argument("--flood-seconds", type=float, default=30.0, help="B samples while A floods, and so long")
    parser.add_argument("--minutes", type=int, default=3, help="minutes of schedule ticks watched (0: skip)")
    parser.add_argument("--a-schedules", type=int, default=5000)
    parser.add_argument("--a-overlap", default="skip", choices=["skip", "allow"])
    parser.add_argument("--no-webhooks", action="store_true")
    parser.add_argument("--keep-logs", action="store_true", help="keep the processes' logs (their path is printed)")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["EULER_WEBHOOK_ALLOWED_NETWORKS"] = "127.0.0.0/8"
    os.environ.setdefault("EULER_WEBHOOK_PENDING_PER_PROJECT", "1000")
    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("set DATABASE_URL to PostgreSQL")
    connection.settings_dict["TEST"]["NAME"] = f"euler_bench_fair_{os.getpid()}"
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    platform = None
    try:
        from quotas.models import Quota
        from quotas.services import project_create
        from tests.e2e.harness import Platform

        a, b = project_create(name="flood-a"), project_create(name="quiet-b")
        Quota.objects.update(max_concurrent_jobs=10**7, cpu_core_seconds=10**15)
        env = {k: os.environ[k] for k in ("EULER_WEBHOOK_ALLOWED_NETWORKS", "EULER_WEBHOOK_PENDING_PER_PROJECT")}
        tmp = Path(tempfile.mkdtemp(prefix="euler-fair-"))
        platform = Platform(tmp, env=env).start(timeout=180)
        print(f"platform up (web, worker-control, worker, worker-dispatch, beat; PostgreSQL)  ({load()})", flush=True)
        if not args.no_webhooks:
            webhooks_part(args, a, b)
        if args.minutes > 0:
            schedules_part(args, a, b)
    finally:
        if platform is not None:
            platform.stop()
            if args.keep_logs:
                print(f"logs: {tmp / 'logs'}")
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()
