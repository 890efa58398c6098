"""`make up` (`python -m config.up`) stopped every way a user or a service manager stops it, and started again
with jobs that were running at the stop.

Each test starts `make up` (temporary data dir, its own port and local node name) with jobs running on its
local node and on a separately running `./euler-node`, stops it, waits 5 s (within every silence window) or
20 s (past all of them, halved: see HALVED_WINDOWS), starts it again, and checks that each job ends exactly
once, in a single attempt, with its whole log: short jobs that finished during the outage and long ones still
running. Then it stops `make up` once more. Between them the two tests cover the
stop matrix: SIGTERM to the whole process group (systemd, `timeout`, CI runners), kill -9 of the supervisor
alone, and Ctrl-C (SIGINT to the process group, as a terminal sends it) once and twice. After each stop no
process of the platform is left: none of the process tree seen just before it (supervisor, watchdog, redis,
web, worker and its pool, beat, the local node agent), the web port binds again and the embedded Redis
socket does not answer; the next start gets the same port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker
import httpx
import psutil
import pytest

from nodeagent import protocol
from tests.e2e.harness import PY, REPO, Proc, _die_with_parent, database_url, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

IMAGE = "euler-test/busybox"
TERMINAL = {"succeeded", "failed", "cancelled", "lost"}


def wait_for(check, what: str, *, timeout: float = 60, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for: {what}")
        time.sleep(every)
    return result


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class MakeUp:
    """`python -m config.up` in its own process group (as a shell runs a foreground job), on the test database,
    a short temporary data dir (its embedded Redis socket lives there), its own port and local node name."""

    def __init__(self) -> None:
        from django.conf import settings

        self.data = Path(tempfile.mkdtemp(prefix="eu-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.node_name = f"up-{uuid.uuid4().hex[:8]}"
        self.log_path = self.data / "up.log"
        drop = ("PYTEST_", "DJANGO_SETTINGS", "REDIS_URL", "DATABASE_URL", "CELERY_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        self.env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            DJANGO_DEBUG="true",
            DATABASE_URL=database_url(),
            DJANGO_SECRET_KEY=settings.SECRET_KEY,
            EULER_ENCRYPTION_KEYS=settings.EULER_ENCRYPTION_KEYS,
            EULER_NODE_HTTP_ALLOWED_NETWORKS="127.0.0.0/8,::1/128",
            EULER_DATA_DIR=str(self.data),
            EULER_LOCAL_NODE_NAME=self.node_name,
            PORT=str(self.port),
            PYTHONUNBUFFERED="1",
        )
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.seen: list[psutil.Process] = []  # every process of every start, for the teardown after a failure

    def start(self) -> MakeUp:
        from nodes.models import Node

        with open(self.log_path, "ab") as fh:
            fh.write(f"--- start {self.starts}\n".encode())
            fh.flush()
            self.proc = subprocess.Popen(
                [PY, "-m", "config.up"], cwd=REPO, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        self.starts += 1
        wait_for(self._ready, "make up answers /readyz and starts its local node", timeout=90)
        wait_for(lambda: Node.objects.filter(name=self.node_name, online=True).exists(), "the local node is online")
        wait_for(lambda: len(self.named("worker").children()) >= 2, "the worker's pool runs")
        self.seen += self.tree()
        return self

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"make up exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
        if "Ctrl-C stops everything." not in self.log().rsplit("--- start", 1)[-1]:
            return False
        try:
            return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tree(self) -> list[psutil.Process]:
        sup = psutil.Process(self.proc.pid)
        return [sup, *sup.children(recursive=True)]

    def named(self, word: str) -> psutil.Process:
        for p in psutil.Process(self.proc.pid).children():
            if word in " ".join(p.cmdline()):
                return p
        raise AssertionError(f"no child of make up runs {word!r}")

    def stop(self, how: str) -> list[psutil.Process]:
        """Stop it `how`; returns the processes of the platform still alive once it had time to stop."""
        tree = self.tree()
        assert {"redis-server", "uvicorn", "worker", "beat", "nodeagent", "watchdog.py"} <= {
            word for p in tree for word in ("redis-server", "uvicorn", "worker", "beat", "nodeagent", "watchdog.py")
            if word in " ".join(p.cmdline())
        }  # fmt: skip
        pgid = self.proc.pid
        if how == "sigint":
            os.killpg(pgid, signal.SIGINT)
        elif how == "sigint-twice":
            before = self.log().count("stopping…")
            os.killpg(pgid, signal.SIGINT)
            wait_for(lambda: self.log().count("stopping…") > before, "the stop starts", timeout=10, every=0.01)
            os.killpg(pgid, signal.SIGINT)
        elif how == "sigterm-group":
            os.killpg(pgid, signal.SIGTERM)
        elif how == "sigkill-supervisor":
            os.kill(self.proc.pid, signal.SIGKILL)
        code = self.proc.wait(timeout=60)
        assert code == (-signal.SIGKILL if how == "sigkill-supervisor" else 0), self.log()[-3000:]
        _, alive = psutil.wait_procs(tree, timeout=30)
        return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]

    def kill_everything(self) -> None:
        """Teardown after a failure: whatever is left of this platform goes."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                self.seen += self.tree()
        for p in self.seen:
            with contextlib.suppress(psutil.Error):
                p.kill()  # psutil checks the start time: a reused pid is not this process
        if self.proc is not None:
            self.proc.wait(timeout=10)
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture
def make_up(transactional_db, docker_engine):
    up = MakeUp()
    yield up
    if up.log_path.exists():
        dest = REPO / "var" / "test-artifacts" / "make-up"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(up.log_path, dest / f"{up.node_name}.log")
        print(f"\nmake up log in {dest / f'{up.node_name}.log'}")
    up.kill_everything()
    client = docker.from_env()
    for c in client.containers.list(all=True, filters={"label": f"{protocol.LABEL_NODE}={up.node_name}"}):
        with contextlib.suppress(docker.errors.APIError):
            c.remove(force=True)


def assert_stops_clean(up: MakeUp, how: str) -> None:
    """Stop make up `how`: no process of its tree survives, the web port binds again, its Redis does not answer."""
    from euler import embedded_redis

    alive = up.stop(how)
    assert alive == [], f"{how}: left running: {[(p.pid, p.cmdline()) for p in alive]}"
    assert port_free(up.port), f"{how}: the web port is still taken"
    assert not embedded_redis.answers(up.data / "redis.sock"), f"{how}: the embedded Redis still answers"
    log = up.log()  # the children may log a lost Redis during a kill -9; the supervisor itself never raises
    assert "KeyboardInterrupt" not in log and "euler/supervisor.py" not in log and "config/up.py" not in log


# --- restart with jobs that were running at the stop ---------------------------------------------------------------
def numbered(name: str, lines: int) -> str:
    return "".join(f"{name} line {i}\n" for i in range(1, lines + 1))


def whole_log(name: str, text: str) -> bool:
    """A short job's log is its numbered lines; a long one's, every line up to N then `end N` (when told to end)."""
    last = text.splitlines()[-1] if text else ""
    if last.startswith(f"{name} end "):
        n = int(last.rsplit(" ", 1)[1])
        return text == numbered(name, n) + f"{last}\n"
    return text == numbered(name, SHORT_LINES)


SHORT_LINES = 16  # 8 s: still running at the stop, ended before make up is back
# Runs until it gets SIGUSR1 (sent by the test once make up is back), so it is surely running at the restart.
LONG = 'trap \'echo "{name} end $i"; exit 0\' USR1; i=0; while :; do i=$((i+1)); echo "{name} line $i"; sleep 0.5; done'
SHORT = 'for i in $(seq 1 {lines}); do echo "{name} line $i"; sleep 0.5; done'  # ends during the outage


class Jobs:
    def __init__(self, up: MakeUp, project) -> None:
        from quotas.models import Quota
        from quotas.services import apikey_create

        Quota.objects.filter(project=project).update(max_concurrent_jobs=1000, cpu_core_seconds=10**12)
        _, key = apikey_create(project=project, label="up")
        self.http = httpx.Client(base_url=up.url + "/api/v1/", headers={"X-Euler-API-Key": key}, timeout=30)

    def submit(self, name: str, script: str, *, selector: dict) -> int:
        body = {"name": name, "image": IMAGE, "command": ["sh", "-c", script], "cpu_milli": 100,
                "memory_bytes": 32 << 20, "gpu_count": 0, "timeout_seconds": 600, "node_selector": selector}  # fmt: skip
        r = self.http.post("jobs", json=body)
        assert r.status_code == 201, r.text
        return r.json()["id"]


def external_agent(up: MakeUp, tmp_path: Path, settings) -> tuple[Proc, str]:
    """A separately running `./euler-node`, enrolled with an auto-approving platform token (the platform runs
    with DJANGO_DEBUG, as `make up` does)."""
    from nodes.devnode import local_node_env
    from nodes.services import enrollment_token_create

    name = f"up-ext-{uuid.uuid4().hex[:6]}"
    settings.DEBUG = True
    _, token = enrollment_token_create(trust="platform", ttl=600, label="up test", auto_approve=True)
    settings.DEBUG = False
    env = local_node_env(port=up.port, state_dir=tmp_path / "ext-node", name=name, token=token)
    env["EULER_NODE_LABELS"] = "host=external"
    return Proc(name, [str(REPO / "euler-node")], env, tmp_path / "ext-node.log").start(), name


# The long outage outlasts every window the control plane judges silence by (node offline, silent-attempt grace,
# redelivery): at their defaults (30 s, 20 s, 30 s) that took a 45 s sleep. With the windows halved (through their
# settings, in make up's environment) a 20 s sleep keeps the same order: the nodes are silent for the stop, the
# sleep and the start, more than twice the offline window as before, so the same guards hold in less time.
HALVED_WINDOWS = {
    "EULER_NODE_OFFLINE_AFTER": "15",
    "EULER_NODE_SILENCE_HOLD": "45",
    "EULER_JOB_MISSING_GRACE": "10",
    "EULER_JOB_REDELIVER_AFTER": "15",
}


# Each test stops make up twice, once with jobs running and once at its end: the four ways between them.
@pytest.mark.parametrize(
    ("outage", "windows", "how", "then"),
    [(5, {}, "sigterm-group", "sigint"), (20, HALVED_WINDOWS, "sigkill-supervisor", "sigint-twice")],
    ids=["5-sigterm-group-sigint", "20-halved-windows-sigkill-supervisor-sigint-twice"],
)
def test_jobs_running_when_make_up_stops_end_once_with_their_whole_log_after_it_starts_again(
    make_up, project, tmp_path, settings, outage, windows, how, then
):
    from jobs.models import Attempt, Job, JobEvent
    from nodes.models import Node

    t0 = time.monotonic()

    def phase(what: str) -> None:
        print(f"\n[{time.monotonic() - t0:6.1f} s] {what}", flush=True)

    make_up.env.update(windows)
    make_up.env["EULER_NODE_LABELS"] = "host=local"
    make_up.start()
    phase("make up answers")
    jobs = Jobs(make_up, project)
    agent, ext_name = external_agent(make_up, tmp_path, settings)
    try:
        wait_for(lambda: Node.objects.filter(name=ext_name, online=True).exists(), "the external node is online")
        phase("the external node is online")
        ids = [
            jobs.submit(
                f"{host}-{kind}", script.format(name=f"{host}-{kind}", lines=SHORT_LINES), selector={"host": host}
            )
            for host in ("local", "external")
            for kind, script in (("short", SHORT), ("long", LONG))
        ]
        started = Job.objects.filter(id__in=ids, state__in=["running", "succeeded"])
        wait_for(lambda: started.count() == 4, "all four jobs run")
        phase("all four jobs run")
        on = dict(Attempt.objects.filter(job_id__in=ids).values_list("job__name", "node__name"))
        assert on == {"local-short": make_up.node_name, "local-long": make_up.node_name,
                      "external-short": ext_name, "external-long": ext_name}  # fmt: skip

        assert_stops_clean(make_up, how)
        phase(f"stopped ({how})")
        time.sleep(outage)  # the outage itself: nothing to wait for
        assert agent.alive(), "the external agent outlives the control plane"
        make_up.start()
        phase("make up answers again")
        long_jobs = Job.objects.filter(id__in=ids, name__endswith="-long")
        assert sorted(long_jobs.values_list("state", flat=True)) == ["running", "running"]
        for job_id, node_name in Attempt.objects.filter(job__in=long_jobs).values_list("job_id", "node_name"):
            # Job ids repeat across test databases (other xdist workers, other runs): its node's container only.
            labels = [f"{protocol.LABEL_JOB}={job_id}", f"{protocol.LABEL_NODE}={node_name}"]
            (container,) = docker.from_env().containers.list(filters={"label": labels})
            container.kill(signal="SIGUSR1")

        wait_for(lambda: not Job.objects.filter(id__in=ids).exclude(state__in=TERMINAL).exists(), "every job ends")
        phase("every job ended")
        for job in Job.objects.filter(id__in=ids):
            attempts = Attempt.objects.filter(job=job).count()
            ends = JobEvent.objects.filter(job=job, to_state__in=TERMINAL).count()
            assert (job.state, attempts, ends) == ("succeeded", 1, 1), f"{job.name}: {job.state} {job.reason}"
            text = jobs.http.get(f"jobs/{job.id}/logs").text
            assert whole_log(job.name, text), f"{job.name}: {text!r}"
        assert_stops_clean(make_up, then)
        phase(f"stopped ({then})")
        if then == "sigint-twice":
            assert "SIGINT ignored: already stopping" in make_up.log()
    finally:
        agent.stop()
        client = docker.from_env()
        for c in client.containers.list(all=True, filters={"label": f"{protocol.LABEL_NODE}={ext_name}"}):
            with contextlib.suppress(docker.errors.APIError):
                c.remove(force=True)
