"""`pip install ./client` ships every subpackage of euler_client (a missed one breaks the installed command)."""

from __future__ import annotations

import fnmatch
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
    assert config["project"]["scripts"]["euler"] == "euler_client.cli:main"
