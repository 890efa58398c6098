"""What an upstream's answer may do on Euler's origin: nothing active (pure header rules, unit-tested).

An agent's response is relayed from Euler's own origin, where the console's session lives. So
every relayed response carries `nosniff` and a CSP that sandboxes it (no script, no plugins, no
same-origin access), and a browser caller (a console session) gets active content types as a
download. Callers with an API key are programs: they get the body inline, headers aside.
"""

from __future__ import annotations

CSP = "sandbox; default-src 'none'; frame-ancestors 'none'"

# Types a browser renders as a document that can run script or load sub-resources.
ACTIVE_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "image/svg+xml",
        "text/xml",
        "application/xml",
        "text/xsl",
        "application/xslt+xml",
        "text/javascript",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "text/ecmascript",
        "text/jscript",
        "application/pdf",
        "multipart/x-mixed-replace",
        "text/rdf",
        "application/rdf+xml",
        "application/vnd.wap.xhtml+xml",
        "application/mathml+xml",
        "text/cache-manifest",
    }
)

# Headers an upstream may never set on Euler's origin, whoever calls.
DROP_ALWAYS = frozenset(
    {
        "content-security-policy",
        "content-security-policy-report-only",
        "x-content-type-options",
        "clear-site-data",  # could sign the console user out or wipe the origin's storage
        "service-worker-allowed",
        "refresh",
    }
)
# Headers that would let another site read the answer with the console user's cookie.
DROP_FOR_SESSION = frozenset(
    {
        "access-control-allow-origin",
        "access-control-allow-credentials",
        "access-control-allow-headers",
        "access-control-allow-methods",
        "access-control-expose-headers",
        "access-control-max-age",
    }
)


def media_type(content_type: str | None) -> str:
    """`text/HTML; charset=utf-8` -> `text/html`; absent or blank -> ``."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_active(content_type: str | None) -> bool:
    """True for types a browser might run; a missing or malformed type counts as active (browsers sniff)."""
    kind = media_type(content_type)
    if not kind or "/" not in kind:
        return True
    return kind in ACTIVE_TYPES or kind.endswith("+xml") or kind.endswith("/xml")


def harden(headers: dict[str, str], *, by_session: bool) -> dict[str, str]:
    """The relayed response's headers (lower-case names) made safe for Euler's origin."""
    drop = DROP_ALWAYS | DROP_FOR_SESSION if by_session else DROP_ALWAYS
    safe = {name: value for name, value in headers.items() if name not in drop}
    safe["x-content-type-options"] = "nosniff"
    safe["content-security-policy"] = CSP
    safe["cross-origin-resource-policy"] = "same-origin"  # no other site may embed it (no-cors loads only)
    if by_session and is_active(safe.get("content-type")):
        safe["content-disposition"] = "attachment"
    return safe
