"""The outputs part of the wire protocol (issue 24): the manifest an agent posts, the plan and replies it gets.

The flow and the paths are described in nodeagent/protocol.py, which re-exports these models (both sides use
them as `protocol.OutputManifest`, ...).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from nodeagent.protocol_base import (
    MAX_OUTPUT_FILES,
    MAX_OUTPUT_PATH_CHARS,
    MAX_OUTPUT_SKIPPED_LISTED,
    Lenient,
    Sha256Hex,
    Strict,
)

OutputPath = Annotated[str, StringConstraints(min_length=1, max_length=MAX_OUTPUT_PATH_CHARS)]


class OutputFile(Strict):
    # '/'-separated, relative, valid UTF-8, no '.', '..' or empty parts: the declared path's last part first
    # (`/out/logs/a.txt` declared as `/out` is `out/logs/a.txt`; declared as `/out/logs` it is `logs/a.txt`).
    path: OutputPath
    size: int = Field(ge=0)
    sha256: Sha256Hex


class OutputSkip(Strict):
    path: Annotated[str, StringConstraints(max_length=MAX_OUTPUT_PATH_CHARS)]  # printable form of the name
    # symlink | device | special | not_utf8 | bad_name | too_many_files | job_cap | spool_cap | quota | missing
    reason: Annotated[str, StringConstraints(min_length=1, max_length=32)]
    message: Annotated[str, StringConstraints(max_length=500)] = ""


class OutputManifest(Strict):
    files: list[OutputFile] = Field(default_factory=list, max_length=MAX_OUTPUT_FILES)
    skipped: list[OutputSkip] = Field(default_factory=list, max_length=MAX_OUTPUT_SKIPPED_LISTED)
    skipped_total: int = Field(default=0, ge=0)  # all skipped entries, listed or not
    error: Annotated[str, StringConstraints(max_length=2000)] = ""  # collection failed as a whole (files is then [])


class OutputUpload(Lenient):
    file_id: int
    path: str
    method: Literal["chunks", "put"]
    url: str = ""  # "put": the presigned URL; "chunks": "" (use PATH_ATTEMPT_OUTPUT_FILE)
    headers: dict[str, str] = Field(default_factory=dict)  # "put": send exactly these
    offset: int = 0  # "chunks": bytes the server already holds (resume from here)


class OutputsPlan(Lenient):
    # One per accepted file that the server does not hold complete yet (a file already stored, e.g. by an earlier
    # manifest of the same attempt, or an empty one, is accepted and not listed: nothing to send).
    uploads: list[OutputUpload] = Field(default_factory=list)
    refused: list[OutputSkip] = Field(default_factory=list)  # not taken (e.g. the project's quota): not sent


class OutputFileReply(Lenient):
    offset: int  # bytes the server now holds
    complete: bool = False  # all bytes received and the sha256 verified
