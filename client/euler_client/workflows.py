"""`client.schedules` (cron schedules of jobs) and `client.webhooks` (signed event deliveries and their log)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at start-up
if TYPE_CHECKING:
    from euler_client.api import Api


def _name(name: str) -> str:
    """A schedule's name as one path segment (urllib.parse imported only here: it costs `euler run` ~2 ms)."""
    from urllib.parse import quote

    return quote(name, safe="")


class Schedules:
    def __init__(self, client: Api):
        self.c = client

    def list(self) -> list[dict]:
        return self.c.pages("schedules")

    def get(self, name: str) -> dict:
        return self.c.get(f"schedules/{_name(name)}")

    def create(self, *, name: str, cron: str, job: dict, timezone: str | None = None, overlap: str | None = None,
               enabled: bool = True) -> dict:  # fmt: skip
        body = {"name": name, "cron": cron, "job": job, "enabled": enabled}
        body.update({k: v for k, v in (("timezone", timezone), ("overlap", overlap)) if v is not None})
        return self.c.post("schedules", body)

    def update(self, name: str, **fields) -> dict:
        return self.c.patch(f"schedules/{_name(name)}", fields)

    def delete(self, name: str) -> None:
        self.c.delete(f"schedules/{_name(name)}")

    def runs(self, name: str, *, limit: int | None = 20) -> list[dict]:
        return self.c.pages(f"schedules/{_name(name)}/runs", limit=limit)


class Webhooks:
    def __init__(self, client: Api):
        self.c = client

    def list(self) -> list[dict]:
        return self.c.pages("webhooks")

    def create(self, *, url: str, events: list[str], description: str | None = None) -> dict:
        """The new hook with its `secret`, shown this once."""
        body: dict = {"url": url, "events": events}
        if description is not None:
            body["description"] = description
        return self.c.post("webhooks", body)

    def delete(self, hook_id: int) -> None:
        self.c.delete(f"webhooks/{int(hook_id)}")

    def deliveries(self, hook_id: int, *, limit: int | None = 20) -> list[dict]:
        return self.c.pages(f"webhooks/{int(hook_id)}/deliveries", limit=limit)

    def redeliver(self, hook_id: int, delivery_id: int) -> dict:
        return self.c.post(f"webhooks/{int(hook_id)}/deliveries/{int(delivery_id)}/redeliver")
