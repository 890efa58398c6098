"""The kombu 5.7.0 guard: a channel whose transport lost its client fails with a connection error (which kombu's
close ignores), not an AttributeError that stops the worker (euler/kombu_guard.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import redis
from kombu.transport import redis as kombu_redis

from euler import kombu_guard


def test_a_closed_transports_channel_raises_a_connection_error_that_kombu_ignores():
    kombu_guard.install()
    kombu_guard.install()  # twice: still one wrapper
    channel = kombu_redis.Channel.__new__(kombu_redis.Channel)  # no connection is ever made
    channel.connection = SimpleNamespace(client=None)  # what connection.collect() leaves behind
    with pytest.raises(redis.exceptions.ConnectionError):
        channel._connparams()
    assert any(issubclass(redis.exceptions.ConnectionError, e) for e in kombu_redis.Transport.connection_errors)
