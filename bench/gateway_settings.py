"""Settings for bench/gateway.py: Euler's own, plus an async no-op view to compare the gateway with."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.gateway_urls"
