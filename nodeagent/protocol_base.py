"""What every part of the wire protocol shares: the model bases, the hash type, the outputs' limits, keep-alive.

nodeagent/protocol.py re-exports all of it (read them as `protocol.Strict`, `protocol.MAX_OUTPUT_FILES`);
they live here so that nodeagent/protocol_outputs.py can use them without an import circle.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

# Outputs: the largest body of one chunk PUT (the agent's chunk size and the server's accepted body are this);
# the most files and skipped entries one manifest lists; the longest relative path.
MAX_OUTPUT_CHUNK_BYTES = 8 * 1024 * 1024
MAX_OUTPUT_FILES = 10_000
MAX_OUTPUT_SKIPPED_LISTED = 1_000
MAX_OUTPUT_PATH_CHARS = 1024

# HTTP keep-alive. The server closes a connection idle this long (uvicorn's --timeout-keep-alive: config/up.py, the
# Dockerfile, the tests' platforms); the platform's own clients (the agent, the `euler` client, the TLS front) drop
# their idle connections sooner. A client that sends on a connection at the moment the server closes it gets
# "Connection reset by peer" for a request the server never read, and a POST is not retried: both timers run on
# loaded machines, so the margin is seconds. Longer than httpx's default expiry (5 s), so that a user's stock
# httpx client is on the safe side too.
SERVER_KEEPALIVE_SECONDS = 10
CLIENT_KEEPALIVE_SECONDS = SERVER_KEEPALIVE_SECONDS // 2

Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class Strict(BaseModel):
    """A request from a node: unknown fields refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Lenient(BaseModel):
    """A reply the agent parses: unknown fields ignored, so that a newer server can add to it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
