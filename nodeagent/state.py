"""The agent's state dir: the node credential (mode 0600) and what the node was enrolled as."""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path

CREDENTIAL_FILE = "credential"
NODE_FILE = "node.json"
INSTANCE_FILE = "instance"


def ensure_dir(state_dir: Path) -> None:
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(state_dir, 0o700)


def _write_private(path: Path, text: str) -> None:
    """Write atomically, readable by the owner only, never briefly world-readable."""
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def save_enrollment(state_dir: Path, *, credential: str, node_id: int, name: str, url: str) -> None:
    ensure_dir(state_dir)
    _write_private(state_dir / CREDENTIAL_FILE, credential + "\n")
    _write_private(state_dir / NODE_FILE, json.dumps({"node_id": node_id, "name": name, "url": url}) + "\n")


def load_credential(state_dir: Path) -> str | None:
    path = state_dir / CREDENTIAL_FILE
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return None
    if mode & 0o077:
        os.chmod(path, 0o600)  # someone loosened it: tighten rather than refuse to start
    return path.read_text().strip() or None


def load_node(state_dir: Path) -> dict:
    try:
        return json.loads((state_dir / NODE_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}


def forget(state_dir: Path) -> None:
    for name in (CREDENTIAL_FILE, NODE_FILE):
        try:
            (state_dir / name).unlink()
        except FileNotFoundError:
            pass


def owner_id(state_dir: Path) -> str:
    """This agent's identity on the Docker engine: `<node id>-<random id kept in the state dir>`.

    Unique to this node of this control plane, unlike the node name; the random part is made once.
    """
    ensure_dir(state_dir)
    path = state_dir / INSTANCE_FILE
    try:
        instance = path.read_text().strip()
    except FileNotFoundError:
        instance = ""
    if not re.fullmatch(r"[0-9a-f]{16}", instance):
        instance = secrets.token_hex(8)
        _write_private(path, instance + "\n")
    node_id = load_node(state_dir).get("node_id")
    return f"{node_id}-{instance}" if isinstance(node_id, int) else instance
