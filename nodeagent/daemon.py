"""The node agent's loop: enroll once, heartbeat at the server's interval, long-poll for work, drive the executor.

Threads: heartbeats, the long-poll, and a 200 ms executor tick; the main thread waits for the stop (set by
SIGTERM/SIGINT: nodeagent/process.py, the command line and the process around this loop).
When the control plane is unreachable every loop backs off (capped, jittered) and the agent logs one line
when the link goes down and one when it comes back. A refused credential (revoked, node rejected) stops
the agent with exit code 78 so that systemd does not restart it in a loop.
"""

from __future__ import annotations

import logging
import socket
import threading

from nodeagent import __version__, protocol, state
from nodeagent.backoff import Backoff, Link
from nodeagent.client import ControlPlaneClient, Refused, Unreachable
from nodeagent.config import AgentConfig
from nodeagent.daemon_setup import NullExecutor, build_executor, start_runtime_probe  # noqa: F401  (NullExecutor: re-exported)
from nodeagent.offer import apply_caps

log = logging.getLogger("euler.nodeagent")

EXIT_CONFIG = 78  # EX_CONFIG: do not restart, a person must act
TICK_SECONDS = 0.2
LEAVING_TIMEOUT = 5.0  # the stop's last request: a control plane that does not answer must not hold the stop up


class Fatal(Exception):
    """The agent cannot go on without a person (bad config, refused credential)."""


class Daemon:
    def __init__(self, config: AgentConfig, *, probe=None, executor=None, stop: threading.Event | None = None) -> None:
        from nodeagent.probe import Probe

        self.config = config
        self.stop = stop or threading.Event()
        self.fatal: str | None = None
        self.probe = probe or Probe()
        state.ensure_dir(config.state_dir)
        self.client = ControlPlaneClient(
            config.url,
            credential=state.load_credential(config.state_dir),
            allow_insecure=config.allow_insecure,
            ca_file=config.ca_file,
        )
        self.executor = executor
        self.link = Link(log)
        self.approval: str | None = None
        self.terms_sent = False  # EULER_NODE_TERMS applied (or refused) in this start
        self.draining: bool | None = None
        self.interval = 5.0
        self.poll_wait = float(protocol.POLL_WAIT_SECONDS)  # the server's heartbeat replies may lengthen it
        self.approved = threading.Event()
        self.runtimes = None  # nodeagent.runtimes.RuntimeProbe, started by run() when an engine answers
        self.gpus = None  # nodeagent.gpuwatch.GpuWatch where NVML answers: GPU health and per-job figures
        self.tunnel = None  # nodeagent.tunnel.Tunnel, started by run() when the executor runs containers

    # --- enrollment ------------------------------------------------------------------------------
    def enroll(self) -> None:
        if self.client.credential:
            node = state.load_node(self.config.state_dir)
            log.info("using the credential in %s (node %s)", self.config.state_dir, node.get("name", self.config.name))
            return
        if not self.config.enrollment_token:
            raise Fatal(f"not enrolled yet and EULER_ENROLLMENT_TOKEN is not set (state dir {self.config.state_dir})")
        req = protocol.EnrollRequest(
            token=self.config.enrollment_token,
            name=self.config.name,
            hostname=socket.gethostname()[:255],
            region=self.config.region,
            labels=self.config.labels,
            agent_version=__version__,
            resources=self.resources(),
        )
        backoff = Backoff()
        while not self.stop.is_set():
            try:
                reply = protocol.EnrollResponse.model_validate(
                    self.client.call("POST", protocol.PATH_ENROLL, req.model_dump(mode="json"))
                )
            except Unreachable as exc:
                self.link.failed(str(exc))
                self.stop.wait(backoff.next_delay())
                continue
            except Refused as exc:
                raise Fatal(f"enrollment refused: {exc}") from None
            self.link.ok()
            state.save_enrollment(
                self.config.state_dir,
                credential=reply.credential,
                node_id=reply.node_id,
                name=reply.name,
                url=self.config.url,
            )
            self.client.set_credential(reply.credential)
            self.interval = reply.heartbeat_interval
            self._set_approval(reply.approval, False)
            log.info(
                "enrolled as node %s (id %s); the credential is in %s", reply.name, reply.node_id, self.config.state_dir
            )
            return

    def resources(self) -> protocol.Resources:
        """What this node offers: the machine (disk: free space plus what its jobs already wrote, since the
        server counts their whole `disk_bytes` as held), capped by the lender, with the job network policy."""
        machine = self.probe.resources()
        executor = self.executor
        extra = {}
        if executor is not None and hasattr(executor, "disk_used") and machine.disk_bytes is not None:
            extra["disk_bytes"] = machine.disk_bytes + executor.disk_used()
        if executor is not None and hasattr(executor, "network_status"):
            extra["job_egress"], extra["job_egress_error"] = executor.network_status()
        extra["allowed_images"] = list(self.config.images.patterns)
        runtimes = self.runtimes or getattr(executor, "runtimes", None)
        if runtimes is not None:
            extra["runtimes"] = runtimes.offered()
        extra["min_isolation"] = self.config.runtimes.min_isolation
        if self.gpus is not None:
            extra["gpus"] = self.gpus.health.annotate(machine.gpus)
        return apply_caps(machine.model_copy(update=extra), self.config.caps)

    # --- loops -----------------------------------------------------------------------------------
    def _set_approval(self, approval: str, draining: bool) -> None:
        if approval != self.approval:
            log.info("approval: %s", approval if self.approval is None else f"{self.approval} → {approval}")
            self.approval = approval
        if draining != self.draining:
            if self.draining is not None or draining:
                log.info("draining" if draining else "accepting work")
            self.draining = draining
        if approval == "approved":
            self.approved.set()
        else:
            self.approved.clear()

    def _refused(self, exc: Refused, what: str) -> None:
        if exc.status == 401:
            self.fatal = (
                f"{what} refused: {exc} — re-enroll with a new token (remove {self.config.state_dir}/credential)"
            )
            self.stop.set()
        else:
            log.warning("%s refused: %s", what, exc)

    def heartbeat_once(self) -> protocol.HeartbeatReply:
        hb = protocol.Heartbeat(
            agent_version=__version__, resources=self.resources(), running=self.executor.running_attempts()
        )
        reply = protocol.HeartbeatReply.model_validate(
            self.client.call("POST", protocol.PATH_HEARTBEAT, hb.model_dump(mode="json"))
        )
        self._set_approval(reply.approval, reply.draining)
        if reply.approval == "approved" and self.config.terms is not None and not self.terms_sent:
            self.send_terms()
        self.interval = reply.heartbeat_interval
        if reply.poll_wait is not None:
            self.poll_wait = min(max(reply.poll_wait, 1.0), protocol.POLL_WAIT_MAX_SECONDS)
        for command in reply.commands:
            self.executor.handle_command(command)
        if self.gpus is not None and reply.gpu_resets:
            self.gpus.health.apply_resets(reply.gpu_resets)
        return reply

    def send_terms(self) -> None:
        """The lender's terms from EULER_NODE_TERMS, once per start, once approved (the approved capacity bounds
        them). Refused: said in the log, and the terms the node had stand; unreachable: tried at the next beat."""
        try:
            reply = self.client.call("PUT", protocol.PATH_TERMS, self.config.terms)
        except Unreachable:
            return
        except Refused as exc:
            self.terms_sent = True
            log.error("the terms in EULER_NODE_TERMS were refused (%s); the terms set before stand", exc)
            return
        self.terms_sent = True
        log.info("terms from EULER_NODE_TERMS applied: %s", protocol.encode_json(reply.get("terms")).decode())

    def heartbeat_loop(self) -> None:
        backoff = Backoff()
        while not self.stop.is_set():
            try:
                self.heartbeat_once()
                self.link.ok()
                backoff.reset()
                delay = self.interval
            except Unreachable as exc:
                self.link.failed(str(exc))
                delay = backoff.next_delay()
            except Refused as exc:
                self._refused(exc, "heartbeat")
                delay = backoff.next_delay()
            except Exception:  # noqa: BLE001 - keep beating; a bug here must not silence the node
                log.exception("heartbeat failed")
                delay = backoff.next_delay()
            self.stop.wait(delay)

    def poll_loop(self) -> None:
        backoff = Backoff()
        while not self.stop.is_set():
            if not self.approved.wait(1.0):
                continue
            wait = self.poll_wait
            try:
                data = self.client.call("POST", protocol.PATH_POLL, {"wait": wait}, timeout=wait + 15)
                reply = protocol.PollReply.model_validate(data)
                backoff.reset()
            except Unreachable as exc:
                if not self.stop.is_set():
                    self.link.failed(str(exc))
                    self.stop.wait(backoff.next_delay())
                continue
            except Refused as exc:
                self._refused(exc, "poll")
                self.stop.wait(backoff.next_delay())
                continue
            except Exception:  # noqa: BLE001
                log.exception("poll failed")
                self.stop.wait(backoff.next_delay())
                continue
            self.link.ok()
            for command in reply.commands:
                self.executor.handle_command(command)
            for assignment in reply.assignments:
                self.executor.handle_assignment(assignment)

    def tick_loop(self) -> None:
        while not self.stop.wait(TICK_SECONDS):
            try:
                self.executor.tick()
            except Exception:  # noqa: BLE001
                log.exception("executor tick failed")

    def say_leaving(self) -> None:
        """Tell the server which attempts' containers this stop leaves running, so that the node going offline
        while the agent restarts does not lose them (the server holds them a while: docs/nodes.md). Best effort:
        without it (a crash, an older server) the node's liveness decides as before."""
        left = getattr(self.executor, "left_attempts", None)
        attempts = left() if left is not None and self.fatal is None else []
        if not attempts:
            return
        body = protocol.Leaving(attempts=attempts).model_dump(mode="json")
        try:
            reply = protocol.LeavingReply.model_validate(
                self.client.call("POST", protocol.PATH_LEAVING, body, timeout=LEAVING_TIMEOUT)
            )
        except (Unreachable, Refused) as exc:
            log.warning("could not tell the control plane that %d jobs run on (%s)", len(attempts), exc)
            return
        except Exception:  # noqa: BLE001 - stopping anyway
            log.exception("telling the control plane that jobs run on failed")
            return
        log.info("left %d jobs running; the control plane holds them for %.0f s", len(reply.held), reply.hold_seconds)

    def _start_tunnel(self):
        """The node tunnel (nodeagent/tunnel.py): how the gateway reaches this node's replicas; no inbound port."""
        serving = getattr(self.executor, "serving_container", None)
        if not self.config.tunnel or serving is None:
            return None
        from nodeagent.client import tls_context
        from nodeagent.netns import Namespaces
        from nodeagent.tunnel import Tunnel

        spaces = Namespaces(container_of=serving, pid_of=self.executor.container_pid)
        tunnel = Tunnel(
            base_url=self.client.base_url,
            credential=lambda: self.client.credential,
            socket_for=spaces.socket_for,
            tls=tls_context(self.config.ca_file),
        )
        tunnel.start()
        return tunnel

    # --- run -------------------------------------------------------------------------------------
    def run(self) -> int:
        log.info("euler-node %s: node %s, control plane %s", __version__, self.config.name, self.config.url)
        if self.executor is None and self.probe.docker is not None:
            self.runtimes = start_runtime_probe(self.config)
        try:
            self.enroll()
        except Fatal as exc:
            log.error("%s", exc)
            return EXIT_CONFIG
        if self.stop.is_set():
            return 0
        if self.executor is None:
            self.executor = build_executor(
                self.client, self.config, docker_ok=self.probe.docker is not None, runtimes=self.runtimes
            )
        self.executor.adopt()
        from nodeagent import gpuwatch

        self.gpus = gpuwatch.start(self.probe, self.executor, state_dir=self.config.state_dir, stop=self.stop)
        self.tunnel = self._start_tunnel()
        threads = [
            threading.Thread(target=self.heartbeat_loop, name="heartbeat", daemon=True),
            threading.Thread(target=self.poll_loop, name="poll", daemon=True),
            threading.Thread(target=self.tick_loop, name="tick", daemon=True),
        ]
        for t in threads:
            t.start()
        self.stop.wait()
        log.info("stopping")
        busy = bool(self.executor.running_attempts())
        if self.tunnel is not None:
            self.tunnel.close()
        try:
            self.executor.close()
            egress = getattr(self.executor, "egress", None)
            if egress is not None and not busy:
                egress.release()  # the job network and rules go with the agent, unless a job still uses them
        finally:
            threads[0].join(timeout=5)
            self.say_leaving()
            self.client.close()
        if self.fatal:
            log.error("%s", self.fatal)
            return EXIT_CONFIG
        log.info("stopped")
        return 0
