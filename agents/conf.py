"""Settings of the agents app, read from the environment (merged into euler.settings)."""

from euler.env import env_bool, env_float, env_int, env_list, env_str  # noqa: F401

BEAT_SCHEDULE: dict = {}
