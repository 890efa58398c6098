"""`RunRequest`: what `euler run` was asked, typed: the job's fields (None = not given) and how to follow it."""

from __future__ import annotations

from dataclasses import dataclass, field

from euler_client.parse import job_body


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    image: str | None = None
    command: tuple[str, ...] = ()
    file_body: dict | None = None  # the fields of a job file (`-f`); the flags given override them
    name: str | None = None
    cpu_milli: int | None = None
    memory_bytes: int | None = None
    gpu_count: int | None = None
    disk_bytes: int | None = None
    timeout_seconds: int | None = None
    max_retries: int | None = None
    retry_on: list | None = None  # endings, then {"exit_codes": [...]}
    region: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    pool: str | None = None
    min_trust: str | None = None
    priority: int | None = None
    network: str | None = None
    # how to follow it
    detach: bool = False  # print the id and return
    quiet: bool = False  # no progress lines
    as_json: bool = False  # wait for the end, print the ended job as JSON

    def body(self) -> dict:
        """The POST /api/v1/jobs body (the job file, the flags over it, then the defaults `run` asks for)."""
        return job_body(
            file_body=self.file_body, image=self.image, command=list(self.command), name=self.name,
            cpu_milli=self.cpu_milli, memory_bytes=self.memory_bytes, gpu_count=self.gpu_count,
            disk_bytes=self.disk_bytes, timeout_seconds=self.timeout_seconds, max_retries=self.max_retries,
            retry_on=self.retry_on, region=self.region, node_selector=self.node_selector, env=self.env,
            pool=self.pool, min_trust=self.min_trust, priority=self.priority, network=self.network,
        )  # fmt: skip
