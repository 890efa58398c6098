"""`RunRequest`: what `euler run` was asked, typed: the job's fields (None = not given) and how to follow it."""

from __future__ import annotations

from collections import namedtuple

from euler_client.parse import job_body

# The job's fields (None = not given), then how to follow it. A namedtuple, not a dataclass: `dataclasses`
# imports `inspect`, a third of the CLI's own start-up CPU.
_FIELDS = {
    "image": None,  # str
    "command": (),  # tuple[str, ...]
    "file_body": None,  # dict: the fields of a job file (`-f`); the flags given override them
    "name": None,  # str
    "cpu_milli": None,  # int
    "memory_bytes": None,  # int
    "gpu_count": None,  # int
    "gpu_model": None,  # str: a typed request, the body's `gpus` object (count: gpu_count, else 1)
    "gpu_min_memory_gib": None,  # float
    "disk_bytes": None,  # int
    "timeout_seconds": None,  # int
    "max_retries": None,  # int
    "retry_on": None,  # list[str]
    "region": None,  # str
    "node_selector": None,  # dict[str, str]
    "env": None,  # dict[str, str]
    "pool": None,  # str
    "min_trust": None,  # str
    "priority": None,  # int
    "priority_class": None,  # str: a priority class's name
    "network": None,  # str
    "isolation": None,  # str
    "array_count": None,  # int: --array N, N tasks of this job
    "parallelism": None,  # int
    "depends_on": None,  # list[dict]: --after
    "detach": False,  # print the id and return
    "quiet": False,  # no progress lines
    "as_json": False,  # wait for the end, print the ended job as JSON
}


class RunRequest(namedtuple("RunRequest", list(_FIELDS), defaults=list(_FIELDS.values()))):
    """What `euler run` was asked, typed and immutable: `RunRequest(image="alpine:3.20", command=("true",))`."""

    __slots__ = ()

    def body(self) -> dict:
        """The POST /api/v1/jobs body (the job file, the flags over it, then the defaults `run` asks for)."""
        body = self._body()
        if self.gpu_model is None and self.gpu_min_memory_gib is None:
            return body
        typed = {"count": self.gpu_count if self.gpu_count is not None else 1}
        if self.gpu_model is not None:
            typed["model"] = self.gpu_model
        if self.gpu_min_memory_gib is not None:
            typed["min_memory_gib"] = self.gpu_min_memory_gib
        body.pop("gpu_count", None)
        body["gpus"] = typed
        return body

    def _body(self) -> dict:
        return job_body(
            file_body=self.file_body, image=self.image, command=list(self.command), name=self.name,
            cpu_milli=self.cpu_milli, memory_bytes=self.memory_bytes, gpu_count=self.gpu_count,
            disk_bytes=self.disk_bytes, timeout_seconds=self.timeout_seconds, max_retries=self.max_retries,
            retry_on=self.retry_on, region=self.region, node_selector=self.node_selector, env=self.env,
            pool=self.pool, min_trust=self.min_trust, priority=self.priority, network=self.network,
            isolation=self.isolation, priority_class=self.priority_class,
            depends_on=self.depends_on, array=self.array(),
        )  # fmt: skip

    def array(self) -> dict | None:
        if self.array_count is None:
            return None
        return {"count": self.array_count} | ({"parallelism": self.parallelism} if self.parallelism else {})
