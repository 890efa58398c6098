"""The agent's configuration, read from the environment (pure: pass a mapping) with clear errors."""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from nodeagent import protocol
from nodeagent.client import InsecureURL, check_url
from nodeagent.offer import (
    Caps,
    ImagePolicy,
    NetworkPolicy,
    OfferError,
    load_caps,
    load_image_policy,
    load_network_policy,
)
from nodeagent.runtimes import RuntimeConfigError, RuntimePolicy, load_policy

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """A setting is missing or wrong; the message names the variable."""


@dataclass(frozen=True)
class AgentConfig:
    url: str
    name: str
    state_dir: Path
    enrollment_token: str | None = None
    region: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    allow_insecure: bool = False
    ca_file: Path | None = None  # the only CA trusted for the control plane's certificate (EULER_CA_FILE)
    caps: Caps = field(default_factory=Caps)  # the lender's caps on what this node offers
    network: NetworkPolicy = field(default_factory=NetworkPolicy)  # the jobs' egress policy
    images: ImagePolicy = field(default_factory=ImagePolicy)  # which images run here, and the cache cap
    runtimes: RuntimePolicy = field(default_factory=RuntimePolicy)  # which runtimes are offered, the least isolation
    tunnel: bool = True  # keep the node tunnel (nodeagent/tunnel.py) open: how the gateway reaches replicas here
    terms: dict | None = None  # the lender's terms (EULER_NODE_TERMS), sent once approved, at each start


def _bool(env: Mapping[str, str], name: str) -> bool:
    value = (env.get(name) or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def default_name(hostname: str | None = None) -> str:
    """The host name made into a valid node name (letters, digits, '.', '_', '-'; at most 63)."""
    raw = (hostname or socket.gethostname() or "node").split(".")[0]
    name = re.sub(r"[^A-Za-z0-9._-]", "-", raw).lstrip("._-")[:63]
    return name or "node"


def default_state_dir() -> Path:
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/euler-node")
    return Path.home() / ".euler-node"


def parse_labels(text: str) -> dict[str, str]:
    """`k=v,k=v` into a dict, validated like the server does."""
    labels: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"EULER_NODE_LABELS: {item!r} is not k=v")
        labels[key.strip()] = value.strip()
    try:
        TypeAdapter(dict[protocol.LabelKey, protocol.LabelValue]).validate_python(labels)
    except ValidationError as exc:
        raise ConfigError(f"EULER_NODE_LABELS: {exc.errors()[0]['msg']} ({text!r})") from None
    return labels


def load_ca_file(env: Mapping[str, str]) -> Path | None:
    """EULER_CA_FILE: a PEM file of the CA that signed the control plane's certificate, checked here so that a
    wrong path stops the agent at start-up rather than at its first request."""
    raw = (env.get("EULER_CA_FILE") or "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    try:
        ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"EULER_CA_FILE: cannot load a PEM CA certificate from {raw!r} ({exc})") from None
    return path


MAX_TERMS_BYTES = 64 * 1024


def load_terms(env: Mapping[str, str]) -> dict | None:
    """EULER_NODE_TERMS: the lender's terms as JSON (the body of `PUT /api/v1/lending/{name}/terms`), or `@PATH` of
    a file holding it; unset: the agent sends none (the console's and the API's stand). The server checks them."""
    raw = (env.get("EULER_NODE_TERMS") or "").strip()
    if not raw:
        return None
    where = "EULER_NODE_TERMS"
    if raw.startswith("@"):
        where = f"EULER_NODE_TERMS ({raw[1:]})"
        try:
            raw = Path(raw[1:]).expanduser().read_text(encoding="utf-8")[: MAX_TERMS_BYTES + 1]
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{where}: cannot read the file ({exc})") from None
    if len(raw) > MAX_TERMS_BYTES:
        raise ConfigError(f"{where}: at most {MAX_TERMS_BYTES} bytes")
    try:
        terms = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{where}: not JSON ({exc})") from None
    if not isinstance(terms, dict):
        raise ConfigError(f'{where}: a JSON object, e.g. {{"timezone": "UTC", "windows": [...], "max_gpus": 1}}')
    return terms


def load(env: Mapping[str, str] | None = None) -> AgentConfig:
    env = os.environ if env is None else env
    url = (env.get("EULER_CONTROL_PLANE_URL") or "").strip()
    if not url:
        raise ConfigError("EULER_CONTROL_PLANE_URL is required (e.g. https://euler.example.com)")
    allow_insecure = _bool(env, "EULER_ALLOW_INSECURE_HTTP")
    try:
        url = check_url(url, allow_insecure=allow_insecure)
    except InsecureURL as exc:
        raise ConfigError(str(exc)) from None
    ca_file = load_ca_file(env)
    name = (env.get("EULER_NODE_NAME") or "").strip() or default_name()
    try:
        TypeAdapter(protocol.Name).validate_python(name)
    except ValidationError:
        raise ConfigError(
            f"EULER_NODE_NAME: 1-63 letters, digits, '.', '_', '-' starting with a letter or digit; got {name!r}"
        ) from None
    region = (env.get("EULER_NODE_REGION") or "").strip()
    if not re.fullmatch(r"[A-Za-z0-9._-]{0,63}", region):
        raise ConfigError(f"EULER_NODE_REGION: at most 63 letters, digits, '.', '_', '-'; got {region!r}")
    state_dir = Path(env.get("EULER_NODE_STATE_DIR") or default_state_dir()).expanduser()
    try:
        caps, network, images = load_caps(env), load_network_policy(env), load_image_policy(env)
        runtimes = load_policy(env)
    except (OfferError, RuntimeConfigError) as exc:
        raise ConfigError(str(exc)) from None
    return AgentConfig(
        url=url,
        name=name,
        state_dir=state_dir,
        enrollment_token=(env.get("EULER_ENROLLMENT_TOKEN") or "").strip() or None,
        region=region,
        labels=parse_labels(env.get("EULER_NODE_LABELS", "")),
        allow_insecure=allow_insecure,
        ca_file=ca_file,
        caps=caps,
        network=network,
        images=images,
        runtimes=runtimes,
        tunnel=_bool(env, "EULER_NODE_TUNNEL") if (env.get("EULER_NODE_TUNNEL") or "").strip() else True,
        terms=load_terms(env),
    )
