"""Websocket routes; each app lists its own in <app>/routing.py (`websocket_urlpatterns`)."""

from importlib import import_module

websocket_urlpatterns: list = []
for _app in ("jobs", "gateway"):
    try:
        websocket_urlpatterns += import_module(f"{_app}.routing").websocket_urlpatterns
    except ModuleNotFoundError as exc:
        if exc.name != f"{_app}.routing":
            raise
