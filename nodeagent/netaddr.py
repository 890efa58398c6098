"""Which IP addresses are not on the public internet: the pure address classification that the gateway's SSRF
guard (agents/ssrf.py) and the image policy (nodeagent/imageref.py, on the server and on the agent) share.

No Django and no third-party imports: the node agent imports it on hosts. Beside `nodeagent/protocol.py` it
is the only code that the server and the agent share (see nodeagent/imageref.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.tencentyun.com",
        "metadata.azure.com",
        "metadata.azure.internal",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.oraclecloud.com",
        "metadata.packet.net",
        "metadata.platformequinix.com",
        "localhost",
        "localhost.localdomain",
    }
)

# Checked in order; the first match names the reason. Anything else that Python does not call
# global is refused at the end as "not globally routable".
NAMED_RANGES: tuple[tuple[str, IPNetwork], ...] = tuple(
    (reason, ipaddress.ip_network(cidr))
    for reason, cidr in (
        ("unspecified/this-network (0.0.0.0/8)", "0.0.0.0/8"),
        ("loopback", "127.0.0.0/8"),
        ("private (RFC 1918)", "10.0.0.0/8"),
        ("private (RFC 1918)", "172.16.0.0/12"),
        ("private (RFC 1918)", "192.168.0.0/16"),
        ("carrier-grade NAT (100.64.0.0/10, cloud metadata lives here)", "100.64.0.0/10"),
        ("link-local (169.254.0.0/16, cloud metadata lives here)", "169.254.0.0/16"),
        ("IETF protocol assignments (192.0.0.0/24)", "192.0.0.0/24"),
        ("documentation range", "192.0.2.0/24"),
        ("documentation range", "198.51.100.0/24"),
        ("documentation range", "203.0.113.0/24"),
        ("benchmarking range (198.18.0.0/15)", "198.18.0.0/15"),
        ("multicast", "224.0.0.0/4"),
        ("reserved (240.0.0.0/4)", "240.0.0.0/4"),
        ("unspecified (::)", "::/128"),
        ("loopback", "::1/128"),
        ("NAT64 (64:ff9b::/96)", "64:ff9b::/96"),
        ("NAT64 local-use (64:ff9b:1::/48)", "64:ff9b:1::/48"),
        ("discard-only (100::/64)", "100::/64"),
        ("Teredo (2001::/32)", "2001::/32"),
        ("documentation range", "2001:db8::/32"),
        ("6to4 (2002::/16)", "2002::/16"),
        ("unique-local (fc00::/7)", "fc00::/7"),
        ("link-local (fe80::/10)", "fe80::/10"),
        ("site-local (fec0::/10)", "fec0::/10"),
        ("multicast", "ff00::/8"),
    )
)


def parse_networks(specs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDR strings → networks; raises ValueError naming the bad one."""
    out = []
    for spec in specs:
        try:
            out.append(ipaddress.ip_network(spec.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{spec!r} is not an IP network (CIDR)") from None
    return tuple(out)


def unwrap(ip: IPAddress) -> IPAddress:
    """The IPv4 address hidden in an IPv4-mapped (::ffff:a.b.c.d) or -compatible (::a.b.c.d) form."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if int(ip) >> 32 == 0 and int(ip) > 1:  # deprecated IPv4-compatible ::a.b.c.d
            return ipaddress.IPv4Address(int(ip))
        if int(ip) >> 32 == 0xFFFF << 16:  # ::ffff:0:a.b.c.d (SIIT translated)
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def address_refusal(address: str, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why one resolved address may not be dialled, or None when it may."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    inner = unwrap(ip)
    for candidate in {ip, inner}:
        if any(candidate.version == net.version and candidate in net for net in allowed):
            return None
    for candidate in (inner,):
        for reason, net in NAMED_RANGES:
            if candidate.version == net.version and candidate in net:
                return f"{address} is {reason}"
        if not candidate.is_global or candidate.is_multicast or candidate.is_reserved:
            return f"{address} is not globally routable"
    return None
