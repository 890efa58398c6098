"""Egress rules that are never stale: verified before each networked start, put back after an engine restart or
the removal of the job network, the lender's blocked CIDRs, and DNS only to the node's resolvers."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import docker
import pytest

from nodeagent.egress import Egress
from nodeagent.egress_plan import engine_event_matters, instance_id, names_for, plan, rules_intact
from nodeagent.offer import NetworkPolicy, OfferError, load_network_policy

from .test_egress import LISTENER, PORT, _sh, fake_net  # noqa: F401
from .test_executor import assignment, make_executor, node, plane, wait_for  # noqa: F401, F811

NAMES = names_for("abc123def0", "n1")


def _listing(steps, *, drop: int | None = None) -> dict[str, str]:
    """What `iptables -S` would show once the plan is applied (rule text as iptables normalises it aside)."""
    lines: dict[str, list[str]] = {"iptables": [], "ip6tables": []}
    for step in steps:
        binary, op = step.argv[0], step.argv[2]
        if op == "-A":
            lines[binary].append(" ".join(["-A", *step.argv[3:]]) + " --reject-with icmp-port-unreachable")
        elif op == "-I":
            lines[binary].append(" ".join(["-A", step.argv[3], *step.argv[5:]]))
    if drop is not None:
        del lines["iptables"][drop]
    return {binary: "\n".join(found) for binary, found in lines.items()}


def test_the_lenders_blocked_cidrs_come_first_and_win_over_allowed_ones():
    policy = NetworkPolicy(allowed=("10.8.0.0/16",), blocked=("10.8.1.0/24", "203.0.113.0/24", "2001:db8::/32"))
    lines = [" ".join(s.argv) for s in plan(policy, NAMES, dns=["10.255.255.53"])]
    fwd = [line for line in lines if line.startswith("iptables -w -A EULER-abc123def0-FWD")]
    assert fwd[1:3] == [
        "iptables -w -A EULER-abc123def0-FWD -d 10.8.1.0/24 -j REJECT",
        "iptables -w -A EULER-abc123def0-FWD -d 203.0.113.0/24 -j REJECT",
    ]
    assert "ip6tables -w -A EULER-abc123def0-FWD -d 2001:db8::/32 -j REJECT" in lines
    env = {"EULER_NODE_JOB_BLOCKED_NETWORKS": "203.0.113.7/24, 2001:db8::/32"}
    assert load_network_policy(env).blocked == ("203.0.113.0/24", "2001:db8::/32")
    with pytest.raises(OfferError, match="EULER_NODE_JOB_BLOCKED_NETWORKS: 'lan'"):
        load_network_policy({"EULER_NODE_JOB_BLOCKED_NETWORKS": "lan"})


def test_rules_are_intact_only_with_every_jump_and_every_rule():
    steps = plan(NetworkPolicy(), NAMES, dns=["10.255.255.53"])
    assert rules_intact(steps, _listing(steps))
    assert not rules_intact(steps, _listing(steps, drop=0))  # a rule flushed
    jumpless = _listing(steps)
    jumpless["iptables"] = jumpless["iptables"].replace("-A DOCKER-USER -i eu-abc123def0 -j EULER-abc123def0-FWD", "")
    assert not rules_intact(steps, jumpless)
    assert not rules_intact(steps, {"iptables": "", "ip6tables": ""})


def test_the_engine_events_that_call_for_a_check():
    net = NAMES.network
    assert engine_event_matters({"Type": "daemon", "Action": "reload"}, net)
    assert engine_event_matters({"Type": "network", "Action": "destroy", "Actor": {"Attributes": {"name": net}}}, net)
    assert not engine_event_matters(
        {"Type": "network", "Action": "destroy", "Actor": {"Attributes": {"name": "x"}}}, net
    )
    assert not engine_event_matters(
        {"Type": "network", "Action": "connect", "Actor": {"Attributes": {"name": net}}}, net
    )


class _Api:
    """An engine whose event stream ends (a restart) once, then answers pings again."""

    def __init__(self, stop: threading.Event):
        self.stop = stop
        self.streams = 0

    def events(self, **kw):
        self.streams += 1
        if self.streams > 1:
            self.stop.wait(5)
            return iter(())
        raise ConnectionError("the engine closed the stream")

    def ping(self):
        return True


class _Docker:
    def __init__(self, stop):
        self.api = _Api(stop)


def test_when_the_engines_event_stream_ends_the_rules_are_checked_once_it_answers_again():
    stop = threading.Event()
    egress = Egress(policy=NetworkPolicy(), names=NAMES, docker_client=_Docker(stop))
    checked = threading.Event()
    egress.verify = checked.set
    egress.ready.set()
    egress._stopped = stop
    thread = threading.Thread(target=egress.watch_engine, daemon=True)
    thread.start()
    assert checked.wait(10)
    stop.set()
    thread.join(timeout=10)


# --- the real engine and iptables ---------------------------------------------------------------------
def _egress(node_name: str, tmp: Path, policy: NetworkPolicy) -> Egress:
    made = Egress(
        policy=policy,
        names=names_for(instance_id(url="https://t", node_name=node_name, state_dir=tmp), node_name),
        docker_client=docker.from_env(),
    )
    made.setup()
    assert made.error == "", made.error
    return made


@pytest.mark.docker
def test_rules_flushed_from_outside_are_back_before_the_next_job_starts(fake_net, node, tmp_path, make_executor, plane):  # noqa: F811
    private = fake_net.add("private", "10.213.78.10", "10.213.78.1")
    egress = _egress(node, tmp_path, NetworkPolicy())
    try:
        _sh("iptables", "-w", "-F", egress.names.forward)  # as an engine restart or a firewall reload would
        _sh("iptables", "-w", "-D", "DOCKER-USER", "-i", egress.names.bridge, "-j", egress.names.forward)
        ex = make_executor(egress=egress)
        ex.handle_assignment(assignment(51, ["sh", "-c", f"nc -w 2 10.213.78.10 {PORT} </dev/null || echo refused"]))
        ended = wait_for(lambda: plane.ended(51), "the ended report", timeout=90)
        assert ended["reason"] == "exited"
        assert "hello-private" not in plane.log(51) and private.read_text() == ""
        assert egress.reinstalled == 1  # put back by the check before the start, not by the 30 s period
    finally:
        egress.teardown()


@pytest.mark.docker
def test_a_removed_job_network_comes_back_from_the_engines_event(node, tmp_path, docker_engine):  # noqa: F811
    egress = _egress(node, tmp_path, NetworkPolicy())
    client = docker.from_env()
    watcher = threading.Thread(target=egress.watch_engine, daemon=True)
    watcher.start()
    try:
        wait_for(lambda: watcher.is_alive(), "the watcher")
        client.networks.get(egress.network_name).remove()
        wait_for(lambda: client.networks.list(names=[egress.network_name]), "the network's return", timeout=30)
    finally:
        egress.teardown()
        watcher.join(timeout=10)


def _listen(fake_net, ns: str, host: str, port: int, name: str) -> Path:  # noqa: F811
    path = fake_net.tmp / f"{name}.log"
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-c", LISTENER, name, host, str(port), str(path)]
    )
    fake_net.procs.append(proc)
    wait_for(lambda: Path(str(path) + ".ready").exists(), f"the {name} listener")
    path.touch()
    return path


@pytest.mark.docker
def test_a_lenders_blocked_cidr_and_dns_to_another_resolver_are_refused(fake_net, node, tmp_path, make_executor, plane):  # noqa: F811
    public = fake_net.add("public", "203.0.113.20", "203.0.113.2")
    other = fake_net.add("other", "198.51.100.20", "198.51.100.2")
    dns = _listen(fake_net, fake_net.namespaces[1], "198.51.100.20", 53, "dns")  # a resolver the node does not use
    egress = _egress(node, tmp_path, NetworkPolicy(blocked=("203.0.113.0/24",)))
    try:
        ex = make_executor(egress=egress)
        probe = "; ".join(
            f"echo {t}:{p} $(nc -w 2 {t} {p} </dev/null || echo refused)"
            for t, p in (("203.0.113.20", PORT), ("198.51.100.20", PORT), ("198.51.100.20", 53))
        )
        ex.handle_assignment(assignment(52, ["sh", "-c", probe]))
        ended = wait_for(lambda: plane.ended(52), "the ended report", timeout=90)
        out = plane.log(52)
        assert ended["reason"] == "exited", out
        assert f"198.51.100.20:{PORT} hello-other" in out, out  # the internet: yes
        assert public.read_text() == "" and dns.read_text() == "", out  # the lender's CIDR and other DNS: no
        assert other.read_text().count("\n") == 1
    finally:
        egress.teardown()
