"""Where webhooks may point: the gateway's SSRF guard with the webhooks' own allow-list (EULER_WEBHOOK_ALLOWED_NETWORKS).

Its own module, below both the hook service (checks a URL at creation) and a delivery's try (checks every
connect), so that neither imports the other through the tasks.
"""

from __future__ import annotations

from agents import ssrf
from euler.errors import InvalidInput


def allowed_networks():
    return ssrf.allowed_networks("EULER_WEBHOOK_ALLOWED_NETWORKS")


def check_destination(url) -> str:
    """The SSRF guard of the gateway with the webhooks' own allow-list: 400 forbidden_address when refused."""
    if not isinstance(url, str) or not url or len(url) > 2000:
        raise InvalidInput("url is an http(s) URL of at most 2000 characters.", code="invalid_url")
    why = ssrf.check_url(url, allowed_networks())
    if why:
        raise InvalidInput(f"url refused: {why}.", code="forbidden_address", extra={"reason": why})
    return url
