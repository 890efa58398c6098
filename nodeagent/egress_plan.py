"""The jobs' egress rules as plain data (pure): the lender's policy turned into iptables/ip6tables argv, the
check that they are still in place, the names one agent's bridge and chains carry, and the resolvers allowed.

Policy `public` (the default): the internet is reachable; the host itself (INPUT) and private, CGNAT,
link-local (cloud metadata), multicast, reserved and ULA destinations (DOCKER-USER, or FORWARD where
ip6tables has no DOCKER-USER) are rejected, except the host's DNS resolvers on port 53 (Docker's embedded DNS
forwards a job's queries to them from the job's own network namespace) and the CIDRs the lender allows. The
lender's own blocked CIDRs are rejected first (they win over allowed ones), and DNS (53, and DNS over TLS on
853) to anything but those resolvers is rejected: a job cannot use a resolver of its choosing as a channel.
Every name carries the agent's instance id, so two agents on one engine never touch each other's bridge,
chains or jumps. The shell that applies all this is nodeagent/egress.py.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from nodeagent.offer import NetworkPolicy

BLOCKED_V4 = (
    "0.0.0.0/8",  # "this network"
    "10.0.0.0/8",
    "100.64.0.0/10",  # CGNAT (Alibaba's metadata 100.100.100.200 lives here)
    "127.0.0.0/8",
    "169.254.0.0/16",  # link-local: cloud metadata at 169.254.169.254
    "172.16.0.0/12",
    "192.0.0.0/24",  # IETF protocol assignments
    "192.168.0.0/16",
    "198.18.0.0/15",  # benchmarking
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, broadcast
)
BLOCKED_V6 = (
    "::/128",
    "::1/128",
    "::ffff:0:0/96",  # IPv4-mapped
    "64:ff9b::/96",  # NAT64
    "100::/64",  # discard
    "2002::/16",  # 6to4 (embeds any IPv4 address)
    "fc00::/7",  # unique local
    "fe80::/10",  # link-local
    "ff00::/8",  # multicast
)
DNS_PORTS = (("udp", "53"), ("tcp", "53"), ("tcp", "853"))  # DNS, and DNS over TLS


class Step(NamedTuple):
    """Run `argv` unless `unless` (a check) succeeds; without `unless`, run it always."""

    argv: list[str]
    unless: list[str] | None = None


@dataclass(frozen=True)
class Names:
    network: str  # the Docker network
    bridge: str  # its Linux bridge (at most 15 characters)
    forward: str  # chain for forwarded traffic from the bridge
    host: str  # chain for traffic from the bridge to the host itself

    @property
    def inbound(self) -> str:
        """The chain for connections into the bridge from anywhere but a job (the host itself, the LAN)."""
        return self.forward.removesuffix("-FWD") + "-TO"


def instance_id(*, url: str, node_name: str, state_dir: Path | str) -> str:
    """Stable for one agent (control plane, node, state dir); different for a second agent on the same engine."""
    seed = f"{url}\n{node_name}\n{Path(state_dir).expanduser().resolve()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:10]


def names_for(instance: str, node_name: str) -> Names:
    return Names(
        network=f"euler-{node_name[:40]}-{instance}",
        bridge=f"eu-{instance}",
        forward=f"EULER-{instance}-FWD",
        host=f"EULER-{instance}-IN",
    )


def dns_servers(resolv_conf: str, fallback_conf: str = "") -> list[str]:
    """The resolvers Docker's embedded DNS forwards to: the host's, without loopback ones (Docker drops them
    too and, when nothing is left, uses systemd-resolved's upstream file, then Google's public servers)."""

    def parse(text: str) -> list[str]:
        found = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                try:
                    address = ipaddress.ip_address(parts[1].split("%")[0])
                except ValueError:
                    continue
                if not address.is_loopback:
                    found.append(str(address))
        return found

    return parse(resolv_conf) or parse(fallback_conf)


def _family(cidrs, version: int) -> list[str]:
    return [c for c in cidrs if ipaddress.ip_network(c, strict=False).version == version]


def plan(policy: NetworkPolicy, names: Names, *, dns: list[str], v6_forward_parent: str = "DOCKER-USER") -> list[Step]:
    """Every iptables and ip6tables command that puts the policy in place for this agent's bridge, in order.

    Chains are created if missing and flushed, their rules appended, and the jumps to them inserted first in
    DOCKER-USER (forwarded traffic) and INPUT (traffic to the host) unless already there.
    """
    steps: list[Step] = []
    for binary, version, blocked, forward_parent in (
        ("iptables", 4, BLOCKED_V4, "DOCKER-USER"),
        ("ip6tables", 6, BLOCKED_V6, v6_forward_parent),
    ):
        allowed = _family(policy.allowed, version)
        resolvers = _family(dns, version)
        established = ["-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "RETURN"]
        dns_rules = [
            ["-d", ns, "-p", proto, "--dport", "53", "-j", "RETURN"] for ns in resolvers for proto in ("udp", "tcp")
        ]
        other_dns = [["-p", proto, "--dport", port, "-j", "REJECT"] for proto, port in DNS_PORTS]
        forward = [established, *(["-d", c, "-j", "REJECT"] for c in _family(policy.blocked, version))]
        forward += [*dns_rules, *other_dns, *(["-d", c, "-j", "RETURN"] for c in allowed)]
        forward += [["-d", c, "-j", "REJECT"] for c in blocked]
        host = [established, *dns_rules, ["-j", "REJECT"]]  # the host itself: nothing but its resolvers
        # Into the bridge: nothing opens a connection to a job, neither the host nor the LAN through it (a replica's
        # port is reached only through the node tunnel, from inside its own namespace: nodeagent/netns.py).
        inbound = [established, ["-j", "REJECT"]]
        for chain, rules in ((names.forward, forward), (names.host, host), (names.inbound, inbound)):
            steps.append(Step([binary, "-w", "-N", chain], unless=[binary, "-w", "-S", chain]))
            steps.append(Step([binary, "-w", "-F", chain]))
            steps += [Step([binary, "-w", "-A", chain, *rule]) for rule in rules]
        for parent, side, chain in _jumps(names, forward_parent):
            jump = [side, names.bridge, "-j", chain]
            steps.append(Step([binary, "-w", "-I", parent, "1", *jump], unless=[binary, "-w", "-C", parent, *jump]))
    return steps


def _jumps(names: Names, forward_parent: str) -> list[tuple[str, str, str]]:
    """(parent chain, -i or -o, our chain): out of the bridge (forwarded, to the host) and into it (forwarded, from
    the host's own sockets)."""
    return [
        (forward_parent, "-i", names.forward),
        ("INPUT", "-i", names.host),
        (forward_parent, "-o", names.inbound),
        ("OUTPUT", "-o", names.inbound),
    ]


def rules_intact(steps: list[Step], listings: dict[str, str]) -> bool:
    """Pure: whether `iptables -S` / `ip6tables -S` listings (by binary) hold every jump of the plan and, in each
    of our chains, exactly as many rules as the plan appends (rule text is normalised by iptables, so counted)."""
    expected: dict[tuple[str, str], int] = {}
    for step in steps:
        if step.argv[2] == "-A":
            key = (step.argv[0], step.argv[3])
            expected[key] = expected.get(key, 0) + 1
    lines = {binary: text.splitlines() for binary, text in listings.items()}
    for step in steps:
        if step.argv[2] == "-I":  # [binary, -w, -I, parent, 1, -i|-o, bridge, -j, chain]
            binary, parent, side, bridge, chain = step.argv[0], step.argv[3], step.argv[5], step.argv[6], step.argv[8]
            jump = f"-A {parent} {side} {bridge} -j {chain}"
            if not any(line == jump or line.startswith(jump + " ") for line in lines.get(binary, ())):
                return False
    for (binary, chain), count in expected.items():
        if sum(1 for line in lines.get(binary, ()) if line.startswith(f"-A {chain} ")) != count:
            return False
    return True


def engine_event_matters(event: dict, network: str) -> bool:
    """Pure: an engine event after which the rules are checked (the daemon reloaded; our network went)."""
    if event.get("Type") == "daemon":
        return True
    attrs = (event.get("Actor") or {}).get("Attributes") or {}
    return event.get("Type") == "network" and event.get("Action") == "destroy" and attrs.get("name") == network


def removal(names: Names, *, v6_forward_parent: str = "DOCKER-USER") -> list[list[str]]:
    """The commands that take this agent's jumps and chains away (each may fail when already gone)."""
    argvs = []
    for binary, forward_parent in (("iptables", "DOCKER-USER"), ("ip6tables", v6_forward_parent)):
        for parent, side, chain in _jumps(names, forward_parent):
            argvs.append([binary, "-w", "-D", parent, side, names.bridge, "-j", chain])
        for chain in (names.forward, names.host, names.inbound):
            argvs += [[binary, "-w", "-F", chain], [binary, "-w", "-X", chain]]
    return argvs


def names_from_owner(network: str, owner: str) -> Names:
    """The names of an existing job network from its owner label (the bridge name)."""
    instance = owner.removeprefix("eu-")
    return Names(network=network, bridge=owner, forward=f"EULER-{instance}-FWD", host=f"EULER-{instance}-IN")
