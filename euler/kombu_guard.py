"""A guard around a kombu 5.7.0 bug that can stop a Celery worker for good when Redis dies (BENCHMARKS.md, "Chaos
across the new features", finding 2).

With unacknowledged (prefetched) messages at the moment Redis goes away, celery's
`Consumer.on_connection_error_after_connected` calls `connection.collect()`, which closes the default channel and
drops the transport's client (`transport.client = None`), then `connection.close()`, which closes the channel
again: `redis.Channel.close` → `restore_unacked` → a new pool → `Channel._connparams` reads
`self.connection.client.hostname` on None. The AttributeError is not a connection error, so `ignore_errors` lets it
through and the worker exits ("Unrecoverable error"). Here a channel whose transport has no client raises Redis's
ConnectionError instead, which kombu ignores while closing and retries while connecting: the worker reconnects when
Redis is back, and the unacknowledged messages come back by the visibility timeout as always.
"""

from __future__ import annotations

GUARD = "_euler_guarded"


def install() -> None:
    import redis
    from kombu.transport import redis as kombu_redis

    original = kombu_redis.Channel._connparams
    if getattr(original, GUARD, False):
        return

    def _connparams(self, asynchronous=False):
        if getattr(self.connection, "client", None) is None:
            raise redis.exceptions.ConnectionError("the Redis transport is closed")
        return original(self, asynchronous)

    setattr(_connparams, GUARD, True)
    kombu_redis.Channel._connparams = _connparams
