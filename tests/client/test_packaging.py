"""`pip install ./client` ships every subpackage of euler_client (a missed one breaks the installed command) and
the `euler` command as a plain script that imports only what it needs."""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tomllib
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client"


def test_every_subpackage_is_included_and_the_client_imports_no_server_code():
    config = tomllib.loads((CLIENT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {".".join(p.parent.relative_to(CLIENT).parts) for p in CLIENT.glob("euler_client/**/__init__.py")}
    assert "euler_client.cli" in packages
    assert all(any(fnmatch.fnmatch(name, pattern) for pattern in include) for name in packages)
    for path in CLIENT.glob("euler_client/**/*.py"):
        text = path.read_text()
        assert "import django" not in text and "from django" not in text, path
    assert config["project"]["dynamic"] == ["scripts"]  # client/setup.py


def test_the_installed_command_imports_neither_re_nor_json():
    """.venv/bin/euler (make's editable install, what the e2e tests and bench/cli.py run): pip wrote the script with
    its interpreter, and neither it nor `euler run`'s modules pay for `re` (pip's console-script wrapper imports it)
    or `json` (euler_client/jsoncodec.py)."""
    euler = Path(sys.executable).parent / "euler"
    assert euler.read_text().startswith(f"#!{sys.executable}")
    # No proxy: with one set, the command goes through httpx (euler_client.client.proxied), which imports both.
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    done = subprocess.run(
        [str(euler), "run", "--network", "none", "alpine:3.20", "--", "true"], capture_output=True, text=True,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1", "EULER_URL": "http://127.0.0.1:9", "EULER_API_KEY": "k"},
    )  # fmt: skip
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    assert "euler_client.wire" in imported and "euler: error: cannot reach" in done.stderr  # it got to its POST
    assert not {"re", "json", "enum"} & imported
