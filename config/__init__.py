"""The top floor: settings, the ASGI/WSGI entry points, the URL roots and `make up`. It may import every app; no app
and nothing in euler/ imports it (docs/architecture.md, the `config-on-top` import contract)."""
