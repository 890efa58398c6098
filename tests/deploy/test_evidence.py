"""`make test-deploy`'s evidence and clean-up code (tests/deploy/evidence.py), without building a stack: compose is
answered by a stand-in, the node agent's containers and state volume are real ones on the engine."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import docker
import pytest

from tests.deploy import evidence
from tests.deploy.stack import Stack

pytestmark = pytest.mark.docker
BUSYBOX = "euler-test/busybox"


class ComposeStandIn(Stack):
    """A Stack whose compose answers from a table (services and their logs); the engine part is real."""

    def __init__(self, project: str, owner: str | None):
        super().__init__(project, http_port=1, https_port=2)
        self.owner, self.calls = owner, []

    def compose(self, *args, check=True, timeout=900, env=None, input=None):
        self.calls.append(args)
        if "config" in args:
            out = "web\nnode\nworker\n"
        else:
            out = f"{args[-1]}  | {args[-1]} said why\n"
        return subprocess.CompletedProcess(args, 0, out, "")

    def node_owner(self):
        return self.owner


@pytest.fixture
def job_container(docker_engine):
    client = docker.from_env()
    made = []

    def make(owner: str, command=("echo", "the job's own line")):
        c = client.containers.run(BUSYBOX, list(command), labels={"euler.owner": owner}, detach=True)
        c.wait()
        made.append(c)
        return c

    yield make
    for c in made:
        try:
            c.remove(force=True)
        except docker.errors.NotFound:
            pass


def test_a_failed_run_keeps_every_services_log_the_jobs_logs_and_the_figures(tmp_path, job_container):
    owner = f"7-{uuid.uuid4().hex[:16]}"
    job = job_container(owner)
    stack = ComposeStandIn("eulerdeploytesta", owner)
    kept = evidence.keep([stack], {"image size": "300 MB"}, into=tmp_path / "20261203T120000Z")
    assert json.loads((kept / "figures.json").read_text()) == {"image size": "300 MB"}
    folder = kept / "eulerdeploytesta"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["node.log", "web.log", "worker.log", f"job-{job.id[:12]}.log"]
    )
    assert (folder / "node.log").read_text().startswith("node  | node said why")
    assert "the job's own line" in (folder / f"job-{job.id[:12]}.log").read_text()
    assert ("--profile", "node", "logs", "--no-color", "--timestamps", "node") in stack.calls


def test_the_evidence_lands_under_var_test_deploy_by_utc_time():
    assert evidence.evidence_dir(0) == evidence.KEEP_ROOT / "19700101T000000Z"
    assert evidence.KEEP_ROOT == Path(evidence.ROOT) / "var" / "test-deploy"


def test_only_the_stacks_own_agents_job_containers_are_removed(job_container):
    mine, theirs = f"7-{uuid.uuid4().hex[:16]}", f"7-{uuid.uuid4().hex[:16]}"
    gone = job_container(mine, ["sleep", "0"])
    kept = job_container(theirs, ["sleep", "0"])
    assert evidence.remove_job_containers(mine) == [gone.id]
    assert evidence.job_containers(mine) == [] and evidence.job_containers(theirs) == [kept.id]
    assert evidence.remove_job_containers(None) == []


def test_the_node_agents_identity_is_read_from_its_state_volume(docker_engine):
    project = f"eulerdeploytest{uuid.uuid4().hex[:8]}"
    client = docker.from_env()
    volume = client.volumes.create(f"{project}_nodestate")
    try:
        stack = Stack(project, http_port=1, https_port=2)
        assert stack.node_owner() is None  # not enrolled yet
        state = Path(volume.attrs["Mountpoint"])
        (state / "instance").write_text("0123456789abcdef\n")
        (state / "node.json").write_text(json.dumps({"node_id": 42, "name": "compose-node"}))
        assert stack.node_owner() == "42-0123456789abcdef"
    finally:
        volume.remove(force=True)
    assert Stack(project, http_port=1, https_port=2).node_owner() is None
