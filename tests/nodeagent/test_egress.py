"""Job egress: the pure rule plan, the refusal when rules cannot be installed, and the real engine and iptables
against fake networks built from network namespaces and veth pairs."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from nodeagent.egress import Egress
from nodeagent.egress_plan import BLOCKED_V4, Step, dns_servers, instance_id, names_for, plan
from nodeagent.offer import NetworkPolicy

from .test_executor import assignment, make_executor, node, plane, wait_for  # noqa: F401, F811

NAMES = names_for("abc123def0", "n1")


def _argv(steps: list[Step]) -> list[str]:
    return [" ".join(s.argv) for s in steps]


def test_the_plan_rejects_private_ranges_after_dns_and_allowed_cidrs_and_jumps_from_docker_user_and_input():
    policy = NetworkPolicy(allowed=("10.8.0.0/16", "fd12::/64"))
    steps = plan(policy, NAMES, dns=["10.255.255.53"])
    lines = _argv(steps)
    fwd = [line for line in lines if line.startswith("iptables -w -A EULER-abc123def0-FWD")]
    assert fwd[0].endswith("--ctstate RELATED,ESTABLISHED -j RETURN")
    assert fwd[1:6] == [
        "iptables -w -A EULER-abc123def0-FWD -d 10.255.255.53 -p udp --dport 53 -j RETURN",
        "iptables -w -A EULER-abc123def0-FWD -d 10.255.255.53 -p tcp --dport 53 -j RETURN",
        "iptables -w -A EULER-abc123def0-FWD -p udp --dport 53 -j REJECT",  # DNS anywhere else: no
        "iptables -w -A EULER-abc123def0-FWD -p tcp --dport 53 -j REJECT",
        "iptables -w -A EULER-abc123def0-FWD -p tcp --dport 853 -j REJECT",
    ]
    assert fwd[6] == "iptables -w -A EULER-abc123def0-FWD -d 10.8.0.0/16 -j RETURN"
    assert fwd[7:] == [f"iptables -w -A EULER-abc123def0-FWD -d {c} -j REJECT" for c in BLOCKED_V4]
    host = [line for line in lines if line.startswith("iptables -w -A EULER-abc123def0-IN")]
    assert host[-1] == "iptables -w -A EULER-abc123def0-IN -j REJECT" and "10.8.0.0/16" not in " ".join(host)
    jumps = [s for s in steps if s.argv[2] == "-I"]
    assert [" ".join(s.argv) for s in jumps] == [
        "iptables -w -I DOCKER-USER 1 -i eu-abc123def0 -j EULER-abc123def0-FWD",
        "iptables -w -I INPUT 1 -i eu-abc123def0 -j EULER-abc123def0-IN",
        "iptables -w -I DOCKER-USER 1 -o eu-abc123def0 -j EULER-abc123def0-TO",
        "iptables -w -I OUTPUT 1 -o eu-abc123def0 -j EULER-abc123def0-TO",
        "ip6tables -w -I DOCKER-USER 1 -i eu-abc123def0 -j EULER-abc123def0-FWD",
        "ip6tables -w -I INPUT 1 -i eu-abc123def0 -j EULER-abc123def0-IN",
        "ip6tables -w -I DOCKER-USER 1 -o eu-abc123def0 -j EULER-abc123def0-TO",
        "ip6tables -w -I OUTPUT 1 -o eu-abc123def0 -j EULER-abc123def0-TO",
    ]
    inbound = [line for line in lines if line.startswith("iptables -w -A EULER-abc123def0-TO")]
    assert inbound == [  # into the bridge: replies only; nothing opens a connection to a job
        "iptables -w -A EULER-abc123def0-TO -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
        "iptables -w -A EULER-abc123def0-TO -j REJECT",
    ]
    assert all(s.unless and s.unless[2] == "-C" for s in jumps)  # idempotent: inserted only when missing
    v6 = [line for line in lines if line.startswith("ip6tables -w -A EULER-abc123def0-FWD")]
    assert "ip6tables -w -A EULER-abc123def0-FWD -d fd12::/64 -j RETURN" in v6
    assert "ip6tables -w -A EULER-abc123def0-FWD -d fc00::/7 -j REJECT" in v6
    assert not any("10.255.255.53" in line for line in v6)


def test_the_blocked_ranges_cover_every_non_global_address_but_documentation_ones():
    probes = ["10.1.2.3", "172.20.0.1", "192.168.1.1", "100.100.100.200", "169.254.169.254", "224.0.0.251"]
    blocked = [ipaddress.ip_network(c) for c in BLOCKED_V4]
    assert all(any(ipaddress.ip_address(p) in net for net in blocked) for p in probes)
    # The test's "public" listener sits in TEST-NET-3: not global on the internet, but routed by this policy.
    assert not any(ipaddress.ip_address("203.0.113.10") in net for net in blocked)


def test_each_agent_instance_gets_its_own_names(tmp_path):
    a = instance_id(url="https://e.example.com", node_name="n1", state_dir=tmp_path / "a")
    b = instance_id(url="https://e.example.com", node_name="n1", state_dir=tmp_path / "b")
    assert a != b and a == instance_id(url="https://e.example.com", node_name="n1", state_dir=tmp_path / "a")
    names = names_for(a, "n1")
    assert len(names.bridge) <= 15 and len(names.forward) <= 28 and a in names.network


def test_dns_servers_skip_loopback_resolvers_and_fall_back_to_systemd_resolveds_upstream():
    assert dns_servers("nameserver 10.255.255.53\nsearch x\n") == ["10.255.255.53"]
    assert dns_servers("nameserver 127.0.0.53\n", "nameserver 192.168.1.1\nnameserver fe80::1%eth0\n") == [
        "192.168.1.1",
        "fe80::1",
    ]


class FakeNetworks:
    def __init__(self):
        self.created = []

    def list(self, names):
        return []

    def create(self, name, **kw):
        self.created.append(name)


class FakeDocker:
    def __init__(self):
        self.networks = FakeNetworks()


def test_rules_that_cannot_be_installed_make_the_agent_refuse_networked_jobs_and_say_why():
    def failing(argv):
        return subprocess.CompletedProcess(argv, 4, "", "iptables: Permission denied (you must be root).")

    egress = Egress(policy=NetworkPolicy(), names=NAMES, docker_client=FakeDocker(), run=failing)
    egress.setup()
    assert egress.status()[0] == "public" and "Permission denied" in egress.status()[1]
    assert egress.refuse_reason().startswith("this node refuses networked jobs: egress rules could not be installed")


def test_unrestricted_and_none_install_no_rules():
    ran = []

    def record(argv):
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "")

    open_node = Egress(policy=NetworkPolicy(egress="unrestricted"), names=NAMES, docker_client=FakeDocker(), run=record)
    open_node.setup()
    assert open_node.network_name == NAMES.network and open_node.refuse_reason() is None
    assert not any("-A" in argv or "-I" in argv for argv in ran)  # only removals of earlier rules
    closed = Egress(policy=NetworkPolicy(egress="none"), names=NAMES, docker_client=FakeDocker(), run=record)
    closed.setup()
    assert closed.network_name is None and closed.status() == ("none", "")


# --- the real engine, real iptables, fake networks -------------------------------------------------
LISTENER = r"""
import socket, sys
name, host, port, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, port)); s.listen(16)
open(path + ".ready", "w").close()
while True:
    c, peer = s.accept()
    with open(path, "a") as f:
        f.write(peer[0] + "\n")
    c.sendall(("hello-" + name + "\n").encode()); c.close()
"""
PORT = 18080


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


class FakeNet:
    """Network namespaces joined to the host by veth pairs, each with a listener; everything removed after."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.tag = uuid.uuid4().hex[:6]
        self.namespaces: list[str] = []
        self.procs: list[subprocess.Popen] = []

    def listen(self, name: str, host: str, *, netns: str | None = None) -> Path:
        path = self.tmp / f"{name}.log"
        prefix = ["ip", "netns", "exec", netns] if netns else []
        proc = subprocess.Popen([*prefix, sys.executable, "-c", LISTENER, name, host, str(PORT), str(path)])
        self.procs.append(proc)
        wait_for(lambda: Path(str(path) + ".ready").exists(), f"the {name} listener")
        path.touch()
        return path

    def add(self, name: str, address: str, host_address: str) -> Path:
        ns, host_if, ns_if = f"eut-{self.tag}-{name}", f"vh{self.tag}{name[:3]}", f"vn{self.tag}{name[:3]}"
        _sh("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        _sh("ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _sh("ip", "link", "set", ns_if, "netns", ns)
        _sh("ip", "addr", "add", f"{host_address}/32", "dev", host_if)
        _sh("ip", "link", "set", host_if, "up")
        _sh("ip", "route", "add", f"{address}/32", "dev", host_if)
        _sh("ip", "-n", ns, "addr", "add", f"{address}/32", "dev", ns_if)
        _sh("ip", "-n", ns, "link", "set", ns_if, "up")
        _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "-n", ns, "route", "add", f"{host_address}/32", "dev", ns_if)
        _sh("ip", "-n", ns, "route", "add", "default", "via", host_address, "dev", ns_if)
        return self.listen(name, address, netns=ns)

    def close(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait(timeout=10)
        for ns in self.namespaces:  # deleting the namespace deletes its veth end, the peer, and their routes
            _sh("ip", "netns", "delete", ns, check=False)


@pytest.fixture
def fake_net(tmp_path, docker_engine):
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"):
        pytest.skip("needs root, iproute2 and iptables")
    net = FakeNet(tmp_path)
    yield net
    net.close()


@pytest.fixture
def egress(node, tmp_path):  # noqa: F811
    import docker

    client = docker.from_env()
    made = Egress(
        policy=NetworkPolicy(),
        names=names_for(instance_id(url="https://t", node_name=node, state_dir=tmp_path), node),
        docker_client=client,
    )
    try:
        made.setup()
        yield made
    finally:
        made.teardown()
        client.close()


@pytest.mark.docker
def test_a_job_reaches_the_internet_but_not_the_host_private_networks_or_metadata(
    fake_net,
    egress,
    make_executor,  # noqa: F811
    plane,  # noqa: F811
):
    assert egress.error == "" and egress.network_name
    listeners = {
        "public": fake_net.add("public", "203.0.113.10", "203.0.113.1"),
        "private": fake_net.add("private", "10.213.77.10", "10.213.77.1"),
        "metadata": fake_net.add("meta", "169.254.169.254", "169.254.169.1"),
        "host": fake_net.listen("host", "0.0.0.0"),
    }
    import docker

    gateway = docker.from_env().networks.get(egress.network_name).attrs["IPAM"]["Config"][0]["Gateway"]
    targets = ["203.0.113.10", "10.213.77.10", "169.254.169.254", gateway, "172.17.0.1", "203.0.113.1"]
    probe = "; ".join(f"echo {t} $(nc -w 2 {t} {PORT} </dev/null || echo refused)" for t in targets)
    ex = make_executor(egress=egress)

    ex.handle_assignment(assignment(41, ["sh", "-c", probe]))
    ended = wait_for(lambda: plane.ended(41), "the ended report", timeout=90)
    out = plane.log(41)
    assert ended["reason"] == "exited", (ended, out)
    assert "203.0.113.10 hello-public" in out, out
    assert listeners["public"].read_text().count("\n") == 1
    for name in ("private", "metadata", "host"):
        assert listeners[name].read_text() == "", f"the {name} listener received a connection:\n{out}"
    assert "hello-private" not in out and "hello-meta" not in out and "hello-host" not in out

    ex.handle_assignment(assignment(42, ["sh", "-c", probe + "; ip addr 2>/dev/null | grep -c inet"], network="none"))
    wait_for(lambda: plane.ended(42), "the ended report of the network-none job", timeout=90)
    assert "hello-" not in plane.log(42)
    assert listeners["public"].read_text().count("\n") == 1  # nothing more reached it
    for name in ("private", "metadata", "host"):
        assert listeners[name].read_text() == ""


@pytest.mark.docker
def test_setting_up_twice_is_idempotent_and_leaves_one_jump(egress):
    egress.setup()
    assert egress.error == ""
    rules = _sh("iptables", "-w", "-S", "DOCKER-USER").stdout
    assert rules.count(f"-j {egress.names.forward}") == 1
    rules = _sh("iptables", "-w", "-S", "INPUT").stdout
    assert rules.count(f"-j {egress.names.host}") == 1


def _nslookup(client, network: str) -> str:
    out = client.containers.run(
        "euler-test/busybox", ["sh", "-c", "nslookup example.com 2>&1; true"], network=network, remove=True
    )
    return out.decode()


@pytest.mark.docker
def test_dns_keeps_working_through_dockers_embedded_resolver(egress):
    import docker

    client = docker.from_env()
    answered = ("NXDOMAIN", "Address 1", "Name:")
    if not any(word in _nslookup(client, "bridge") for word in answered):
        pytest.skip("the host's resolver does not answer even on Docker's default bridge")
    out = _nslookup(client, egress.network_name)
    assert "127.0.0.11" in out and any(word in out for word in answered), out


class BrokenEgress:
    network_name = None

    def refuse_reason(self):
        return "this node refuses networked jobs: egress rules could not be installed: iptables: Permission denied"

    def status(self):
        return "public", "egress rules could not be installed: iptables: Permission denied"


@pytest.mark.docker
def test_without_its_rules_the_agent_refuses_networked_jobs_but_runs_network_none_ones(
    make_executor,  # noqa: F811
    plane,  # noqa: F811
):
    ex = make_executor(egress=BrokenEgress())
    assert ex.network_status()[1].startswith("egress rules could not be installed")
    ex.handle_assignment(assignment(51, ["echo", "networked"]))
    ex.handle_assignment(assignment(52, ["echo", "offline"], network="none"))
    refused = wait_for(lambda: plane.ended(51), "the refused job's end")
    assert refused["reason"] == "start_failed" and "refuses networked jobs" in refused["message"]
    assert not any(r["state"] == "running" for r in plane.reports[51])
    ran = wait_for(lambda: plane.ended(52), "the network-none job's end")
    assert ran["reason"] == "exited" and ran["exit_code"] == 0 and plane.log(52) == "offline\n"


@pytest.mark.docker
def test_a_clean_stop_takes_the_network_and_rules_away_unless_a_job_still_uses_them(egress):
    import docker

    client = docker.from_env()
    job = client.containers.run("euler-test/busybox", ["sleep", "30"], network=egress.network_name, detach=True)
    try:
        assert egress.release() is False  # the job is adopted after a restart: its network and rules stay
        assert f"-j {egress.names.forward}" in _sh("iptables", "-w", "-S", "DOCKER-USER").stdout
    finally:
        job.remove(force=True)
    assert egress.release() is True
    assert egress.names.forward not in _sh("iptables", "-w", "-S").stdout
    assert egress.names.host not in _sh("ip6tables", "-w", "-S").stdout
    assert not [n for n in client.networks.list(names=[egress.network_name]) if n.name == egress.network_name]


@pytest.mark.docker
def test_rules_removed_from_outside_are_put_back_by_the_next_check(egress):
    _sh("iptables", "-w", "-F", egress.names.forward)
    _sh("iptables", "-w", "-D", "INPUT", "-i", egress.names.bridge, "-j", egress.names.host)
    assert egress.verify() is True
    assert f"-j {egress.names.host}" in _sh("iptables", "-w", "-S", "INPUT").stdout
    assert "-d 169.254.0.0/16 -j REJECT" in _sh("iptables", "-w", "-S", egress.names.forward).stdout
    assert egress.verify() is True and egress.error == ""


@pytest.mark.docker
def test_leftovers_of_an_agent_gone_for_good_are_removed_by_node_name(egress, node):  # noqa: F811
    import docker

    from nodeagent.egress import remove_leftovers

    client = docker.from_env()
    assert remove_leftovers(client, node_name="someone-else") == []
    assert remove_leftovers(client, node_name=node) == [egress.network_name]
    assert egress.names.forward not in _sh("iptables", "-w", "-S").stdout


def test_a_later_check_installs_rules_that_failed_at_start_and_networked_jobs_run_again():
    state = {"broken": True}

    def flaky(argv):
        if state["broken"]:
            return subprocess.CompletedProcess(argv, 4, "", "iptables: Resource temporarily unavailable.")
        return subprocess.CompletedProcess(argv, 1 if argv[2] in ("-S", "-C") else 0, "", "")

    egress = Egress(policy=NetworkPolicy(), names=NAMES, docker_client=FakeDocker(), run=flaky)
    egress.setup()
    assert egress.refuse_reason() is not None
    state["broken"] = False
    assert egress.verify() is True
    assert egress.error == "" and egress.refuse_reason() is None


def test_a_later_check_makes_the_job_network_that_could_not_be_made_at_start():
    class EngineBusy(FakeNetworks):
        broken = True

        def create(self, name, **kw):
            if self.broken:
                raise RuntimeError("the engine is restarting")
            super().create(name, **kw)

    docker = FakeDocker()
    docker.networks = EngineBusy()
    answer = lambda argv: subprocess.CompletedProcess(argv, 1 if argv[2] in ("-S", "-C") else 0, "", "")  # noqa: E731
    egress = Egress(policy=NetworkPolicy(), names=NAMES, docker_client=docker, run=answer)
    egress.setup()
    assert egress.network_name is None and "could not create the job network" in egress.refuse_reason()
    docker.networks.broken = False
    assert egress.verify() is True
    assert docker.networks.created == [NAMES.network]
    assert egress.network_name == NAMES.network and egress.refuse_reason() is None
