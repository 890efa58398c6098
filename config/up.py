"""`make up`: migrate, create the admin once, then run redis, web, three workers (the control loop's, the
background one and the webhook dispatcher's), beat (and a local node) in the foreground.

Ctrl-C, SIGTERM or SIGHUP stops every child within EULER_UP_STOP_TIMEOUT seconds (see euler/supervisor.py);
a child that dies stops the rest and exits non-zero.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from pathlib import Path

from euler.env import env_float
from euler.supervisor import Supervisor

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

BASE = Path(__file__).resolve().parent.parent


def _say(msg: str) -> None:
    print(f"[euler] {msg}", flush=True)


def _ensure_admin() -> None:
    from django.contrib.auth import get_user_model

    from quotas.models import Membership
    from quotas.services import default_project_for

    User = get_user_model()
    if User.objects.filter(is_superuser=True).exists():
        return
    username = os.environ.get("DJANGO_SUPERUSER_USERNAME") or "admin"
    email = os.environ.get("DJANGO_SUPERUSER_EMAIL") or "admin@example.com"
    password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
    generated = password is None
    if generated:
        password = secrets.token_urlsafe(12)
    user = User.objects.create_superuser(username=username, email=email, password=password)
    if not Membership.objects.filter(user=user).exists():
        default_project_for(user)
    _say(f"created admin account {username!r}")
    if generated:
        _say(f"its password (shown once, write it down): {password}")


def main() -> int:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from euler import embedded_redis

    port = os.environ.get("PORT", "8000")
    host = os.environ.get("HOST", "127.0.0.1")
    if not _port_free(host, port):
        _say(f"port {port} on {host} is in use (another `make up` still running?); set PORT=… to use another")
        return 1
    sup = Supervisor(stop_timeout=env_float("EULER_UP_STOP_TIMEOUT", 10.0, minimum=1.0))
    try:
        if settings.EULER_REDIS_EMBEDDED:
            try:
                embedded_redis.start(settings.EULER_EMBEDDED_REDIS_SOCKET, spawn=lambda args: sup.spawn("redis", args))
            except RuntimeError as exc:
                _say(str(exc))
                sup.stop_all()
                return 1
            _say(f"redis on {settings.REDIS_URL}")
        call_command("migrate", interactive=False, verbosity=0)
        _ensure_admin()
        _start_services(sup, settings, host=host, port=port)
        sup.started()
    except KeyboardInterrupt:
        _say("stopping during start-up…")
        sup.stop_all()  # never leave the embedded redis behind
        return 0
    except BaseException:
        sup.stop_all()
        raise
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    _say(f"console:  {url}/        admin: {url}/admin/        API docs: {url}/api/docs/")
    _say("next: sign in, create an API key under the console (or `python manage.py createapikey --project NAME`),")
    _say('      then: curl -H "X-Euler-API-Key: $KEY" ' + f"{url}/api/v1/project")
    _say("Ctrl-C stops everything.")
    return sup.run()


def _port_free(host: str, port: str) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, int(port)))
        except OSError:
            return False
    return True


def worker_commands(py: str, *, loglevel: str = "warning", concurrency: int = 2) -> list[tuple[str, list[str]]]:
    """The three Celery workers: `worker-control` serves only the control loop (scheduling, liveness), `worker` the
    health checks, maintenance and webhook deliveries, so that no tenant-driven task shares a process with the
    control loop, and `worker-dispatch` (one process) the webhook dispatch, so that a backlog of slow
    deliveries never holds the pass that makes and hands out everyone's deliveries."""
    from euler.taskpolicy import CONTROL, DISPATCH, HEALTH, MAINTENANCE, WEBHOOKS

    # -O fair: a task goes to an idle pool process only, never behind a long one in a busy process's pipe (a
    # batch of deliveries to dead receivers takes a few timeouts; another project's must not wait for it).
    base = [py, "-m", "celery", "-A", "euler", "worker", "-l", loglevel, "-O", "fair"]
    common = [*base, "-c", str(concurrency)]
    return [
        ("worker-control", [*common, "-Q", CONTROL, "-n", "control@%h"]),
        ("worker", [*common, "-Q", f"{HEALTH},{MAINTENANCE},{WEBHOOKS}", "-n", "background@%h"]),
        ("worker-dispatch", [*base, "-c", "1", "-Q", DISPATCH, "-n", "dispatch@%h"]),
    ]


def web_command(py: str, *, host: str, port: str, stop_timeout: float) -> list[str]:
    from nodeagent.protocol_base import SERVER_KEEPALIVE_SECONDS

    if os.environ.get("EULER_WEB_SERVER", "uvicorn") == "daphne":
        return [py, "-m", "daphne", "-b", host, "-p", port, "config.asgi:application"]
    web = [py, "-m", "uvicorn", "config.asgi:application", "--host", host, "--port", port, "--no-access-log"]
    web += ["--loop", "uvloop", "--http", "httptools", "--ws", "websockets"]
    web += ["--timeout-keep-alive", str(SERVER_KEEPALIVE_SECONDS)]  # above the clients' (nodeagent/protocol_base.py)
    # Node agents hold a long-poll open (up to 25 s): cut it (they retry) rather than run into the bound.
    return [*web, "--timeout-graceful-shutdown", str(max(1, int(stop_timeout / 3)))]


def _start_services(sup: Supervisor, settings, *, host: str, port: str) -> None:
    py = sys.executable
    web = web_command(py, host=host, port=port, stop_timeout=sup.stop_timeout)
    sup.spawn("web", web)
    for name, argv in worker_commands(py):
        sup.spawn(name, argv)
    sup.spawn(
        "beat",
        [
            py,
            "-m",
            "celery",
            "-A",
            "euler",
            "beat",
            "-l",
            "warning",
            "-s",
            str(settings.DATA_DIR / "celerybeat-schedule"),
        ],
    )
    try:
        from nodes.devnode import maybe_start_local_node
    except ImportError:
        maybe_start_local_node = None
    if maybe_start_local_node is not None:
        maybe_start_local_node(sup, port=port)


if __name__ == "__main__":
    sys.exit(main())
