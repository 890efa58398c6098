"""`manage.py backup` and `manage.py restore`: jobs with env, agents with auth headers and API keys survive the round
trip into a fresh database (PostgreSQL and SQLite), and a restore refuses, touching nothing, without the right keys
or into a database that is not empty."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from django.core.management import call_command

from euler.backup import FORMAT, Manifest, key_checks, refusal
from euler.crypto import KeyRing
from tests.e2e.harness import REPO

ENV = {"API_TOKEN": "s3cret-env-value"}
HEADER = "Bearer s3cret-agent-header"
OTHER_KEYS = "other:" + base64.b64encode(b"o" * 32).decode()


def seed() -> dict:
    """Rows with secrets, written through the models (run here and in a subprocess on SQLite)."""
    from agents.models import Agent
    from jobs.models import Job
    from quotas.services import apikey_create, project_create

    project = project_create(name="backup")
    _, secret = apikey_create(project=project, label="kept")
    job = Job.objects.create(
        project=project, name="with-env", image="alpine:3.20", command=["true"], env=ENV, has_env=True,
        cpu_milli=100, memory_bytes=1 << 20, timeout_seconds=60, queued_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    agent = Agent.objects.create(project=project, name="a", auth_header_name="Authorization", auth_header_value=HEADER)
    return {"job": job.id, "agent": agent.id, "api_key": secret}


# In a process of its own on the fresh database: a restore without the right keys is refused (touching nothing),
# the restore with them succeeds, the platform reads the secrets back, and a second restore is refused.
CHECK = """
import json, os, django
django.setup()
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from agents.models import Agent
from jobs.models import Job
from quotas.services import apikey_authenticate

def restore():
    try:
        call_command("restore", os.environ["BACKUP"])
        return "restored"
    except CommandError as exc:
        return str(exc)

right, settings.EULER_ENCRYPTION_KEYS = settings.EULER_ENCRYPTION_KEYS, os.environ["OTHER_KEYS"]
without_keys = restore()
settings.EULER_ENCRYPTION_KEYS = right
first = restore()
seeded = json.loads(os.environ["SEEDED"])
key = apikey_authenticate(raw=seeded["api_key"])
print(json.dumps({"without_keys": without_keys, "first": first, "again": restore(),
                  "env": Job.objects.get(id=seeded["job"]).env,
                  "header": Agent.objects.get(id=seeded["agent"]).auth_header_value,
                  "key_project": key and key.project.name}))
"""


def run(code: str, env: dict, database_url: str, **extra) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "DJANGO_SETTINGS", "DATABASE_URL"))}
    full.update(
        env, DJANGO_SETTINGS_MODULE="config.settings", DATABASE_URL=database_url, OTHER_KEYS=OTHER_KEYS, **extra
    )
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=full, capture_output=True, text=True, timeout=240)


def process_env(settings, tmp_path) -> dict:
    return {"DJANGO_SECRET_KEY": settings.SECRET_KEY, "EULER_ENCRYPTION_KEYS": settings.EULER_ENCRYPTION_KEYS,
            "EULER_DATA_DIR": str(tmp_path / "data"), "DJANGO_DEBUG": "true"}  # fmt: skip


def assert_restored(out: subprocess.CompletedProcess, key_id: str) -> None:
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert (
        got["without_keys"].startswith("restore refused: EULER_ENCRYPTION_KEYS lacks") and key_id in got["without_keys"]
    )
    assert got["first"] == "restored"
    assert got["env"] == ENV and got["header"] == HEADER and got["key_project"] == "backup"
    assert "restore refused: the target database is not empty" in got["again"]


def assert_manifest_holds_no_key(backup_dir: Path, settings) -> Manifest:
    manifest = Manifest.read(backup_dir)
    text = (backup_dir / "manifest.json").read_text()
    for _, key in KeyRing.parse(settings.EULER_ENCRYPTION_KEYS).keys:
        assert base64.b64encode(key).decode() not in text
    assert manifest.encryption_key_ids == [KeyRing.parse(settings.EULER_ENCRYPTION_KEYS).primary_id]
    assert manifest.migrations["jobs"] and manifest.created_at
    return manifest


@pytest.mark.django_db(transaction=True)
def test_a_postgresql_backup_restores_into_a_fresh_database_with_its_secrets_readable(settings, tmp_path):
    import psycopg
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("DATABASE_URL is not PostgreSQL (the SQLite round trip runs on its own)")
    seeded = seed()
    call_command("backup", str(tmp_path / "b"))
    assert_manifest_holds_no_key(tmp_path / "b", settings)

    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory", "context")}
    fresh = f"{connection.settings_dict['NAME']}_restored"
    admin = psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True)
    admin.execute(f'DROP DATABASE IF EXISTS "{fresh}"')
    admin.execute(f'CREATE DATABASE "{fresh}"')
    s = connection.settings_dict
    url = (
        f"postgres://{s['USER']}{':' + s['PASSWORD'] if s['PASSWORD'] else ''}@{s['HOST']}:{s['PORT'] or 5432}/{fresh}"
    )
    try:
        out = run(CHECK, process_env(settings, tmp_path), url, BACKUP=str(tmp_path / "b"), SEEDED=json.dumps(seeded))
        assert_restored(out, KeyRing.parse(settings.EULER_ENCRYPTION_KEYS).primary_id)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{fresh}" WITH (FORCE)')
        admin.close()


def test_a_sqlite_backup_restores_into_a_fresh_database_with_its_secrets_readable(settings, tmp_path):
    env = process_env(settings, tmp_path)
    fast = Path(tempfile.mkdtemp(dir="/dev/shm")) if Path("/dev/shm").is_dir() else tmp_path  # no fsync per migration
    source, target, backup_dir = fast / "source.sqlite3", fast / "fresh.sqlite3", tmp_path / "b"
    try:
        made = run(
            "import json, os, django; django.setup(); from django.core.management import call_command; "
            "call_command('migrate', verbosity=0); from tests.euler.test_backup import seed; s = seed(); "
            "call_command('backup', os.environ['BACKUP']); print(json.dumps(s))",
            env, f"sqlite:///{source}", BACKUP=str(backup_dir),
        )  # fmt: skip
        assert made.returncode == 0, made.stderr[-3000:]
        seeded = made.stdout.strip().splitlines()[-1]
        assert_manifest_holds_no_key(backup_dir, settings)
        out = run(CHECK, env, f"sqlite:///{target}", BACKUP=str(backup_dir), SEEDED=seeded)
        assert_restored(out, KeyRing.parse(settings.EULER_ENCRYPTION_KEYS).primary_id)
        # `migrate` left both files in write-ahead-log mode (euler/apps.py); the backup API reads and writes them.
        for path in (source, target):
            with contextlib.closing(sqlite3.connect(path)) as db:
                assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        if fast != tmp_path:
            shutil.rmtree(fast, ignore_errors=True)


# --- the decision, without a database ------------------------------------------------------------------------------
RING = KeyRing.parse("k2:" + base64.b64encode(b"2" * 32).decode() + ",k1:" + base64.b64encode(b"1" * 32).decode())


def manifest(**over) -> Manifest:
    fields = dict(format=FORMAT, created_at="2026-01-01T00:00:00+00:00", engine="postgresql", dump="database.pgdump",
                  sha256="0" * 64, migrations={"jobs": ["0001_initial"]}, encryption_key_ids=["k1"],
                  key_checks=key_checks(RING, {"k1"}))  # fmt: skip
    return Manifest(**{**fields, **over})


def decide(m: Manifest, *, ring=RING, engine="postgresql", tables=(), known=None):
    return refusal(manifest=m, ring=ring, engine=engine, tables=list(tables), known=known or {"jobs": {"0001_initial"}})


def test_a_restore_goes_ahead_into_an_empty_database_with_the_keys_the_backup_names():
    assert decide(manifest()) is None
    assert decide(manifest(encryption_key_ids=[], key_checks={})) is None  # nothing encrypted: no key needed


def test_a_restore_is_refused_without_a_key_the_backup_needs_or_with_another_key_under_its_id():
    only_k2 = KeyRing.parse("k2:" + base64.b64encode(b"2" * 32).decode())
    assert "lacks the key(s) this backup needs: k1" in decide(manifest(), ring=only_k2)
    impostor = KeyRing.parse("k1:" + base64.b64encode(b"x" * 32).decode())
    assert "k1 (a different key under that id)" in decide(manifest(), ring=impostor)


def test_a_restore_is_refused_into_a_database_that_is_not_empty_or_of_another_engine_or_from_a_newer_schema():
    assert "not empty (2 tables" in decide(manifest(), tables=["jobs_job", "django_migrations"])
    assert "is a postgresql dump; DATABASE_URL names a sqlite" in decide(manifest(), engine="sqlite")
    newer = manifest(migrations={"jobs": ["0001_initial", "0099_future"]})
    assert "newer Euler" in decide(newer) and "jobs.0099_future" in decide(newer)
    assert "format 9" in decide(manifest(format=9))


def test_backup_wants_a_new_directory_and_restore_a_backup_directory(tmp_path):
    from django.core.management.base import CommandError

    (tmp_path / "old").write_text("")
    with pytest.raises(CommandError, match="not empty: give a new directory"):
        call_command("backup", str(tmp_path))
    with pytest.raises(CommandError, match="holds no manifest.json"):
        call_command("restore", str(tmp_path))
