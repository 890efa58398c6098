"""Shared fixtures: real Redis (embedded when REDIS_URL is unset), projects, users, API-key clients."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from django.conf import settings
from rest_framework.test import APIClient

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


# Fixtures that hold something of the whole machine rather than of the test process: every test that uses one runs
# in the named xdist_group, which `--dist loadgroup` (make test) puts on a single worker, one test after another.
MACHINE_WIDE_FIXTURES = {
    "fake_net": "host-network",  # tests/nodeagent/test_egress*.py: fixed addresses, routes and port 18080 on the host
}
# Expensive module- or session-scoped fixtures that the module's tests only read (a platform with a node, Chromium, an
# OIDC provider, an S3 server): the module's tests share one worker, so that it is set up once, not once per worker.
SHARED_PER_MODULE = {"site", "euler", "browser", "provider", "s3_server"}


# The folders whose tests each take tens of seconds (platforms of subprocesses, Chromium, the schema fuzzer) go first,
# so that the workers end together on short tests rather than one of them on a long tail. The database needs no
# order: no migration seeds rows that a transactional test's flush would take away.
SLOW_FIRST = ("tests/e2e/", "tests/browser/", "tests/fuzz/")


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config, items):
    # Before every implementation, pytest-xdist's reading of the xdist_group marks among them: mark.
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for fixture, group in MACHINE_WIDE_FIXTURES.items():
            if fixture in names:
                item.add_marker(pytest.mark.xdist_group(group))
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        if any(defs.get(name) and defs[name][-1].scope in ("module", "session") for name in SHARED_PER_MODULE & names):
            item.add_marker(pytest.mark.xdist_group(f"module-{item.module.__name__}"))
    yield
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
        if lost:
            # pytest-xdist groups a test by the `@group` it appends to the nodeid; a pytest that ignores that (9.x
            # with xdist 3.8) runs a group's tests on every worker at once: machine-wide fixtures collide.
            raise pytest.UsageError(
                f"pytest-xdist's loadgroup did not name the group of {lost[0]} (and {len(lost) - 1} more): this "
                "pytest and pytest-xdist do not fit together; install requirements-dev.txt's pins"
            )
    # After them (pytest-django's order, kept within each part): the slow folders first. Every worker sorts alike.
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))


@pytest.fixture(scope="session", autouse=True)
def _redis_up():
    proc = None
    if settings.EULER_REDIS_EMBEDDED:
        from euler import embedded_redis

        proc = embedded_redis.start(settings.EULER_EMBEDDED_REDIS_SOCKET)
    yield
    if proc is not None:
        from euler import embedded_redis

        embedded_redis.stop(proc)


@pytest.fixture(scope="session", autouse=True)
def _drop_stray_connections_at_teardown(django_db_setup, django_db_blocker):
    """Async code leaves connections open in executor threads; PostgreSQL then refuses to drop
    the test database. Close them before pytest-django's teardown."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def _fresh_node_liveness():
    """Node liveness lives in Redis and in each process's cache: every test starts without either."""
    from nodes import cadence, livestore, quickbeat, webload

    quickbeat.reset()  # the cached rows and what this process learnt of each node's heartbeats
    webload.reset()
    cadence.reset()
    livestore.reset()
    yield


def docker_available() -> str | None:
    """None when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        out = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed: {exc}"
    if out.returncode != 0:
        return "no Docker engine answers (start dockerd)"
    return None


@pytest.fixture(scope="session")
def docker_engine():
    why = docker_available()
    if why:
        if IN_CI:
            pytest.fail(f"CI=true but Docker is unavailable: {why}")
        pytest.skip(f"needs a Docker engine: {why}")
    return True


@pytest.fixture
def make_user(django_user_model):
    def make(username: str, *, staff: bool = False, password: str = "pw-for-tests"):
        return django_user_model.objects.create_user(
            username=username, password=password, is_staff=staff, is_superuser=staff
        )

    return make


@pytest.fixture
def owner(make_user):
    return make_user("olivia")


@pytest.fixture
def project(owner):
    from quotas.services import project_create

    return project_create(name="alpha", owner=owner)


@pytest.fixture
def other_project(make_user):
    from quotas.services import project_create

    return project_create(name="beta", owner=make_user("bob"))


@pytest.fixture
def api_key(project):
    from quotas.services import apikey_create

    _, secret = apikey_create(project=project, label="tests")
    return secret


@pytest.fixture
def other_api_key(other_project):
    from quotas.services import apikey_create

    _, secret = apikey_create(project=other_project, label="other")
    return secret


@pytest.fixture
def client_for():
    def make(secret: str | None) -> APIClient:
        c = APIClient()
        if secret:
            c.credentials(HTTP_X_EULER_API_KEY=secret)
        return c

    return make


@pytest.fixture
def api(client_for, api_key) -> APIClient:
    """A client authenticated with the `alpha` project's API key."""
    return client_for(api_key)


@pytest.fixture
def other_api(client_for, other_api_key) -> APIClient:
    """A client authenticated with the `beta` project's API key."""
    return client_for(other_api_key)


@pytest.fixture
def anon(client_for) -> APIClient:
    return client_for(None)
