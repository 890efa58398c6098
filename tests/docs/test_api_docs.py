"""docs/api.md lists every public endpoint, each with a curl example."""

import re
from pathlib import Path

from django.urls import URLPattern, URLResolver, get_resolver

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
PREFIXES = ("api/v1/", "node-api/v1/")


def _walk(patterns, prefix=""):
    for p in patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, route)
        elif isinstance(p, URLPattern):
            yield route


def _documented_regex(route: str) -> re.Pattern:
    route = route.lstrip("^").rstrip("$")
    parts = re.split(r"<[^>]+>", route)
    body = r"\{[^}]+\}".join(re.escape(part) for part in parts)
    return re.compile("/" + body.rstrip("/") + r"(?![\w-])")


def test_every_api_route_is_in_docs_api_md():
    text = DOCS.read_text()
    routes = sorted({r for r in _walk(get_resolver().url_patterns) if r.startswith(PREFIXES)})
    assert routes, "no API routes found"
    missing = [r for r in routes if not _documented_regex(r).search(text)]
    assert not missing, f"not documented in docs/api.md: {missing}"


def test_docs_have_a_curl_example_per_endpoint_section():
    text = DOCS.read_text()
    sections = re.split(r"\n(?=#{3,4} `?(?:GET|POST|PATCH|DELETE|ANY|PUT))", text)
    lacking = [s.splitlines()[0] for s in sections[1:] if "curl" not in s and "websocat" not in s]
    assert not lacking, f"endpoint sections without a curl example: {lacking}"
