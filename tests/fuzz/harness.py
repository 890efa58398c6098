"""Schemathesis over /api/schema/, in process: every operation, a bounded number of generated cases each."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import hypothesis
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

SCHEMA_PATH = "/api/schema/?format=json"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# The gateway relays whatever the upstream answers: its bytes are not described by our schema.
NOT_DRF = r"/invoke"


def examples_per_operation() -> int:
    return int(os.environ.get("EULER_FUZZ_EXAMPLES", "4"))


def seed_from_env() -> int | None:
    """`make test` generates the same cases every run; bench/fuzz.py asks for random ones (or a replay seed)."""
    if "EULER_FUZZ_SEED" in os.environ:
        return int(os.environ["EULER_FUZZ_SEED"])
    if os.environ.get("EULER_FUZZ_RANDOM"):
        import random

        seed = random.randrange(2**32)
        print(f"fuzz seed: {seed}")
        return seed
    return None


@dataclass
class Outcome:
    operations: int = 0
    cases: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


@contextlib.contextmanager
def in_test_transaction():
    """Like Django's test client: a request must not close the connection that holds the test's transaction."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def fuzz(new_key: Callable[[], str], *, examples: int, seed: int | None = None) -> Outcome:
    """Run every operation of the schema; collect failures instead of stopping at the first.

    `new_key` mints a project API key: the fuzzer may well revoke its own (DELETE /api-keys/{id}),
    and then gets a fresh one rather than fuzzing the rest behind 401s."""
    app = get_wsgi_application()
    headers = {"X-Euler-API-Key": new_key()}
    outcome = Outcome()
    with in_test_transaction():
        schema = schemathesis.openapi.from_wsgi(SCHEMA_PATH, app, headers=headers)
        schema = schema.exclude(path_regex=NOT_DRF)
        for result in schema.get_all_operations():
            operation = result.ok()
            outcome.operations += 1
            _fuzz_operation(operation, app, headers, examples, seed, outcome, new_key)
    return outcome


def _fuzz_operation(operation, app, headers, examples, seed, outcome: Outcome, new_key) -> None:
    strategy = operation.as_strategy()

    @hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=seed is None,
        suppress_health_check=list(HealthCheck),
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
    )
    @hypothesis.given(case=strategy)
    def run(case):
        outcome.cases += 1
        try:
            response = case.call(app=app, headers=headers)
        except Exception as exc:  # noqa: BLE001 - an exception escaping the app is a 500 for the caller
            outcome.statuses[500] = outcome.statuses.get(500, 0) + 1
            outcome.failures.append(f"{operation.label}: raised {exc!r}")
            return
        if response.status_code == 401:
            headers["X-Euler-API-Key"] = new_key()
            response = case.call(app=app, headers=headers)
        outcome.statuses[response.status_code] = outcome.statuses.get(response.status_code, 0) + 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (AssertionError, FailureGroup) as exc:
            outcome.failures.append(f"{operation.label} -> {response.status_code}: {_summary(exc)}")

    if seed is not None:
        run = hypothesis.seed(seed)(run)
    run()


def _summary(exc: BaseException) -> str:
    """One line per failed check: schemathesis groups them, each with a long explanation."""
    inner = getattr(exc, "exceptions", None) or [exc]
    lines = []
    for failure in inner:
        text = str(failure).strip().splitlines()
        lines.append(" | ".join(line for line in text[:3] if line.strip())[:300])
    return "; ".join(lines)
