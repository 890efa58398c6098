"""`make up`: migrate, create the admin once, then run redis, web, worker, beat (and a local node) in the foreground.

Ctrl-C or SIGTERM stops every child; a child that dies stops the rest and exits non-zero.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "euler.settings")

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


class Supervisor:
    def __init__(self) -> None:
        self.children: dict[str, subprocess.Popen] = {}
        self.stopping = False

    def spawn(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        self.children[name] = subprocess.Popen(argv, cwd=BASE, env=env or os.environ.copy(), start_new_session=True)
        _say(f"started {name} (pid {self.children[name].pid})")
        return self.children[name]

    def stop_all(self) -> None:
        self.stopping = True
        for proc in self.children.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for proc in self.children.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)

    def run(self) -> int:
        def _on_signal(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, _on_signal)
        try:
            while True:
                for name, proc in self.children.items():
                    code = proc.poll()
                    if code is not None:
                        _say(f"{name} exited with code {code}; stopping everything")
                        self.stop_all()
                        return code or 1
                time.sleep(0.5)
        except KeyboardInterrupt:
            _say("stopping…")
            self.stop_all()
            return 0


def main() -> int:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from euler import embedded_redis

    sup = Supervisor()
    if settings.EULER_REDIS_EMBEDDED:
        sock = settings.EULER_EMBEDDED_REDIS_SOCKET
        try:
            embedded_redis.start(sock, spawn=lambda args: sup.spawn("redis", args))
        except RuntimeError as exc:
            _say(str(exc))
            sup.stop_all()
            return 1
        _say(f"redis on {settings.REDIS_URL}")

    try:
        call_command("migrate", interactive=False, verbosity=0)
        _ensure_admin()
    except BaseException:
        sup.stop_all()  # never leave the embedded redis behind
        raise

    port = os.environ.get("PORT", "8000")
    host = os.environ.get("HOST", "127.0.0.1")
    server = os.environ.get("EULER_WEB_SERVER", "uvicorn")
    py = sys.executable
    if server == "daphne":
        web = [py, "-m", "daphne", "-b", host, "-p", port, "euler.asgi:application"]
    else:
        web = [py, "-m", "uvicorn", "euler.asgi:application", "--host", host, "--port", port, "--no-access-log"]
        web += ["--loop", "uvloop", "--http", "httptools", "--ws", "websockets"]
    sup.spawn("web", web)
    sup.spawn("worker", [py, "-m", "celery", "-A", "euler", "worker", "-l", "warning", "-c", "2"])
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

    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    _say(f"console:  {url}/        admin: {url}/admin/        API docs: {url}/api/docs/")
    _say("next: sign in, create an API key under the console (or `python manage.py createapikey --project NAME`),")
    _say('      then: curl -H "X-Euler-API-Key: $KEY" ' + f"{url}/api/v1/project")
    _say("Ctrl-C stops everything.")
    return sup.run()


if __name__ == "__main__":
    sys.exit(main())
