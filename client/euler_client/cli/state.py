"""What every command shares: the chosen profile, and one client made on first use (click-free)."""

from __future__ import annotations


class State:
    """What every command shares: the chosen profile, and one client made on first use."""

    def __init__(self, profile: str | None):
        self.profile = profile
        self._client = None

    def client(self):
        if self._client is None:
            from euler_client.client import Client, LightClient, proxied
            from euler_client.config import resolve

            settings = resolve(profile=self.profile)
            cls = Client if proxied() else LightClient  # httpx only where a proxy must be honoured
            self._client = cls(settings.url, settings.api_key)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
