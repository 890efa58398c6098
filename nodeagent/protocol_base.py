"""What every part of the wire protocol shares: the model bases, the hash type and the outputs' limits.

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

Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class Strict(BaseModel):
    """A request from a node: unknown fields refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Lenient(BaseModel):
    """A reply the agent parses: unknown fields ignored, so that a newer server can add to it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
