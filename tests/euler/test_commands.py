import io

import pytest
from django.core.management import CommandError, call_command

from euler.tokens import digest
from quotas.models import ApiKey, Project

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip().splitlines()[-1]


def test_createproject_creates_a_project_with_free_quota_and_owner(owner):
    slug = _run("createproject", "Lab One", "--owner", owner.username)
    project = Project.objects.get(slug=slug)
    assert project.name == "Lab One"
    assert project.quota.max_api_keys == 20
    assert project.memberships.get().user == owner


def test_createproject_refuses_a_taken_name(project):
    with pytest.raises(CommandError, match="already exists"):
        _run("createproject", "alpha")


def test_createapikey_prints_the_secret_alone_as_the_last_line(project):
    secret = _run("createapikey", "--project", "alpha", "--label", "ops")
    assert secret.startswith("euler_pk_")
    key = ApiKey.objects.get(label="ops")
    assert key.key_hash == digest(secret)


def test_createapikey_refuses_an_unknown_project():
    with pytest.raises(CommandError, match="no project"):
        _run("createapikey", "--project", "nope")
