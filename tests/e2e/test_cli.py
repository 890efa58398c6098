"""The installed `euler` command, driven as a subprocess against one real platform (web, worker, beat, a node
agent and the real Docker engine) shared by every test of this module."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import docker
import httpx
import pytest

from nodeagent import protocol
from tests.e2e.harness import REPO, Platform, free_port
from tests.e2e.test_jobs import FAST, IMAGE

# django_db (rolled back per test) only so that pytest-django sets up the test database: the module's rows are
# written by the module fixture, outside any test's transaction, and flushed when the module ends.
pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.django_db]

EULER = Path(sys.executable).parent / "euler"
SMALL = ["--cpu", "250m", "--memory", "64Mi", "--timeout", "2m"]


class Site:
    def __init__(self, platform: Platform, key: str, node: str, home: Path):
        self.platform, self.key, self.node, self.home = platform, key, node, home

    def env(self, **over) -> dict:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "LANG": "C.UTF-8",
               "XDG_CONFIG_HOME": str(self.home / "xdg"), "EULER_URL": self.platform.url, "EULER_API_KEY": self.key,
               "PYTHONPATH": str(REPO / "client")}  # this checkout's client, wherever the command was installed from  # fmt: skip
        env.update(over)
        return {k: v for k, v in env.items() if v is not None}

    def euler(self, *args, env: dict | None = None, input: str | None = None, timeout: float = 120):
        return subprocess.run([str(EULER), *map(str, args)], env=env or self.env(), input=input, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip

    def start(self, *args, env: dict | None = None) -> Running:
        return Running(subprocess.Popen([str(EULER), *map(str, args)], env=env or self.env(), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True))  # fmt: skip

    def container(self) -> docker.models.containers.Container:
        """The one running container on the module's node (tests run one job at a time)."""
        found = docker.from_env().containers.list(filters={"label": f"{protocol.LABEL_NODE}={self.node}"})
        assert len(found) == 1, found
        return found[0]


class Running:
    """An `euler` process whose stdout and stderr lines are read as they come."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.lines: dict[str, queue.Queue] = {"out": queue.Queue(), "err": queue.Queue()}
        self.seen: dict[str, list[str]] = {"out": [], "err": []}
        for name, pipe in (("out", popen.stdout), ("err", popen.stderr)):
            threading.Thread(target=self._pump, args=(pipe, self.lines[name]), daemon=True).start()

    @staticmethod
    def _pump(pipe, q: queue.Queue) -> None:
        for line in pipe:
            q.put(line)
        q.put(None)

    def wait_line(self, stream: str, text: str, timeout: float = 90) -> None:
        """Block until a line containing `text` arrives on `stream`."""
        while not any(text in line for line in self.seen[stream]):
            line = self.lines[stream].get(timeout=timeout)
            assert line is not None, f"{stream} ended without {text!r}: {self.seen} {self.drain()}"
            self.seen[stream].append(line)

    def drain(self) -> dict:
        """What is left to read (for failure messages)."""
        left = {}
        for stream, q in self.lines.items():
            items = []
            while not q.empty():
                items.append(q.get())
            left[stream] = items
        return left

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        code = self.popen.wait(timeout=timeout)
        for stream in ("out", "err"):
            while (line := self.lines[stream].get(timeout=30)) is not None:
                self.seen[stream].append(line)
        return code, "".join(self.seen["out"]), "".join(self.seen["err"])

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)


@pytest.fixture(scope="module")
def site(django_db_setup, django_db_blocker, docker_engine, tmp_path_factory):
    if not EULER.exists():
        pytest.fail(f"{EULER} is missing: pip install -e ./client (make test does it)")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from nodes.models import Node
    from nodes.services import enrollment_token_create, node_approve
    from quotas.services import apikey_create, project_create

    with django_db_blocker.unblock():
        # A web restart must not look like a dead node (FAST's 3 s would make the job's attempt lost).
        platform = Platform(
            tmp_path_factory.mktemp("cli"),
            env={**FAST, "EULER_NODE_OFFLINE_AFTER": "60", "EULER_AGENT_ALLOWED_NETWORKS": "127.0.0.0/8"},
            topology="compact",
        )
        name = f"cli-{uuid.uuid4().hex[:6]}"
        try:
            platform.start()
            owner = get_user_model().objects.create_user(username="cli-owner", password="pw-for-tests")
            project = project_create(name="cli", owner=owner)
            _, key = apikey_create(project=project, label="cli")
            _, token = enrollment_token_create(trust="platform", label="cli")
            agent = platform.start_agent(name, token=token)
            node = platform.wait_for(lambda: Node.objects.filter(name=name).first(), f"{name} enrolls")
            node_approve(node=node, trust="platform", public_pool=True)
            platform.wait_for(lambda: "approved" in agent.log(), f"{name} learns it is approved")
            platform.wait_for(lambda: Node.objects.get(name=name).online, f"{name} online")
            yield Site(platform, key, name, tmp_path_factory.mktemp("home"))
        except BaseException:
            print(platform.tails())
            raise
        finally:
            platform.stop()
            client = docker.from_env()
            for c in client.api.containers(all=True, filters={"label": f"{protocol.LABEL_NODE}={name}"}):
                with contextlib.suppress(docker.errors.APIError):
                    client.api.remove_container(c["Id"], force=True)
            call_command("flush", verbosity=0, interactive=False)  # as transactional_db does after a test


def test_run_shows_both_streams_live_and_exits_with_the_jobs_code(site):
    script = ("echo out-1; echo err-1 >&2; while [ ! -e /tmp/go ]; do sleep 0.1; done; "
              "echo out-2; echo err-2 >&2; exit 3")  # fmt: skip
    run = site.start("run", *SMALL, IMAGE, "--", "sh", "-c", script)
    try:
        run.wait_line("out", "out-1")
        run.wait_line("err", "err-1")  # both arrived while the job still waits for /tmp/go: live
        site.container().exec_run(["touch", "/tmp/go"])
        code, out, err = run.finish()
    finally:
        run.kill()
    assert code == 3, err
    assert out == "out-1\nout-2\n"
    assert "err-1\n" in err and "err-2\n" in err and "running on node " + site.node in err
    assert "Traceback" not in err


def test_detach_prints_the_id_and_cancel_ends_the_job_cancelled(site):
    detached = site.euler("run", "--detach", *SMALL, IMAGE, "--", "sleep", "300")
    assert detached.returncode == 0, detached.stderr
    job_id = detached.stdout.strip()
    assert job_id.isdigit() and detached.stdout == f"{job_id}\n"
    cancelled = site.euler("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"{job_id} cancelled\n"
    shown = site.euler("jobs", "show", job_id, "--json")
    assert shown.returncode == 0 and '"state": "cancelled"' in shown.stdout
    waited = site.euler("wait", job_id)
    assert waited.returncode == 125 and "cancelled" in waited.stderr
    listed = site.euler("jobs", "list", "--state", "cancelled")
    assert listed.returncode == 0 and job_id in listed.stdout


def test_ctrl_c_cancels_the_job_and_waits_for_its_end(site):
    run = site.start("run", *SMALL, IMAGE, "--", "sh", "-c", "echo started; while true; do sleep 0.1; done")
    try:
        run.wait_line("out", "started")
        job_id = next(line.split()[2] for line in run.seen["err"] + [run.lines["err"].get(timeout=30)]
                      if line.startswith("euler: job ") and "submitted" in line)  # fmt: skip
        run.popen.send_signal(signal.SIGINT)
        code, _, err = run.finish()
    finally:
        run.kill()
    assert code == 125, err
    assert "cancelling job" in err and "cancelled" in err and "Traceback" not in err
    shown = site.euler("jobs", "show", job_id, "--json")
    assert '"state": "cancelled"' in shown.stdout


def test_logs_follow_survives_a_web_restart_without_gap_or_duplicate(site):
    lines = 80
    expected = "".join(f"line {i}\n" for i in range(1, lines + 1))
    script = f"for i in $(seq 1 {lines}); do echo line $i; sleep 0.1; done"
    detached = site.euler("run", "-d", "--retries", "0", *SMALL, IMAGE, "--", "sh", "-c", script)
    job_id = detached.stdout.strip()
    follow = site.start("logs", "-f", job_id)
    try:
        follow.wait_line("out", "line 5")
        web = site.platform.procs["web"]
        web.stop()
        web.start()
        site.platform.wait_for(site.platform._ready, "web answers again", timeout=60)
        code, out, err = follow.finish(timeout=180)
    finally:
        follow.kill()
    assert code == 0, err
    assert out == expected, err
    assert site.euler("logs", job_id).stdout == expected


def test_login_stores_the_key_in_a_0600_file_that_later_commands_use(site, tmp_path):
    # Its own config dir: the module's site is shared, and a file from another test (or a repeat) would be found.
    env = site.env(EULER_URL=None, EULER_API_KEY=None, XDG_CONFIG_HOME=str(tmp_path))
    path = tmp_path / "euler" / "config.toml"
    refused = site.euler("login", "--url", site.platform.url, "--api-key", "euler_pk_wrong", env=env)
    assert refused.returncode == 77 and refused.stderr.count("\n") == 1 and not path.exists()
    logged = site.euler("login", "--url", site.platform.url, "--api-key", site.key, env=env)
    assert logged.returncode == 0, logged.stderr
    assert site.key not in logged.stdout + logged.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    listed = site.euler("jobs", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert site.euler("login", "--profile", "lab", "--url", site.platform.url, "--api-key", "-", env=env,
                      input=site.key + "\n").returncode == 0  # fmt: skip
    assert site.euler("--profile", "lab", "usage", env=env).returncode == 0
    assert site.euler("--profile", "nope", "usage", env=env).returncode == 78


def bad_inputs(site) -> list[tuple[list[str], dict, int]]:
    closed = f"http://127.0.0.1:{free_port()}"
    return [
        (["run", "--cpu", "5x", IMAGE, "--", "true"], {}, 2),
        (["run", "--memory", "lots", IMAGE, "--", "true"], {}, 2),
        (["run", "--timeout", "soon", IMAGE, "--", "true"], {}, 2),
        (["run", "--bogus", IMAGE, "--", "true"], {}, 2),
        (["frobnicate"], {}, 2),
        (["jobs", "list"], {"EULER_API_KEY": "euler_pk_wrong"}, 77),
        (["jobs", "list"], {"EULER_URL": closed}, 69),
        (["run", IMAGE, "--", "true"], {"EULER_URL": closed}, 69),
        (["jobs", "list"], {"EULER_URL": None, "EULER_API_KEY": None, "XDG_CONFIG_HOME": "/nonexistent"}, 78),
        (["jobs", "show", "999999999"], {}, 1),
        (["logs", "-f", "999999999"], {}, 1),
        (["wait", "999999999"], {}, 1),
        (["cancel", "999999999"], {}, 1),
        (["run", "--gpus", "99", IMAGE, "--", "true"], {}, 1),
        (["run", "-f", "/nonexistent.yaml"], {}, 2),
    ]


def test_every_bad_input_gets_one_clear_line_and_no_traceback(site):
    for args, env, status in bad_inputs(site):
        result = site.euler(*args, env=site.env(**env))
        assert result.returncode == status, (args, result.returncode, result.stderr)
        assert result.stderr.startswith("euler: error: ") and result.stderr.count("\n") == 1, (args, result.stderr)
        assert "Traceback" not in result.stderr and result.stdout == "", (args, result.stdout)


def test_version_needs_no_server(site):
    result = site.euler("--version", env={"PATH": os.environ.get("PATH", "")})
    assert result.returncode == 0 and result.stdout.startswith("euler ")
    assert httpx.get(site.platform.url + "/healthz").status_code == 200


def test_keys_create_list_revoke_and_a_revoked_key_stops_working(site):
    created = site.euler("keys", "create", "--label", "cli-test")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()
    assert secret.startswith("euler_pk_") and "only time" in created.stderr
    listed = site.euler("keys", "list", "--json")
    key_id = next(k["id"] for k in json.loads(listed.stdout) if k["label"] == "cli-test")
    assert site.euler("jobs", "list", env=site.env(EULER_API_KEY=secret)).returncode == 0
    assert site.euler("keys", "revoke", key_id).returncode == 0
    refused = site.euler("jobs", "list", env=site.env(EULER_API_KEY=secret))
    assert refused.returncode == 77 and "invalid_api_key" in refused.stderr


def test_usage_and_nodes_show_the_project(site):
    usage = site.euler("usage")
    assert usage.returncode == 0, usage.stderr
    assert "CPU" in usage.stdout and "API keys" in usage.stdout
    nodes = site.euler("nodes")
    assert nodes.returncode == 0, nodes.stderr
    assert "Public pool: 1 of 1 nodes online" in nodes.stdout
    token = site.euler("nodes", "token", "--ttl", "1h", "--region", "lab")
    assert token.returncode == 0, token.stderr
    assert token.stdout.startswith("euler_enroll_") and "./euler-node" in token.stderr


@pytest.fixture
def sse_agent():
    """A tiny upstream agent on loopback: /health, and /events answering two server-sent events."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/events"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for data in ("one", "two"):
                    self.wfile.write(f"data: {data}\n\n".encode())
                    self.wfile.flush()
                return
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_agents_add_invoke_with_sse_and_remove(site, sse_agent):
    added = site.euler("agents", "add", "echo", "--url", sse_agent)
    assert added.returncode == 0, added.stderr
    listed = site.euler("agents", "list")
    assert listed.returncode == 0 and "echo" in listed.stdout
    invoked = site.euler("agents", "invoke", "echo", "events")
    assert invoked.returncode == 0, invoked.stderr
    assert invoked.stdout == "one\ntwo\n"
    assert site.euler("agents", "remove", "echo").returncode == 0
    missing = site.euler("agents", "show", "echo")
    assert missing.returncode == 1 and "not_found" in missing.stderr


def test_run_shows_why_a_job_waits_and_ctrl_c_cancels_it_while_queued(site):
    run = site.start("run", "--label", "zone=nowhere", *SMALL, IMAGE, "--", "true")
    try:
        run.wait_line("err", "queued: ")  # the scheduler's pending reason, e.g. "no node fits: 1 lacks the labels"
        run.popen.send_signal(signal.SIGINT)
        code, out, err = run.finish()
    finally:
        run.kill()
    assert code == 125 and out == "" and "cancelled" in err, err
