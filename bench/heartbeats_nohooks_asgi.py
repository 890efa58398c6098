"""The Euler ASGI app without the other apps' heartbeat hooks: `bench/heartbeats.py --no-hooks` measures
the nodes app's own heartbeat path with it."""

from config.asgi import application as _application
from nodes import channel

channel._heartbeat_hooks.clear()
application = _application
