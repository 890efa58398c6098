"""The <id:...> path converter: object ids as the database can hold them (1 to 18 digits).

Django's <int:...> takes any number of digits; an id past 64 bits then reached the database and
failed there (500: SQLite OverflowError, PostgreSQL out of range). With <id:...> it is a plain 404.
"""

from __future__ import annotations

MAX_ID = 10**18 - 1


class IdConverter:
    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(int(value))


# drf-spectacular: how an <id:...> path parameter looks in /api/schema/.
OPENAPI = {"type": "integer", "format": "int64", "minimum": 0, "maximum": MAX_ID}
