"""The container runtimes this node offers, and the one an assignment runs under.

Pure core: `candidates()` reads the engine's runtimes (`docker info`), `judge()` turns a candidate and its probe
results into what is offered (or why not), `choose()` checks the server's choice for an assignment against what
this node offers and its lender's minimum. Thin shell: `RuntimeProbe` runs a probe container per candidate at
start, and again when the engine restarts or reloads its configuration (the engine's event stream).

A runtime is a sandbox when its binary (the runtime's path, else its name) is gVisor's `runsc` (a basename that
starts with `runsc`: `/usr/bin/runsc`, `runsc-debug`). The containerd shim aliases the engine lists beside runc
(`io.containerd.runc.v2`, `io.containerd.runtime.v1.linux`) are runc under another name and are not offered.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nodeagent import protocol

log = logging.getLogger("euler.nodeagent.runtimes")

SANDBOX_BINARY = "runsc"
SHIM_PREFIX = "io.containerd."
DEFAULT_PROBE_IMAGE = "alpine:3.20"
PROBE_LABEL = "euler.runtime-probe"
PROBE_SECONDS = 60
ENGINE_BACK_SECONDS = 0.5
HOST_NETWORK = (
    "gVisor with --network=host hands the job's sockets to the host kernel's network stack: not offered "
    "(register runsc with --network=none for jobs without network)"
)


class RuntimeConfigError(ValueError):
    """A lender setting is wrong; the message names the variable."""


@dataclass(frozen=True)
class RuntimePolicy:
    """The lender's settings: `offer` (EULER_NODE_RUNTIMES) the runtime names this node may offer (None: every one
    that passes its probe); `min_isolation` (EULER_NODE_MIN_ISOLATION) the least isolation any job here runs under;
    `probe_image` (EULER_NODE_RUNTIME_PROBE_IMAGE) the image the probe container runs `true` in."""

    offer: tuple[str, ...] | None = None
    min_isolation: str = ""
    probe_image: str = DEFAULT_PROBE_IMAGE


def load_policy(env: Mapping[str, str]) -> RuntimePolicy:
    raw = env.get("EULER_NODE_RUNTIMES")
    offer = None
    if raw is not None and raw.strip():
        offer = tuple(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))
        for name in offer:
            if not name.replace("-", "").replace(".", "").replace("_", "").isalnum() or len(name) > 63:
                raise RuntimeConfigError(f"EULER_NODE_RUNTIMES: {name!r} is not a runtime name (e.g. runc,runsc)")
    minimum = (env.get("EULER_NODE_MIN_ISOLATION") or "").strip().lower()
    if minimum not in ("", *protocol.ISOLATION_LEVELS):
        raise RuntimeConfigError(f"EULER_NODE_MIN_ISOLATION is runc or sandbox, got {minimum!r}")
    image = (env.get("EULER_NODE_RUNTIME_PROBE_IMAGE") or "").strip() or DEFAULT_PROBE_IMAGE
    return RuntimePolicy(offer=offer, min_isolation=minimum, probe_image=image)


# --- pure: what the engine lists, what is offered ---------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    name: str
    path: str = ""
    args: tuple[str, ...] = ()
    default: bool = False

    @property
    def sandbox(self) -> bool:
        return os.path.basename(self.path or self.name).startswith(SANDBOX_BINARY)

    @property
    def network_flag(self) -> str:
        """gVisor's `--network` from the runtime's arguments ("sandbox", its own default, when not given)."""
        found = "sandbox"
        args = list(self.args)
        for i, arg in enumerate(args):
            if arg.startswith("--network="):
                found = arg.split("=", 1)[1]
            elif arg == "--network" and i + 1 < len(args):
                found = args[i + 1]
        return found


def candidates(info: Mapping) -> list[Candidate]:
    """The runtimes `docker info` lists, the engine's default first; shim aliases of runc left out."""
    default = str(info.get("DefaultRuntime") or "runc")
    out = []
    for name, entry in sorted((info.get("Runtimes") or {}).items()):
        entry = entry if isinstance(entry, Mapping) else {}
        if name.startswith(SHIM_PREFIX) and name != default:
            continue
        out.append(
            Candidate(
                name=name,
                path=str(entry.get("path") or ""),
                args=tuple(str(a) for a in entry.get("runtimeArgs") or ()),
                default=name == default,
            )
        )
    return sorted(out, key=lambda c: (not c.default, c.name))


def probes_for(c: Candidate) -> tuple[str, ...]:
    """The networks a candidate is probed on: "none" always; the engine's bridge too for a sandbox whose own
    network stack is on (runc's networking is the engine's, and needs no probe of its own)."""
    if c.sandbox and c.network_flag == "sandbox":
        return ("none", "bridge")
    return ("none",)


def judge(c: Candidate, results: Mapping[str, str | None]) -> tuple[protocol.RuntimeInfo | None, str]:
    """What is offered of one candidate, from its probe results ({network: None when the probe container ran and
    exited 0, else the error}): (the RuntimeInfo or None, why not)."""
    if c.sandbox and c.network_flag == "host":
        return None, HOST_NETWORK
    failed = results.get("none", "not probed")
    if failed is not None:
        return None, f"its probe container failed: {failed}"[:500]
    if not c.sandbox:
        networks = ["none", "default"]
    elif c.network_flag == "none":
        networks = ["none"]
    else:  # gVisor's own network stack: the job network only if a container on a bridge started under it
        networks = ["none", "default"] if results.get("bridge", "not probed") is None else ["none"]
    return protocol.RuntimeInfo(name=c.name, sandbox=c.sandbox, networks=networks, default=c.default), ""


def isolation_of(info: protocol.RuntimeInfo | None) -> str:
    return protocol.ISOLATION_SANDBOX if info is not None and info.sandbox else protocol.ISOLATION_RUNC


def stronger(a: str, b: str) -> str:
    """The stronger of two isolation levels ("" counts as none asked)."""
    rank = {"": -1, **{level: i for i, level in enumerate(protocol.ISOLATION_LEVELS)}}
    return a if rank.get(a, len(rank)) >= rank.get(b, len(rank)) else b


def choose(
    offered: list[protocol.RuntimeInfo], *, runtime: str, isolation: str, networked: bool, lender_min: str = ""
) -> tuple[protocol.RuntimeInfo | None, str | None]:
    """The runtime an assignment runs under, or why it is refused: (info, None) or (None, reason).

    `runtime` is the server's choice ("" from an older server: this node picks), `isolation` what the server says
    the job needs. The server's word is checked: the runtime must be one this node offers, at least as isolated
    as the job and this node's lender ask, and run the job's network. Offered nothing (an engine whose probe
    could not run): the engine's default, for jobs that need no sandbox. (None, None): the engine's default.
    """
    need = stronger(isolation if isolation in protocol.ISOLATION_LEVELS else "", lender_min)
    if isolation and isolation not in protocol.ISOLATION_LEVELS:
        need = protocol.ISOLATION_SANDBOX  # a level this agent does not know: the strongest it has
    network = "default" if networked else "none"
    if not runtime:
        fits = [r for r in offered if network in r.networks and (need != protocol.ISOLATION_SANDBOX or r.sandbox)]
        fits.sort(key=lambda r: (r.sandbox != (need == protocol.ISOLATION_SANDBOX), not r.default, r.name))
        if fits:
            return fits[0], None
        if need == protocol.ISOLATION_SANDBOX:
            return None, f"this node offers no sandboxed runtime that runs network {network!r} jobs"
        return None, None
    info = next((r for r in offered if r.name == runtime), None)
    if info is None:
        return None, f"runtime {runtime!r} is not one this node offers"
    if need == protocol.ISOLATION_SANDBOX and not info.sandbox:
        why = "this node's lender requires a sandbox" if lender_min == need else "the job needs a sandbox"
        return None, f"runtime {runtime!r} is weaker than required ({why})"
    if network not in info.networks:
        return None, f"runtime {runtime!r} does not run network {network!r} jobs on this node"
    return info, None


def narrow(found: list[protocol.RuntimeInfo], policy: RuntimePolicy) -> list[protocol.RuntimeInfo]:
    """What the lender lets this node offer: EULER_NODE_RUNTIMES names, and under a sandbox minimum, sandboxes only."""
    out = [r for r in found if policy.offer is None or r.name in policy.offer]
    if policy.min_isolation == protocol.ISOLATION_SANDBOX:
        out = [r for r in out if r.sandbox]
    return out[: protocol.MAX_RUNTIMES]


# --- the shell: probe containers on the real engine ----------------------------------------------------
Prober = Callable[[Candidate, str], str | None]


class RuntimeProbe:
    """Keeps the offered runtimes current: probed at start, and again after an engine restart or reload."""

    def __init__(self, docker_client, policy: RuntimePolicy, *, owner: str = "") -> None:
        self.docker = docker_client
        self.policy = policy
        self.owner = owner
        self._lock = threading.Lock()
        self._offered: list[protocol.RuntimeInfo] = []
        self.refused: dict[str, str] = {}  # runtime name -> why it is not offered
        self.probed = threading.Event()
        self._stopped = threading.Event()
        self.rounds = 0  # probe rounds done (tests wait on it)

    def offered(self) -> list[protocol.RuntimeInfo]:
        with self._lock:
            return list(self._offered)

    def start(self) -> None:
        self.refresh()
        threading.Thread(target=self._watch, daemon=True, name="euler-runtimes").start()

    def stop(self) -> None:
        self._stopped.set()

    def refresh(self) -> list[protocol.RuntimeInfo]:
        """Probe every candidate the engine lists now, and keep what passes."""
        try:
            found = candidates(self.docker.api.info())
        except Exception as exc:  # noqa: BLE001 - no engine: nothing offered until it answers
            log.warning("cannot list the engine's runtimes: %s", exc)
            return self.offered()
        self._reap_probes()
        image_error = self._ensure_image()
        offered, refused = [], {}
        for c in found:
            if self.policy.offer is not None and c.name not in self.policy.offer:
                continue
            if image_error:
                results = {net: image_error for net in probes_for(c)}
            else:
                results = {net: self.probe_container(c, net) for net in probes_for(c)}
            info, why = judge(c, results)
            if info is None:
                refused[c.name] = why
                log.warning("runtime %s not offered: %s", c.name, why)
            else:
                offered.append(info)
        offered = narrow(offered, self.policy)
        with self._lock:
            changed = offered != self._offered
            self._offered, self.refused = offered, refused
            self.rounds += 1
        if changed:
            log.info("runtimes offered: %s", ", ".join(_describe(r) for r in offered) or "none")
        self.probed.set()
        return offered

    def _reap_probes(self) -> None:
        """Probe containers this agent left behind (it died mid-probe): removed before probing again."""
        try:
            for c in self.docker.api.containers(all=True, filters={"label": f"{PROBE_LABEL}={self.owner or 'true'}"}):
                self.docker.api.remove_container(c["Id"], force=True)
        except Exception as exc:  # noqa: BLE001 - tried again at the next probe
            log.info("could not remove leftover probe containers: %s", exc)

    def _ensure_image(self) -> str:
        image = self.policy.probe_image
        try:
            self.docker.api.inspect_image(image)
            return ""
        except Exception:  # noqa: BLE001 - not here: pulled once below
            log.info("the runtime probe image %s is not on the engine: pulling it", image)
        try:
            self.docker.api.pull(image)
            return ""
        except Exception as exc:  # noqa: BLE001
            return f"the probe image {image} is not on the engine and could not be pulled ({exc})"[:300]

    def probe_container(self, c: Candidate, network: str) -> str | None:
        """Run `true` under the runtime, hardened as a job is: None when it exits 0, else what went wrong."""
        from nodeagent.containers import probe_kwargs

        api = self.docker.api
        cid = None
        host, kwargs = probe_kwargs(
            self.policy.probe_image, network, sandbox=c.sandbox, label={PROBE_LABEL: self.owner or "true"}
        )
        try:
            created = api.create_container(**kwargs, host_config=api.create_host_config(runtime=c.name, **host))
            cid = created["Id"]
            api.start(cid)
            code = api.wait(cid, timeout=PROBE_SECONDS).get("StatusCode")
            return None if code == 0 else f"exited {code}"
        except Exception as exc:  # noqa: BLE001 - any failure means the runtime is not usable
            return str(getattr(exc, "explanation", None) or exc)[:300]
        finally:
            if cid is not None:
                try:
                    api.remove_container(cid, force=True)
                except Exception:  # noqa: BLE001 - a leftover probe is reaped by label next time
                    log.debug("could not remove probe container %s", cid)

    def _watch(self) -> None:
        """Probe again when the engine comes back from a restart (its event stream ends) or reloads its
        configuration (SIGHUP: `daemon reload`, which is how runtimes are registered)."""
        api = self.docker.api
        while not self._stopped.is_set():
            try:
                for event in api.events(decode=True, filters={"type": ["daemon"]}):
                    if self._stopped.is_set():
                        return
                    if event.get("Action") == "reload":
                        self.refresh()
            except Exception as exc:  # noqa: BLE001 - the engine went away: wait for it below
                log.info("the engine's event stream ended (%s): probing runtimes again once it answers", exc)
            self._stopped.wait(ENGINE_BACK_SECONDS)
            while not self._stopped.is_set():
                try:
                    api.ping()
                    break
                except Exception:  # noqa: BLE001 - still restarting
                    self._stopped.wait(ENGINE_BACK_SECONDS)
            if not self._stopped.is_set():
                self.refresh()


def _describe(r: protocol.RuntimeInfo) -> str:
    return f"{r.name} ({'sandbox' if r.sandbox else 'runc'}, networks {'/'.join(r.networks)})"
