"""Runtimes as a node fact: what the engine lists, what the probe decides, and which runtime a job runs under."""

from __future__ import annotations

import shutil
import subprocess
import uuid

import docker
import pytest

from nodeagent import protocol, runtimes
from nodeagent.runtimes import Candidate, RuntimePolicy, RuntimeProbe, choose, judge

INFO = {
    "DefaultRuntime": "runc",
    "Runtimes": {
        "io.containerd.runc.v2": {"path": "runc"},
        "io.containerd.runtime.v1.linux": {"path": "runc"},
        "runc": {"path": "runc"},
        "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]},
        "gvisor-net": {"path": "/usr/local/bin/runsc"},
        "kata": {"path": "/opt/kata/bin/kata-runtime"},
    },
}
RUNC = protocol.RuntimeInfo(name="runc", sandbox=False, networks=["none", "default"], default=True)
RUNSC = protocol.RuntimeInfo(name="runsc", sandbox=True, networks=["none"])
RUNSC_NET = protocol.RuntimeInfo(name="runsc-net", sandbox=True, networks=["none", "default"])


def test_candidates_are_the_engines_runtimes_default_first_without_runcs_shim_aliases():
    found = runtimes.candidates(INFO)
    assert [c.name for c in found] == ["runc", "gvisor-net", "kata", "runsc"]
    assert [c.sandbox for c in found] == [False, True, False, True]  # by the binary's name, not the entry's


def test_gvisors_network_flag_is_read_from_the_runtime_arguments():
    assert Candidate("runsc", "/usr/bin/runsc", ("--network=none",)).network_flag == "none"
    assert Candidate("runsc", "/usr/bin/runsc", ("--network", "host")).network_flag == "host"
    assert Candidate("runsc", "/usr/bin/runsc").network_flag == "sandbox"
    assert runtimes.probes_for(Candidate("runsc", "/usr/bin/runsc")) == ("none", "bridge")
    assert runtimes.probes_for(Candidate("runsc", "/usr/bin/runsc", ("--network=none",))) == ("none",)


def test_a_registered_runtime_whose_probe_fails_is_not_offered_and_says_why():
    info, why = judge(Candidate("runsc", "/usr/bin/runsc", ("--network=none",)), {"none": "cannot create sandbox"})
    assert info is None and "cannot create sandbox" in why


def test_runsc_with_the_network_none_argument_is_a_sandbox_for_network_none_jobs_only():
    info, why = judge(Candidate("runsc", "/usr/bin/runsc", ("--network=none",)), {"none": None})
    assert info == RUNSC and why == ""


def test_runsc_on_the_host_network_is_never_offered():
    info, why = judge(Candidate("runsc-host", "/usr/bin/runsc", ("--network=host",)), {"none": None})
    assert info is None and "host kernel" in why


def test_runsc_with_its_own_network_stack_runs_networked_jobs_only_when_the_bridge_probe_passed():
    c = Candidate("runsc-net", "/usr/bin/runsc")
    assert judge(c, {"none": None, "bridge": None})[0] == RUNSC_NET
    assert judge(c, {"none": None, "bridge": "EOF"})[0].networks == ["none"]


def test_runc_runs_every_network():
    assert judge(Candidate("runc", "runc", default=True), {"none": None})[0] == RUNC


def test_the_lender_narrows_what_is_offered_by_name_and_by_minimum_isolation():
    both = [RUNC, RUNSC]
    assert runtimes.narrow(both, RuntimePolicy(offer=("runc",))) == [RUNC]
    assert runtimes.narrow(both, RuntimePolicy(min_isolation="sandbox")) == [RUNSC]
    assert runtimes.narrow(both, RuntimePolicy()) == both


def test_lender_settings_are_parsed_strictly():
    assert runtimes.load_policy({"EULER_NODE_RUNTIMES": "runc, runsc", "EULER_NODE_MIN_ISOLATION": "Sandbox"}) == (
        RuntimePolicy(offer=("runc", "runsc"), min_isolation="sandbox")
    )
    with pytest.raises(runtimes.RuntimeConfigError, match="EULER_NODE_MIN_ISOLATION"):
        runtimes.load_policy({"EULER_NODE_MIN_ISOLATION": "vm"})
    with pytest.raises(runtimes.RuntimeConfigError, match="EULER_NODE_RUNTIMES"):
        runtimes.load_policy({"EULER_NODE_RUNTIMES": "run c"})


# --- the server's choice, checked --------------------------------------------------------------------
def test_the_assigned_runtime_is_used_when_this_node_offers_it_and_it_is_strong_enough():
    assert choose([RUNC, RUNSC], runtime="runsc", isolation="sandbox", networked=False) == (RUNSC, None)
    assert choose([RUNC, RUNSC], runtime="runc", isolation="runc", networked=True) == (RUNC, None)


def test_a_runtime_weaker_than_the_job_needs_is_refused_whatever_the_server_says():
    info, why = choose([RUNC, RUNSC], runtime="runc", isolation="sandbox", networked=False)
    assert info is None and "weaker than required" in why and "job needs" in why


def test_a_runtime_weaker_than_the_lenders_minimum_is_refused():
    info, why = choose([RUNC, RUNSC], runtime="runc", isolation="runc", networked=False, lender_min="sandbox")
    assert info is None and "lender requires a sandbox" in why


def test_a_runtime_this_node_does_not_offer_is_refused():
    assert "not one this node offers" in choose([RUNC], runtime="kata", isolation="", networked=False)[1]


def test_a_networked_job_is_refused_a_sandbox_that_runs_network_none_only():
    info, why = choose([RUNC, RUNSC], runtime="runsc", isolation="sandbox", networked=True)
    assert info is None and "network 'default'" in why


def test_an_older_server_naming_no_runtime_gets_the_one_the_job_needs():
    assert choose([RUNC, RUNSC], runtime="", isolation="", networked=True) == (RUNC, None)
    assert choose([RUNC, RUNSC], runtime="", isolation="", networked=False, lender_min="sandbox") == (RUNSC, None)
    assert choose([], runtime="", isolation="", networked=True) == (None, None)  # the engine's default
    assert choose([RUNC], runtime="", isolation="sandbox", networked=False)[0] is None


def test_an_isolation_level_this_agent_does_not_know_asks_for_the_strongest():
    assert choose([RUNC, RUNSC], runtime="runc", isolation="microvm", networked=False)[0] is None


# --- the real engine -------------------------------------------------------------------------------------
def _engine_runtimes() -> dict:
    return docker.from_env().api.info().get("Runtimes") or {}


@pytest.mark.docker
def test_the_probe_against_the_real_engine_offers_runc_and_a_registered_runsc(docker_engine):
    # An owner of its own: the probe reaps, and this test counts, containers by the owner's label, and the other
    # probe test may run at the same moment on another xdist worker (run 40 counted its probe in flight).
    owner = f"test-runtimes-{uuid.uuid4().hex[:8]}"
    probe = RuntimeProbe(docker.from_env(), RuntimePolicy(), owner=owner)
    offered = {r.name: r for r in probe.refresh()}
    assert offered["runc"].networks == ["none", "default"] and not offered["runc"].sandbox
    if "runsc" not in _engine_runtimes() or shutil.which("runsc") is None:
        pytest.skip("runsc is not registered with this engine (scripts/register-runsc.sh)")
    assert offered["runsc"].sandbox
    # The engine's runsc entry is --network=none (scripts/register-runsc.sh): network "none" jobs only.
    assert offered["runsc"].networks == ["none"]
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=euler.runtime-probe={owner}"], capture_output=True, text=True
    )
    assert left.stdout.strip() == ""  # every probe container is removed


@pytest.mark.docker
def test_the_lender_can_keep_runsc_from_being_offered(docker_engine):
    probe = RuntimeProbe(
        docker.from_env(), RuntimePolicy(offer=("runc",)), owner=f"test-runtimes-{uuid.uuid4().hex[:8]}"
    )
    assert [r.name for r in probe.refresh()] == ["runc"]
