"""A scheduling pass is requested by the task's registered name: every process must know that name."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_process_that_never_imported_jobs_tasks_still_knows_the_schedule_task():
    # The web process imports no Celery task module by itself; before this, request_pass() there raised
    # NotRegistered, left the "requested" flag set for 30 s, and placements waited for beat's next pass.
    code = (
        "import django; django.setup()\n"
        "from celery import current_app\n"
        "from jobs.wakeups import SCHEDULE_TASK\n"
        "assert SCHEDULE_TASK in current_app.tasks, sorted(current_app.tasks)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
