"""Backup and restore: a consistent database dump beside a manifest (schema version, time, encryption key ids).

The manifest names the encryption keys the dump's ciphertexts need, by id, and holds one check value per key
(a known text sealed with that key) so that a restore can tell a right key from a wrong one with the same id.
It never holds a key. PostgreSQL is dumped with `pg_dump` inside an exported snapshot, the same snapshot the
manifest is read from; SQLite through its online backup API, the manifest read from the copy.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.db import connection

from euler.crypto import MAGIC, DecryptionError, KeyRing, encrypted_fields, keyring

FORMAT = 1
MANIFEST = "manifest.json"
DUMPS = {"postgresql": "database.pgdump", "sqlite": "database.sqlite3"}
KEY_CHECK_TEXT = b"euler backup key check"
KEY_CHECK_AAD = b"euler.backup.key_check"


class BackupError(Exception):
    """A backup or restore that cannot go ahead; the message says why and what to do."""


@dataclass(frozen=True)
class Manifest:
    format: int
    created_at: str
    engine: str
    dump: str
    sha256: str
    migrations: dict[str, list[str]]  # the schema version: applied migrations per app
    encryption_key_ids: list[str]  # the keys the dump's ciphertexts were sealed with
    key_checks: dict[str, str] = field(default_factory=dict)  # key id -> KEY_CHECK_TEXT sealed with that key

    def write(self, directory: Path) -> None:
        (directory / MANIFEST).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, directory: Path) -> Manifest:
        try:
            data = json.loads((directory / MANIFEST).read_text())
            return cls(**data)
        except FileNotFoundError:
            raise BackupError(f"{directory} holds no {MANIFEST}: not a backup made by `manage.py backup`") from None
        except (ValueError, TypeError) as exc:
            raise BackupError(f"{directory / MANIFEST} is not a valid manifest ({exc})") from None


# --- pure decisions -------------------------------------------------------------------------------------------
def key_id_of(token: str) -> str | None:
    parts = token.split(":", 2)
    return parts[1] if len(parts) == 3 and parts[0] == MAGIC else None


def key_checks(ring: KeyRing, key_ids) -> dict[str, str]:
    """A check value for each of `key_ids` that the ring holds (one it lacks cannot be checked, nor decrypted)."""
    checks = {}
    for key_id, key in ring.keys:
        if key_id in key_ids:
            checks[key_id] = KeyRing(((key_id, key),)).encrypt(KEY_CHECK_TEXT, KEY_CHECK_AAD)
    return checks


def missing_keys(manifest: Manifest, ring: KeyRing) -> list[str]:
    """Key ids the dump needs that the ring lacks, or holds with other key material (the check fails)."""
    have = {key_id for key_id, _ in ring.keys}
    missing = []
    for key_id in manifest.encryption_key_ids:
        check = manifest.key_checks.get(key_id)
        if key_id not in have:
            missing.append(key_id)
        elif check is not None:
            try:
                ring.decrypt(check, KEY_CHECK_AAD)
            except DecryptionError:
                missing.append(f"{key_id} (a different key under that id)")
    return missing


def refusal(*, manifest: Manifest, ring: KeyRing, engine: str, tables: list[str], known: dict[str, set[str]]):
    """Why a restore must not start, or None. `tables`: what the target database holds; `known`: this code's
    migrations per app."""
    if manifest.format != FORMAT:
        return f"backup format {manifest.format} is not supported (this version reads format {FORMAT})"
    if manifest.engine != engine:
        return f"this backup is a {manifest.engine} dump; DATABASE_URL names a {engine} database"
    missing = missing_keys(manifest, ring)
    if missing:
        return (
            f"EULER_ENCRYPTION_KEYS lacks the key(s) this backup needs: {', '.join(missing)}. Set it to the keys"
            " that were in use when the backup was made (kept apart from the backup), then run restore again"
        )
    newer = sorted(f"{app}.{name}" for app, names in manifest.migrations.items() for name in names
                   if app in known and name not in known[app])  # fmt: skip
    if newer:
        return f"this backup comes from a newer Euler (migrations unknown here: {', '.join(newer[:5])}); upgrade first"
    if tables:
        return (
            f"the target database is not empty ({len(tables)} tables, e.g. {', '.join(sorted(tables)[:3])}):"
            " restore only into a new, empty database"
        )
    return None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# --- reading a database (a DB-API cursor: Django's, psycopg's or sqlite3's) ------------------------------------
def _encrypted_columns() -> list[tuple[str, str]]:
    return [(model._meta.db_table, f.column) for model, f in encrypted_fields()]


def _read_state(cursor, quote, tables: set[str]) -> tuple[dict[str, list[str]], list[str]]:
    if "django_migrations" not in tables:
        raise BackupError("the database has no schema yet (run `manage.py migrate`): nothing to back up")
    cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, id")
    migrations: dict[str, list[str]] = {}
    for app, name in cursor.fetchall():
        migrations.setdefault(app, []).append(name)
    key_ids: set[str] = set()
    for table, column in _encrypted_columns():
        if table not in tables:  # a table this schema version does not have
            continue
        cursor.execute(f"SELECT {quote(column)} FROM {quote(table)} WHERE {quote(column)} IS NOT NULL")
        while rows := cursor.fetchmany(1000):
            key_ids.update(key_id for (value,) in rows if (key_id := key_id_of(value)) is not None)
    return migrations, sorted(key_ids)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _pg_env() -> dict[str, str]:
    s = connection.settings_dict
    env = dict(os.environ)
    for var, key in (("PGHOST", "HOST"), ("PGPORT", "PORT"), ("PGUSER", "USER"), ("PGPASSWORD", "PASSWORD")):
        if s.get(key):
            env[var] = str(s[key])
    env["PGDATABASE"] = s["NAME"]
    if sslmode := (s.get("OPTIONS") or {}).get("sslmode"):
        env["PGSSLMODE"] = sslmode
    return env


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BackupError(f"{name} is not installed: install the PostgreSQL client (Debian: postgresql-client)")
    return path


def _run(argv: list[str], env: dict) -> None:
    out = subprocess.run(argv, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise BackupError(f"{Path(argv[0]).name} failed ({out.returncode}): {out.stderr.strip()[-2000:]}")


def _pg_backup(target: Path) -> tuple[dict, list[str]]:
    import psycopg

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]
        tables = {t for (t,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
        state = _read_state(conn.cursor(), _quote, tables)
        _run([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--snapshot={snapshot}",
              "--file", str(target)], _pg_env())  # fmt: skip
        conn.execute("COMMIT")
    return state


def _sqlite_backup(target: Path) -> tuple[dict, list[str]]:
    connection.ensure_connection()
    dest = sqlite3.connect(target)
    try:
        connection.connection.backup(dest)
        cursor = dest.cursor()
        tables = {t for (t,) in cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return _read_state(cursor, _quote, tables)
    finally:
        dest.close()


def engine() -> str:
    if connection.vendor not in DUMPS:
        raise BackupError(f"backups support PostgreSQL and SQLite, not {connection.vendor}")
    return connection.vendor


def backup(directory: Path) -> Manifest:
    """Dump the database into `directory` (created; must be empty) with its manifest."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise BackupError(f"{directory} is a file: give a new directory for each backup")
    if directory.exists() and any(directory.iterdir()):
        raise BackupError(f"{directory} is not empty: give a new directory for each backup")
    kind = engine()
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    dump = directory / DUMPS[kind]
    created_at = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        migrations, key_ids = (_pg_backup if kind == "postgresql" else _sqlite_backup)(dump)
    except BaseException:
        dump.unlink(missing_ok=True)  # never leave half a backup that looks like one
        raise
    dump.chmod(0o600)
    manifest = Manifest(
        format=FORMAT, created_at=created_at, engine=kind, dump=dump.name, sha256=sha256_of(dump),
        migrations=migrations, encryption_key_ids=key_ids, key_checks=key_checks(keyring(), key_ids),
    )  # fmt: skip
    manifest.write(directory)
    return manifest


# --- restore ---------------------------------------------------------------------------------------------------
def target_tables() -> list[str]:
    with connection.cursor() as cursor:
        return [t for t in connection.introspection.table_names(cursor) if not t.startswith("sqlite_")]


def known_migrations() -> dict[str, set[str]]:
    from django.db.migrations.loader import MigrationLoader

    known: dict[str, set[str]] = {}
    for app, name in MigrationLoader(None, ignore_no_migrations=True).disk_migrations:
        known.setdefault(app, set()).add(name)
    return known


def restore(directory: Path) -> Manifest:
    """Load a backup into the (empty) database DATABASE_URL names; refuses before touching it when it cannot."""
    directory = Path(directory)
    manifest = Manifest.read(directory)
    if manifest.dump not in DUMPS.values():
        raise BackupError(f"{directory / MANIFEST} names an unexpected dump file {manifest.dump!r}")
    dump = directory / manifest.dump
    if not dump.is_file():
        raise BackupError(f"{dump} is missing")
    why = refusal(manifest=manifest, ring=keyring(), engine=engine(), tables=target_tables(), known=known_migrations())
    if why:
        raise BackupError(why)
    if sha256_of(dump) != manifest.sha256:
        raise BackupError(f"{dump} does not match the manifest's checksum: the backup is damaged")
    if manifest.engine == "postgresql":
        connection.close()
        _run([_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction",
              "--dbname", connection.settings_dict["NAME"], str(dump)], _pg_env())  # fmt: skip
    else:
        connection.ensure_connection()
        source = sqlite3.connect(f"file:{dump}?mode=ro", uri=True)
        try:
            source.backup(connection.connection)
        finally:
            source.close()
    return manifest


def pending_migrations(manifest: Manifest) -> list[str]:
    """This code's migrations that the restored schema lacks: `manage.py migrate` applies them."""
    return sorted(f"{app}.{name}" for app, names in known_migrations().items() for name in names
                  if name not in manifest.migrations.get(app, []))  # fmt: skip


# --- the job outputs' filesystem store -----------------------------------------------------------------------
OUTPUTS = "outputs"  # the store's copy inside a backup directory


def _outputs_store() -> Path | None:
    """The filesystem store of job outputs, or None when a bucket holds them (the bucket is the operator's)."""
    from django.conf import settings

    if getattr(settings, "EULER_OUTPUTS_BUCKET", ""):
        return None
    return Path(settings.EULER_OUTPUTS_DIR)


def backup_outputs(directory: Path) -> int:
    """Copy the outputs store beside the dump (after it: a file removed meanwhile is missing, one added is extra
    and never listed). Returns the files copied."""
    store = _outputs_store()
    if store is None or not store.is_dir():
        return 0
    shutil.copytree(store, Path(directory) / OUTPUTS, copy_function=shutil.copy2)
    return sum(len(files) for _, _, files in os.walk(Path(directory) / OUTPUTS))


def restore_outputs(directory: Path) -> int:
    """Put a backup's outputs back into the store (merged with what is there). Returns the files copied."""
    source, store = Path(directory) / OUTPUTS, _outputs_store()
    if store is None or not source.is_dir():
        return 0
    shutil.copytree(source, store, copy_function=shutil.copy2, dirs_exist_ok=True)
    return sum(len(files) for _, _, files in os.walk(source))
