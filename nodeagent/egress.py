"""The jobs' network: a bridge this agent creates and owns, and the egress rules it installs for that bridge.

Pure core: nodeagent/egress_plan.py turns the lender's policy into iptables/ip6tables argv (with the check that
makes each idempotent), and says what the policy is. Thin shell: `Egress` creates the bridge network and applies
the plan at start.

Never stale: the rules are verified (and put back) before each networked container starts (in a thread begun
before its create: nodeagent/executor_start.py), when the engine
comes back after a restart or its job network is removed (the engine's event stream, `watch_engine`), and
every VERIFY_EVERY_SECONDS besides.
Every name carries this agent's instance id, so two agents on one engine never touch each other's bridge,
chains or jumps, and no other chain or network is ever changed.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from docker import errors as derrors

from nodeagent import protocol
from nodeagent.egress_plan import (
    Names,
    dns_servers,
    engine_event_matters,
    names_from_owner,
    plan,
    removal,
    rules_intact,
)
from nodeagent.offer import EGRESS_NONE, EGRESS_PUBLIC, EGRESS_UNRESTRICTED, NetworkPolicy

log = logging.getLogger("euler.nodeagent.egress")

LABEL_EGRESS_OWNER = "euler.egress-owner"
SETUP_WAIT_SECONDS = 60.0
VERIFY_EVERY_SECONDS = 30.0
ENGINE_BACK_SECONDS = 0.2  # how often the watcher asks whether a restarting engine answers again


# --- the shell --------------------------------------------------------------------------------
Runner = Callable[[list[str]], subprocess.CompletedProcess]


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


class Egress:
    """The agent's job network. `network_name` is None when jobs get no network (policy `none`);
    `error` says why networked jobs are refused (the rules could not be installed)."""

    def __init__(
        self,
        *,
        policy: NetworkPolicy,
        names: Names,
        docker_client,
        run: Runner = _run,
        resolv_conf: Path = Path("/etc/resolv.conf"),
        resolv_fallback: Path = Path("/run/systemd/resolve/resolv.conf"),
    ):
        self.policy = policy
        self.names = names
        self.docker = docker_client
        self.run = run
        self.resolv_conf = resolv_conf
        self.resolv_fallback = resolv_fallback
        self.network_name: str | None = None
        self.error = ""
        self.ready = threading.Event()
        self._stopped = threading.Event()
        self._verifying = threading.Lock()  # the periodic check, the engine watcher and job starts verify
        self.reinstalled = 0  # times the rules were found changed and put back (shown in tests and logs)

    def start(self) -> None:
        """`setup()` in the background, so that heartbeats (and adopted jobs) do not wait for iptables; a new
        networked job waits for it in `refuse_reason()`. The engine watcher puts the rules back after a restart."""
        threading.Thread(target=self._keep, daemon=True, name="euler-egress").start()
        threading.Thread(target=self.watch_engine, daemon=True, name="euler-egress-events").start()

    def watch_engine(self) -> None:
        """Follow the engine's events: when its stream ends (the engine stopped or restarted, flushing chains
        as it comes back) wait until it answers again, then verify; verify too when our network is removed."""
        api = self.docker.api
        while not self._stopped.is_set():
            try:
                for event in api.events(decode=True, filters={"type": ["network", "daemon"]}):
                    if self._stopped.is_set():
                        return
                    if engine_event_matters(event, self.names.network):
                        self._verify_logged(f"the engine reported {event.get('Action')}")
            except Exception as exc:  # noqa: BLE001 - the engine went away: wait for it below
                log.info("the engine's event stream ended (%s): checking the egress rules once it answers", exc)
            self._stopped.wait(ENGINE_BACK_SECONDS)  # never a busy loop, whatever the stream does
            while not self._stopped.is_set():
                try:
                    api.ping()
                    break
                except Exception:  # noqa: BLE001 - still restarting
                    self._stopped.wait(ENGINE_BACK_SECONDS)
            if not self._stopped.is_set() and self.ready.is_set():
                self._verify_logged("the engine's event stream ended (restart)")

    def _verify_logged(self, why: str) -> None:
        try:
            self.verify()
        except Exception:  # noqa: BLE001 - checked again on the next event or period
            log.exception("checking the egress rules after %s failed", why)

    def _keep(self) -> None:
        self.setup()
        while not self._stopped.wait(VERIFY_EVERY_SECONDS):
            try:
                self.verify()
            except Exception:  # noqa: BLE001 - checked again next time
                log.exception("checking the egress rules failed")

    def verify(self) -> bool:
        """Network and rules still in place (`docker network prune`, a firewall reload, `iptables -F` or an
        engine restart may have removed them)? Put back if not, which also clears an earlier failure. True when
        they are in place."""
        with self._verifying:
            return self._verify()

    def _verify(self) -> bool:
        if self.policy.egress == EGRESS_NONE:
            return True
        if self.network_name is None:  # the network could not be made at start: the whole set-up again
            self.setup()
            return not self.error
        if self.policy.egress != EGRESS_PUBLIC:
            return True
        listings = {binary: self.run([binary, "-w", "-S"]) for binary in ("iptables", "ip6tables")}
        parent = "DOCKER-USER" if "-N DOCKER-USER" in listings["ip6tables"].stdout.splitlines() else "FORWARD"
        steps = plan(self.policy, self.names, dns=self.dns(), v6_forward_parent=parent)
        intact = all(done.returncode == 0 for done in listings.values()) and rules_intact(
            steps, {binary: done.stdout for binary, done in listings.items()}
        )
        if intact and not self.error:
            self._ensure_network()
            return True
        if not self.error:
            self.reinstalled += 1
            log.warning(
                "the egress rules of bridge %s were changed from outside: installing them again", self.names.bridge
            )
        try:
            self._ensure_network()
            self.install()
        except Exception as exc:  # noqa: BLE001 - networked jobs are refused until a later check succeeds
            error = f"egress rules could not be installed: {exc}"[:500]
            if error != self.error:
                log.error("%s", error)
            self.error = error
            return False
        if self.error:
            log.info("egress rules installed again; networked jobs run")
        self.error = ""
        return True

    def status(self) -> tuple[str, str]:
        return self.policy.egress, self.error[:500]

    def refuse_reason(self) -> str | None:
        """Checked before each networked container starts (beside its create): the rules are verified (put back if
        changed) first."""
        if not self.ready.wait(SETUP_WAIT_SECONDS):
            return "this node refuses networked jobs: its egress rules are still being installed"
        try:
            self.verify()
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is a refusal, never a start unprotected
            return f"this node refuses networked jobs: its egress rules could not be checked ({exc})"[:500]
        return f"this node refuses networked jobs: {self.error}" if self.error else None

    def _v6_forward_parent(self) -> str:
        return "DOCKER-USER" if self.run(["ip6tables", "-w", "-S", "DOCKER-USER"]).returncode == 0 else "FORWARD"

    def setup(self) -> None:
        """At start, idempotent: the bridge network, then the rules (or, for `unrestricted`, none of ours)."""
        try:
            self._setup()
        except Exception as exc:  # noqa: BLE001 - whatever broke, networked jobs are refused saying why
            self.error = f"egress setup failed: {exc}"[:500]
            log.exception("egress setup failed")
        finally:
            self.ready.set()

    def _setup(self) -> None:
        if self.policy.egress == EGRESS_NONE:
            self.network_name = None
            log.info("job egress: none (every job gets loopback only)")
            return
        try:
            self._ensure_network()
        except Exception as exc:  # noqa: BLE001 - any engine failure: no networked jobs, and the node says why
            self.error = f"could not create the job network {self.names.network}: {exc}"
            log.error("%s", self.error)
            return
        self.network_name = self.names.network
        if self.policy.egress == EGRESS_UNRESTRICTED:
            self._remove_rules()
            self.error = ""
            log.warning("job egress: unrestricted (EULER_NODE_JOB_EGRESS); jobs reach the host and its networks")
            return
        try:
            self.install()
        except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
            self.error = f"egress rules could not be installed: {exc}"[:500]
            log.error("%s", self.error)
            return
        self.error = ""
        log.info("job egress: public, on bridge %s (network %s)", self.names.bridge, self.names.network)

    def dns(self) -> list[str]:
        def read(path: Path) -> str:
            try:
                return path.read_text()
            except OSError:
                return ""

        return dns_servers(read(self.resolv_conf), read(self.resolv_fallback))

    def install(self) -> None:
        parent = self._v6_forward_parent()
        for step in plan(self.policy, self.names, dns=self.dns(), v6_forward_parent=parent):
            if step.unless is not None and self.run(step.unless).returncode == 0:
                continue
            done = self.run(step.argv)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(step.argv)}: {(done.stderr or done.stdout).strip()[:300]}")

    def _remove_rules(self) -> None:
        parent = self._v6_forward_parent()
        for argv in removal(self.names, v6_forward_parent=parent):
            if argv[2] == "-D":  # a jump inserted twice (by hand) is removed to the last
                while self.run(argv).returncode == 0:
                    pass
            else:
                self.run(argv)

    def _ensure_network(self) -> None:
        found = [n for n in self.docker.networks.list(names=[self.names.network]) if n.name == self.names.network]
        if found:
            return
        self.docker.networks.create(
            self.names.network,
            driver="bridge",
            options={
                "com.docker.network.bridge.name": self.names.bridge,
                "com.docker.network.bridge.enable_icc": "false",  # jobs on this node never reach each other
            },
            labels={protocol.LABEL_MANAGED: "true", LABEL_EGRESS_OWNER: self.names.bridge},
            check_duplicate=True,
        )

    def release(self) -> bool:
        """On a clean stop: remove the network and then the rules, unless a container still uses the network
        (a job the next start adopts): then both stay. True when nothing of this agent's is left."""
        self._stopped.set()
        if self.policy.egress == EGRESS_NONE or not self.ready.wait(SETUP_WAIT_SECONDS):
            return True
        try:
            for n in self.docker.networks.list(names=[self.names.network]):
                if n.name == self.names.network:
                    n.remove()
        except derrors.NotFound:
            pass
        except derrors.APIError as exc:
            log.info("keeping the job network and its rules: %s", exc.explanation or exc)
            return False
        self._remove_rules()
        return True

    def teardown(self) -> None:
        """Remove this agent's rules and network whatever uses it (tests)."""
        self._stopped.set()
        self._remove_rules()
        for n in self.docker.networks.list(names=[self.names.network]):
            if n.name == self.names.network:
                n.remove()


def remove_leftovers(docker_client, *, node_name: str) -> list[str]:
    """Remove every job network (and its rules) that an agent for `node_name` left on this engine, e.g. one
    killed or stopped mid-job for good; returns the networks removed. Containers on them must be gone."""
    removed = []
    for n in docker_client.networks.list(filters={"label": LABEL_EGRESS_OWNER}):
        owner = (n.attrs.get("Labels") or {}).get(LABEL_EGRESS_OWNER, "")
        if not owner.startswith("eu-") or n.name != f"euler-{node_name[:40]}-{owner.removeprefix('eu-')}":
            continue
        try:
            Egress(
                policy=NetworkPolicy(), names=names_from_owner(n.name, owner), docker_client=docker_client
            ).teardown()
            removed.append(n.name)
        except derrors.APIError as exc:
            log.warning("could not remove job network %s: %s", n.name, exc.explanation or exc)
    return removed
