"""Isolation tiers end to end: community jobs run under gVisor (runsc) where a node offers it and wait where none
does, saying why; platform nodes still run runc. `docker inspect` and the job's status agree on the runtime."""

from __future__ import annotations

import docker
import pytest

from tests.conftest import IN_CI
from tests.e2e.test_jobs import euler  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

SANDBOX_REASON = "no node with a sandboxed runtime in your pool"


def _runtime_of(container_id: str) -> str:
    return docker.from_env().api.inspect_container(container_id)["HostConfig"]["Runtime"]


def test_community_jobs_run_under_runsc_or_wait_for_it_and_platform_nodes_run_runc(euler):  # noqa: F811
    if "runsc" not in (docker.from_env().api.info().get("Runtimes") or {}):
        why = "runsc is not registered with this engine (scripts/register-runsc.sh)"
        pytest.fail(why) if IN_CI else pytest.skip(why)
    # A community node whose lender offers only runc: the job stays queued and says why.
    euler.node(trust="community", env={"EULER_NODE_RUNTIMES": "runc"})
    job = euler.submit(["sh", "-c", "echo started; sleep 3; cat /proc/version"], network="none")
    euler.platform.wait_for(
        lambda: euler.job(job["id"])["pending_reason"].startswith(SANDBOX_REASON), "the sandbox pending reason"
    )
    assert euler.job(job["id"])["state"] == "queued"

    # A community node whose engine has runsc takes it, and runs it under runsc.
    sandboxed = euler.node(trust="community")
    running = euler.wait_state(job["id"], {"running", "succeeded", "failed"}, timeout=90)
    attempt = running["attempts"][0]
    assert attempt["node"] == sandboxed
    (container_id,) = euler.containers(attempt["id"])
    assert _runtime_of(container_id) == "runsc"
    done = euler.wait_state(job["id"], {"succeeded", "failed", "lost"}, timeout=90)
    assert done["state"] == "succeeded", done
    assert done["attempts"][0]["runtime"] == "runsc" and done["attempts"][0]["isolation"] == "sandbox"
    assert "started\nLinux version 4.4.0" in euler.logs(job["id"])  # gVisor's kernel, not the host's

    # A networked community job cannot be sandboxed here (runsc is registered with --network=none): it waits.
    networked = euler.submit(["true"])
    euler.platform.wait_for(
        lambda: euler.job(networked["id"])["pending_reason"].startswith(SANDBOX_REASON), "the network reason"
    )
    # A platform node runs it, under runc.
    platform = euler.node()
    plain = euler.submit(["sh", "-c", "sleep 3; echo plain"], network="none", min_trust="platform")
    running = euler.wait_state(plain["id"], {"running", "succeeded", "failed"}, timeout=90)
    (container_id,) = euler.containers(running["attempts"][0]["id"])
    assert _runtime_of(container_id) == "runc"
    done = euler.wait_state(plain["id"], {"succeeded", "failed", "lost"}, timeout=90)
    assert done["state"] == "succeeded" and done["attempts"][0]["node"] == platform
    assert done["attempts"][0]["runtime"] == "runc"
    assert euler.wait_state(networked["id"], {"succeeded", "failed", "lost"}, timeout=90)["state"] == "succeeded"
