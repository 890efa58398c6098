"""The executor's start path (a part of `Executor`, nodeagent/executor.py): what a fresh attempt checks and builds
before its container starts, kept off the path where it can be.

- The runtime: chosen from what the runtime probe offers (probed at start and after the engine's restart or
  reload, nodeagent/runtimes.py): no engine call per start.
- The image: the policy and the pull (nodeagent/images.py), skipped for an image already checked here while the
  engine's image events say nothing changed (nodeagent/imagecache.py).
- The egress rules of a networked job: verified, and put back if changed, in a thread begun before the engine's
  create and joined before its start (`start_checks`): never on the path unless slower than the create, and
  never skipped, so rules flushed from outside (a firewall reload, an engine restart) are back before any
  networked container starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nodeagent import protocol
from nodeagent.containers import create_kwargs
from nodeagent.runtimes import choose

Waiter = Callable[[dict], "str | None"]


def beside(check: Callable[[], str | None], *, name: str) -> Callable[[], str | None]:
    """Run `check` in its own thread now; the returned waiter gives its answer (a check that raised: a refusal
    saying so, never a start unchecked)."""
    result: dict[str, str | None] = {}

    def work() -> None:
        try:
            result["why"] = check()
        except Exception as exc:  # noqa: BLE001 - a check that cannot run refuses the start
            result["why"] = f"this node refuses the job: a check before its start failed ({exc})"[:500]

    thread = threading.Thread(target=work, daemon=True, name=name)
    thread.start()

    def wait() -> str | None:
        thread.join()
        return result.get("why", "this node refuses the job: a check before its start did not finish")

    return wait


def _passed(spec: dict) -> None:
    return None


class ExecutorStart:
    """Mixed into Executor: reads its `images`, `image_cache`, `egress`, `runtimes`, `storage_quota`,
    `volume_access`, `runner`, `node_name`, `owner` and `container_log_bytes`."""

    def ensure_image(self, assignment: protocol.Assignment) -> str:
        """The image policy and the pull (nodeagent/images.py): RunnerError `image_pull_failed` with fixed text.
        An image checked here before, with no image event since, is not checked again."""
        image, trust = assignment.image, assignment.node_trust
        cache = self.image_cache
        cache.start()  # follows the engine's image events from the first start on
        found = cache.get(image, trust)
        if found is not None:
            image_id, pulled = found
            if pulled:  # most recently used, for the cache cap's pruning (Euler's pulls only): off the path
                threading.Thread(target=self.images.touch, args=(image_id,), daemon=True, name="euler-touch").start()
            return image_id
        generation = cache.generation()
        image_id = self.images.ensure(image, trust=trust)
        cache.put(image, trust, (image_id, image_id in self.images.pulled()), generation)
        return image_id

    def refuse_reason(self, assignment: protocol.Assignment) -> str | None:
        """Why this node will not start the job before its container is made: no runtime here as isolated as the
        server or the lender asks (the egress rules are checked beside the create: `start_checks`)."""
        _, why = self.runtime_for(assignment)
        return why

    def start_checks(self, assignment: protocol.Assignment) -> Waiter:
        """Begin the checks that run beside the engine's create; the waiter, called with the container's spec
        before the start, says why it must not start (None: it may). A networked job: the egress rules verified
        (put back if changed), and the spec on the job network they guard; a job without network has nothing to
        check. Until the agent's egress set-up is done the check is made here, before the spec is built."""
        egress = self.egress
        if assignment.network != "default" or egress is None:
            return _passed
        ready = getattr(egress, "ready", None)
        if ready is None or not ready.is_set():
            why = egress.refuse_reason()
            wait = lambda: why  # noqa: E731
        else:
            wait = beside(egress.refuse_reason, name=f"euler-egress-check-{assignment.attempt_id}")

        def on_network(spec: dict) -> str | None:
            why = wait()
            if why is None and spec.get("network_mode") != (egress.network_name or "none"):
                # The job network was made again while this container was created (a check put it back).
                return "this node refuses networked jobs: its job network changed during the start; retry"
            return why

        return on_network

    def container_spec(self, assignment: protocol.Assignment) -> dict:
        """The container's create arguments: the job's hardened spec with the node's part (container_options)."""
        image = self.images.runnable(assignment.image)  # a digest reference the agent loaded: by its loaded tag
        if image != assignment.image:
            assignment = assignment.model_copy(update={"image": image})
        return create_kwargs(
            assignment,
            node_name=self.node_name,
            owner=self.owner,
            log_max_bytes=self.container_log_bytes,
            **self.container_options(assignment),
        )

    def container_options(self, assignment: protocol.Assignment) -> dict:
        """The node's part of the container spec: the job network, where the driver has one a disk quota, and
        where this agent cannot measure Docker's volumes, the image's VOLUMEs as tmpfs (charged to memory)."""
        network = self.egress.network_name if self.egress is not None else None
        limited = assignment.disk_bytes > 0
        quota = limited and self.storage_quota.available(assignment.image)
        in_memory = (
            self.runner.image_volumes(assignment.image) if limited and not self.volume_access.available() else ()
        )
        info, _ = self.runtime_for(assignment)
        runtime = {"runtime": info.name, "sandbox": info.sandbox} if info is not None else {}
        return {"network": network, "disk_quota": quota, "memory_volumes": in_memory, **runtime}

    def runtime_for(self, assignment: protocol.Assignment):
        """(the runtime the job runs under or None for the engine's default, why it must not start or None)."""
        probe = self.runtimes
        return choose(
            probe.offered() if probe is not None else [],
            runtime=assignment.runtime,
            isolation=assignment.isolation,
            networked=assignment.network == "default" and self.egress is not None,
            lender_min=probe.policy.min_isolation if probe is not None else "",
        )

    def runtime_name(self, kwargs: dict) -> str:
        """The runtime a container was created with, by name (the engine's default named as it lists it)."""
        if kwargs.get("runtime"):
            return kwargs["runtime"]
        offered = self.runtimes.offered() if self.runtimes is not None else []
        return next((r.name for r in offered if r.default), "")
