#!/bin/sh
# euler-base/postgres: Debian's PostgreSQL 15 with the official image's first-start contract
# (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB; data in PGDATA), run as the postgres user.
set -eu
PGBIN=/usr/lib/postgresql/15/bin
: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /run/postgresql
  chown -R postgres:postgres "$PGDATA" /run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" > "$pwfile"
  "$PGBIN/initdb" -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 -E UTF8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  "$PGBIN/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$POSTGRES_DB" != postgres ]; then
    "$PGBIN/psql" -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
  fi
  "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres: initialised $PGDATA (user $POSTGRES_USER, database $POSTGRES_DB)"
fi
# exec: postgres is PID 1 and gets the stop signal (compose sends SIGINT: fast shutdown; SIGTERM waits for clients).
exec "$PGBIN/postgres" -D "$PGDATA" -c listen_addresses='*' "$@"
