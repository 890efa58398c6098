"""The `euler` command: a plain script on POSIX, whose start-up imports what the command needs and nothing else
(the console-script wrapper that pip generates imports `re` before it: bench/cli.py prints what `python -c "import
re"` costs beside `python -c pass`, 20 ms of CPU against 13 on the 2-core machine, BENCHMARKS.md); on Windows,
where a script needs pip's `.exe` launcher, the console-script entry point. Everything else is in pyproject.toml."""

import os

from setuptools import setup

if os.name == "nt":
    setup(entry_points={"console_scripts": ["euler = euler_client.cli:main"]})
else:
    setup(scripts=["scripts/euler"], entry_points={"console_scripts": []})  # older setuptools want it set
