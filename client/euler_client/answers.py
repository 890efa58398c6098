"""What every client class shares: the user agent, and how a failure becomes a typed error."""

from __future__ import annotations

from euler_client import __version__
from euler_client.errors import EulerError, error_from_answer

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at start-up
if TYPE_CHECKING:
    import httpx

USER_AGENT = f"euler-client/{__version__}"


def reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    return " ".join(text.split())


def error_for(response: httpx.Response) -> EulerError:
    try:
        body = response.json()
    except ValueError:
        body = response.text.strip()[:200] if "text/" in response.headers.get("content-type", "") else ""
    return error_from_answer(response.status_code, body, dict(response.headers))
