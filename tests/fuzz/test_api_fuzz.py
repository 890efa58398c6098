"""Every operation of /api/schema/, fuzzed with a project API key: no 5xx, answers match the schema."""

import pytest

from tests.fuzz.harness import examples_per_operation, fuzz, seed_from_env

pytestmark = pytest.mark.django_db


def test_no_operation_answers_5xx_or_strays_from_the_schema(project):
    from quotas.services import apikey_create

    outcome = fuzz(
        lambda: apikey_create(project=project, label="fuzz")[1], examples=examples_per_operation(), seed=seed_from_env()
    )
    print(f"fuzz: {outcome.operations} operations, {outcome.cases} cases, statuses {sorted(outcome.statuses.items())}")
    assert outcome.operations >= 20
    assert outcome.statuses.get(401, 0) == 0, "the fuzzer lost its API key"
    assert outcome.server_errors == 0, "\n".join(outcome.failures)
    assert outcome.failures == [], "\n\n".join(outcome.failures)
