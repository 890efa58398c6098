"""Settings of the lending app (merged into the settings): its periodic tasks."""

from datetime import timedelta

from euler.env import env_float

# How often the window pass looks for attempts on nodes whose lender's availability window closes (lending/windows.py).
# A running attempt is asked to stop this long plus its stop grace before the close, so that it is off the machine
# by the window's end; a job with a checkpoint starts on a node only if its window closes later than that.
EULER_WINDOW_CHECK_INTERVAL = env_float("EULER_WINDOW_CHECK_INTERVAL", 10.0, minimum=0.5)

# Reliability scores are recomputed every five minutes from the ledger and the nodes' events (lending/reliability.py).
BEAT_SCHEDULE: dict = {
    "lending-refresh-reliability": {"task": "lending.tasks.refresh_reliability", "schedule": 300.0},
    "lending-stop-at-window-end": {
        "task": "lending.tasks.stop_at_window_end",
        "schedule": timedelta(seconds=EULER_WINDOW_CHECK_INTERVAL),
    },
}
