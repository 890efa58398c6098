"""Why a pull failed, as a class (`kind`) and a detail: the class picks the fixed text the user sees
(nodeagent/images.py); the detail, which may carry what the pull met on the lender's network, is logged only."""

from __future__ import annotations

REFUSED = "refused"  # the address policy refused a connection: nothing was dialled
NOT_FOUND = "not_found"  # the registry answered 404 for the manifest
UNAUTHORIZED = "unauthorized"  # 401/403, or a challenge other than an anonymous bearer token
UNREACHABLE = "unreachable"  # no connection, TLS, reset, a timeout on one request, an error status, a redirect loop
TIMED_OUT = "timed_out"  # the whole pull ran past its deadline
UNSUPPORTED = "unsupported"  # not an image this node can load (format, platform, a digest or size that lies)
TOO_LARGE = "too_large"  # past the node's bound on one image
LOAD_FAILED = "load_failed"  # the engine refused the archive built from verified blobs


class Failed(Exception):
    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail
