"""Websocket routes; apps append theirs here."""

websocket_urlpatterns: list = []
