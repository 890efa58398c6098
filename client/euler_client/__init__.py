"""The Euler Python client and `euler` command line: a thin shell over the public REST API and websocket.

Names are imported lazily so that `euler --version` (and any command that does not need them) starts fast.
"""

from __future__ import annotations

import sys

__version__ = "0.1.0"

_LAZY = {
    "Client": "euler_client.client",
    "LightClient": "euler_client.client",
    "LogChunk": "euler_client.client",
    "RunRequest": "euler_client.jobrequest",
    "EulerError": "euler_client.errors",
    "ApiError": "euler_client.errors",
    "InvalidInput": "euler_client.errors",
    "Unauthorized": "euler_client.errors",
    "Forbidden": "euler_client.errors",
    "NotFound": "euler_client.errors",
    "Conflict": "euler_client.errors",
    "QuotaExceeded": "euler_client.errors",
    "RateLimited": "euler_client.errors",
    "ServerError": "euler_client.errors",
    "ConnectionFailed": "euler_client.errors",
    "ConfigError": "euler_client.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'euler_client' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def _defer_httpx_cli() -> None:
    """httpx's __init__ imports its own command line (click, rich, pygments: most of its import time) whenever
    those are installed, as they are beside us. We never use it: register a stand-in that loads the real one
    only if someone calls it."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    import types

    def main(*args, **kwargs):
        import importlib

        sys.modules.pop("httpx._main", None)
        return importlib.import_module("httpx._main").main(*args, **kwargs)

    stub = types.ModuleType("httpx._main")
    stub.main = main
    sys.modules["httpx._main"] = stub


_defer_httpx_cli()
