"""A project's fair-share weight, set by setquota (the API shows it: tests/jobs/test_fair_cycle.py)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from quotas.models import Project

pytestmark = pytest.mark.django_db


def test_setquota_sets_the_weight(project):
    out = io.StringIO()
    call_command("setquota", "alpha", "--weight", "2.5", stdout=out)
    assert Project.objects.get(pk=project.pk).weight == 2.5
    assert "weight=2.5" in out.getvalue()


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "1001"])
def test_setquota_refuses_a_weight_out_of_range(project, bad):
    with pytest.raises(CommandError, match="weight"):
        call_command("setquota", "alpha", "--weight", bad, stdout=io.StringIO())
    assert Project.objects.get(pk=project.pk).weight == 1.0
