"""The Euler Python client and `euler` command line: a thin shell over the public REST API and websocket.

Names are imported lazily so that `euler --version` (and any command that does not need them) starts fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "Client": "euler_client.client",
    "LogChunk": "euler_client.client",
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
