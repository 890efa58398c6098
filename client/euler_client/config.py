"""Where the CLI finds its server and key: EULER_URL / EULER_API_KEY, else a profile of
`$XDG_CONFIG_HOME/euler/config.toml` (default `~/.config/euler/config.toml`), a file only its owner can read."""

from __future__ import annotations

import os
from collections import namedtuple

from euler_client.errors import ConfigError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from pathlib import Path

DEFAULT_PROFILE = "default"


def config_path(environ: dict | None = None) -> Path:
    from pathlib import Path  # only when the profile file is needed (pathlib costs ~5 ms at start-up)

    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".config")
    return Path(base) / "euler" / "config.toml"


# url, api_key, profile (str each). A namedtuple, not a dataclass (`dataclasses` imports `inspect`).
Settings = namedtuple("Settings", "url api_key profile")


def _load_toml(text: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def read_profiles(path: Path) -> dict[str, dict]:
    """{profile: {"url": ..., "api_key": ...}}; {} when there is no file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", code="config_unreadable") from None
    try:
        data = _load_toml(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", code="config_invalid") from None
    profiles = data.get("profiles", {})
    return {name: table for name, table in profiles.items() if isinstance(table, dict)}


def _toml_string(value: str) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def _toml_key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() and key.isascii() else _toml_string(key)


def write_profile(path: Path, profile: str, *, url: str, api_key: str) -> None:
    """Store one profile, keeping the others; the file is written 0600 (the directory 0700) and replaced
    atomically, so the key is never readable by others, not even for a moment."""
    profiles = read_profiles(path)
    profiles[profile] = {**profiles.get(profile, {}), "url": url, "api_key": api_key}
    lines = ["# Written by `euler login`. Holds API keys: keep it private (mode 0600).", ""]
    for name, table in profiles.items():
        lines.append(f"[profiles.{_toml_key(name)}]")
        for key, value in table.items():
            if isinstance(value, str):
                lines.append(f"{_toml_key(key)} = {_toml_string(value)}")
        lines.append("")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, "\n".join(lines).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def resolve(*, profile: str | None = None, url: str | None = None, api_key: str | None = None,
            environ: dict | None = None, need_key: bool = True) -> Settings:  # fmt: skip
    """Explicit values, then EULER_URL / EULER_API_KEY, then the profile (`--profile`, EULER_PROFILE, default)."""
    environ = os.environ if environ is None else environ
    name = profile or environ.get("EULER_PROFILE") or DEFAULT_PROFILE
    url = url or environ.get("EULER_URL")
    api_key = api_key or environ.get("EULER_API_KEY")
    if not url or not api_key:
        path = config_path(environ)
        stored = read_profiles(path).get(name, {})
        if not stored and (profile or environ.get("EULER_PROFILE")) and name != DEFAULT_PROFILE:
            raise ConfigError(f"no profile {name!r} in {path}; run 'euler login --profile {name}'", code="no_profile")
        url = url or stored.get("url")
        api_key = api_key or stored.get("api_key")
    if not url:
        raise ConfigError("no server configured: run 'euler login --url URL' or set EULER_URL", code="no_url")
    if need_key and not api_key:
        raise ConfigError("no API key configured: run 'euler login' or set EULER_API_KEY", code="no_api_key")
    return Settings(url=url.rstrip("/"), api_key=api_key or "", profile=name)
