"""The shipped compose stack under test: one compose project with its own name, ports and volumes, driven through
Debian's `docker-compose` (or `docker compose`), torn down with its volumes whatever happens."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("EULER_DEPLOY_IMAGE", "euler-deploy-test/euler:dev")
DOMAIN = "euler.internal"  # the front's name on the stack's edge network (node agents use it)


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    raise RuntimeError(
        "neither docker-compose nor the docker compose plugin is installed (apt-get install docker-compose)"
    )


def run(cmd: list[str], *, env=None, check=True, timeout=900, input=None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def build_images() -> dict[str, float]:
    """The offline bases (kept once built) and Euler's image on them; returns seconds and the image's size."""
    started = time.monotonic()
    run(["scripts/build-base-images.sh"], timeout=1800)
    bases = time.monotonic() - started
    ca_dir = ROOT / "deploy" / "build-ca"
    bundle = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE")
    if bundle and Path(bundle).is_file():  # a TLS-inspecting proxy between the build and PyPI
        shutil.copyfile(bundle, ca_dir / "build-host.pem")
    try:
        started = time.monotonic()
        run(
            ["docker", "build", "-q", "--build-arg", "BASE=euler-base/python:3.11-bookworm", "-t", IMAGE, "."],
            timeout=1800,
        )
        image = time.monotonic() - started
    finally:
        (ca_dir / "build-host.pem").unlink(missing_ok=True)
    size = int(run(["docker", "image", "inspect", "-f", "{{.Size}}", IMAGE]).stdout.strip())
    return {"bases_s": bases, "image_s": image, "image_bytes": size}


class Stack:
    def __init__(self, project: str, *, http_port: int, https_port: int, secret_key=None, encryption_keys=None):
        self.project = project
        self.http_port, self.https_port = http_port, https_port
        self.ca_file: Path | None = None
        self.env = dict(os.environ)
        for name in [k for k in self.env if k.startswith(("EULER_", "DJANGO_", "COMPOSE_"))]:
            del self.env[name]
        self.env.update(
            COMPOSE_PROJECT_NAME=project,
            EULER_IMAGE=IMAGE,
            EULER_POSTGRES_IMAGE="euler-base/postgres:15",
            EULER_REDIS_IMAGE="euler-base/redis:7",
            EULER_CADDY_IMAGE="euler-base/caddy:2",
            DJANGO_SECRET_KEY=secret_key or secrets.token_urlsafe(50),
            EULER_ENCRYPTION_KEYS=encryption_keys or "k1:" + base64.b64encode(os.urandom(32)).decode(),
            EULER_DOMAIN=f"{DOMAIN}, localhost",
            EULER_DOMAIN_ALIAS=DOMAIN,
            DJANGO_ALLOWED_HOSTS=f"{DOMAIN},localhost",
            DJANGO_CSRF_TRUSTED_ORIGINS=f"https://{DOMAIN},https://localhost:{https_port}",
            EULER_PUBLIC_URL=f"https://{DOMAIN}",
            EULER_HTTP_PORT=str(http_port),
            EULER_HTTPS_PORT=str(https_port),
            EULER_CONTROL_PLANE_URL=f"https://{DOMAIN}",
            EULER_NODE_JOB_EGRESS="none",  # a containerised agent cannot install the host's egress rules
            # The gateway test's upstream lives on the stack's own (private) network.
            EULER_AGENT_ALLOWED_NETWORKS="172.16.0.0/12,192.168.0.0/16,10.0.0.0/8",
        )

    @property
    def url(self) -> str:
        return f"https://localhost:{self.https_port}"

    def compose(self, *args: str, check=True, timeout=900, env=None, input=None) -> subprocess.CompletedProcess:
        return run(
            [*compose_command(), "-f", "docker-compose.yml", "-p", self.project, *args],
            env={**self.env, **(env or {})},
            check=check,
            timeout=timeout,
            input=input,
        )

    def manage(self, *args: str, service="web", env=None) -> str:
        extra = [f"-e{k}={v}" for k, v in (env or {}).items()]
        return self.compose("exec", "-T", *extra, service, "python", "manage.py", *args).stdout

    def up(self, *services: str) -> None:
        self.compose("up", "-d", *services)

    def wait_healthy(self, services: list[str], timeout=300) -> None:
        deadline = time.monotonic() + timeout
        while True:
            ids = self.compose("ps", "-q", *services).stdout.split()
            states = [
                run(
                    [
                        "docker",
                        "inspect",
                        "-f",
                        "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}",
                        i,
                    ]
                ).stdout.strip()
                for i in ids
            ]
            if ids and all(s == "healthy" for s in states):
                return
            if time.monotonic() > deadline:
                logs = self.compose("logs", "--tail", "30", check=False).stdout
                raise AssertionError(
                    f"not healthy after {timeout} s: {dict(zip(ids, states, strict=False))}\n{logs[-6000:]}"
                )
            time.sleep(1)

    def fetch_ca(self, into: Path) -> Path:
        pem = self.compose("exec", "-T", "caddy", "cat", "/data/caddy/pki/authorities/local/root.crt").stdout
        assert pem.startswith("-----BEGIN CERTIFICATE-----"), pem[:200]
        into.write_text(pem)
        self.ca_file = into
        return into

    def network(self, name: str) -> str:
        return f"{self.project}_{name}"

    def node_owner(self) -> str | None:
        """The compose node agent's identity on the engine (`euler.owner` on its job containers): `<node id>-<instance>`
        from its state volume (nodeagent/state.py); None before it enrolled or once the volume is gone."""
        found = run(["docker", "volume", "inspect", "-f", "{{.Mountpoint}}", f"{self.project}_nodestate"], check=False)
        if found.returncode != 0:
            return None
        state = Path(found.stdout.strip())
        try:
            instance = (state / "instance").read_text().strip()
            node_id = json.loads((state / "node.json").read_text()).get("node_id")
        except (OSError, ValueError):
            return None
        return f"{node_id}-{instance}" if isinstance(node_id, int) and instance else None

    def down(self) -> None:
        """Everything of the stack, and the job containers its node agent left on the host's engine (an agent stops
        leaving them for its next start; a failed run never has one)."""
        from tests.deploy.evidence import remove_job_containers

        owner = self.node_owner()  # before `down -v` removes the state volume
        self.compose("--profile", "node", "down", "-v", "--remove-orphans", "-t", "20", check=False, timeout=300)
        remove_job_containers(owner)
        for net in ("backend", "edge", "default"):
            run(["docker", "network", "rm", self.network(net)], check=False)
        for volume in ("pgdata", "nodestate", "caddy_data", "caddy_config"):
            run(["docker", "volume", "rm", f"{self.project}_{volume}"], check=False)
