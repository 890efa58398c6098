"""Every operation of /api/schema/, fuzzed with a project API key: no 5xx, answers match the schema."""

import pytest

from tests.fuzz.harness import examples_per_operation, fuzz

pytestmark = pytest.mark.django_db


def test_no_operation_answers_5xx_or_strays_from_the_schema(api_key, project):
    outcome = fuzz(api_key, examples=examples_per_operation())
    print(f"fuzz: {outcome.operations} operations, {outcome.cases} cases, statuses {sorted(outcome.statuses.items())}")
    assert outcome.operations >= 20
    assert outcome.server_errors == 0, "\n".join(outcome.failures)
    assert outcome.failures == [], "\n\n".join(outcome.failures)
