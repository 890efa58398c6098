"""A replica's port is reached only through the node tunnel's path: from inside its own network namespace.

Real engine, real iptables: a job serving HTTP on the agent's job network. The host (its own sockets: what the
lender's LAN would reach through it) and another job's container are refused; the agent's namespace socket
(nodeagent/netns.py, what nodeagent/tunnel.py uses) gets the page.
"""

from __future__ import annotations

import os
import socket

import docker
import pytest

from nodeagent.docker_runner import DockerRunner
from nodeagent.netns import Namespaces

from .test_egress import egress  # noqa: F401 - the fixture
from .test_executor import assignment, make_executor, node, plane, wait_for  # noqa: F401, F811

pytestmark = pytest.mark.docker

PORT = 8080
SERVE = f"mkdir -p /tmp/www && echo hello-replica > /tmp/www/index.html && exec httpd -f -p {PORT} -h /tmp/www"


def _get(sock: socket.socket) -> bytes:
    sock.setblocking(True)
    sock.settimeout(5)
    with sock:
        sock.connect(("127.0.0.1", PORT))
        sock.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
        return b"".join(iter(lambda: sock.recv(65536), b""))


def _through_namespace(spaces: Namespaces, attempt_id: int) -> bytes | None:
    sock = spaces.socket_for(attempt_id)
    if sock is None:
        return None
    try:
        return _get(sock)
    except OSError:
        return None  # httpd not listening yet


def test_a_replicas_port_is_refused_to_the_host_and_to_other_jobs_and_served_through_its_namespace(
    egress,  # noqa: F811
    make_executor,  # noqa: F811
    plane,  # noqa: F811
    node,  # noqa: F811
):
    if os.geteuid() != 0:
        pytest.skip("entering a container's network namespace needs root")
    ex = make_executor(egress=egress)
    spaces = Namespaces(container_of=ex.serving_container, pid_of=ex.container_pid)
    try:
        ex.handle_assignment(assignment(61, ["sh", "-c", SERVE], timeout_seconds=600))
        wait_for(lambda: plane.reports.get(61), "the replica's running report", timeout=300)
        page = wait_for(lambda: _through_namespace(spaces, 61), "the replica's page", timeout=300)
        assert page.startswith(b"HTTP/1.") and b"hello-replica" in page

        settings = docker.from_env().api.inspect_container(ex.serving_container(61))["NetworkSettings"]
        address = settings["Networks"][egress.network_name]["IPAddress"]
        assert address and not settings.get("Ports")  # on the job bridge, publishing nothing

        # The host's own sockets (and so the lender's LAN, routed through the host) are refused.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, PORT), timeout=5)

        # Another job on the same node and network is refused too.
        probe = f"echo probe $(nc -w 2 {address} {PORT} </dev/null >/dev/null 2>&1 && echo open || echo refused)"
        ex.handle_assignment(assignment(62, ["sh", "-c", probe]))
        wait_for(lambda: plane.ended(62), "the probing job's end", timeout=300)
        assert "probe refused" in plane.log(62), plane.log(62)

        # An attempt this agent does not run gets no socket.
        assert spaces.socket_for(999_999) is None
    finally:
        spaces.close()
        runner = DockerRunner()  # the replica runs on: gone before the egress fixture takes its network away
        for found in runner.list_managed(node_name=node):
            runner.remove(found.container_id)
