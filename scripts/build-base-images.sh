#!/usr/bin/env bash
# Builds Euler's base images without a registry, from Debian bookworm's packages (mmdebstrap, then
# `docker import`). Machines online can keep the official images; these are their offline equivalents:
#   euler-base/python:3.11-bookworm  Debian's python3.11 in a venv at /opt/python (python, pip on PATH)
#   euler-base/postgres:15           postgresql-15, POSTGRES_USER/PASSWORD/DB like the official image
#   euler-base/redis:7               redis-server
#   euler-base/caddy:2               caddy (TLS front: ACME or its internal CA)
# Usage: scripts/build-base-images.sh [python|postgres|redis|caddy ...]  (default: all; built ones are kept,
# FORCE=1 rebuilds). Needs root, mmdebstrap (apt-get install mmdebstrap) and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
SUITE=${EULER_BASE_SUITE:-bookworm}
MIRROR=${EULER_BASE_MIRROR:-}  # empty: the host's apt sources (mmdebstrap's default for the host's suite)
command -v mmdebstrap >/dev/null || { echo "mmdebstrap is not installed: apt-get install -y mmdebstrap" >&2; exit 1; }

# Leave out what a container never reads (docs, man pages, translations): smaller images.
SLIM=(--dpkgopt=path-exclude=/usr/share/doc/* --dpkgopt=path-include=/usr/share/doc/*/copyright
      --dpkgopt=path-exclude=/usr/share/man/* --dpkgopt=path-exclude=/usr/share/locale/*
      --dpkgopt=path-exclude=/usr/share/info/*)

build() {  # build TAG PACKAGES HOOK CHANGES...
  local tag=$1 packages=$2 hook=$3
  shift 3
  if [ -z "${FORCE:-}" ] && docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base: $tag already built"; return
  fi
  local started=$SECONDS changes=()
  for c in "$@"; do changes+=(--change "$c"); done
  echo "base: building $tag from $SUITE ($packages)"
  local tarball
  tarball=$(mktemp --suffix=.tar /var/tmp/euler-base.XXXXXX)
  # shellcheck disable=SC2086
  if ! mmdebstrap -q --variant=minbase --include="$packages" "${SLIM[@]}" \
    --customize-hook="$hook" --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*.log' \
    "$SUITE" "$tarball" $MIRROR; then
    rm -f "$tarball"; echo "base: mmdebstrap failed for $tag" >&2; return 1
  fi
  docker import "${changes[@]}" "$tarball" "$tag" >/dev/null
  rm -f "$tarball"
  echo "base: $tag built in $((SECONDS - started)) s, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')"
}

python() {
  build euler-base/python:3.11-bookworm "python3.11,python3.11-venv,ca-certificates,tzdata" \
    'chroot "$1" python3.11 -m venv /opt/python && ln -s /opt/python/bin/python "$1"/usr/local/bin/python' \
    'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'ENV LANG=C.UTF-8' \
    'CMD ["python3"]'
}

postgres() {
  build euler-base/postgres:15 "postgresql-15" \
    'copy-in deploy/base/postgres-entrypoint.sh /usr/local/bin' \
    'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    'ENV PGDATA=/var/lib/postgresql/data' 'ENV LANG=C.UTF-8' 'EXPOSE 5432' \
    'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]'
}

redis() {
  build euler-base/redis:7 "redis-server" 'mkdir -p "$1"/data && chroot "$1" chown redis:redis /data' \
    'WORKDIR /data' 'USER redis' 'EXPOSE 6379' \
    'CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no"]'
}

caddy() {
  build euler-base/caddy:2 "caddy,ca-certificates" 'mkdir -p "$1"/data "$1"/config' \
    'ENV XDG_CONFIG_HOME=/config' 'ENV XDG_DATA_HOME=/data' 'EXPOSE 80 443' 'WORKDIR /srv' \
    'CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]'
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(python postgres redis caddy)
# In parallel: most of the time is spent downloading and unpacking packages, one stream each.
pids=()
for t in "${targets[@]}"; do
  case $t in python | postgres | redis | caddy) "$t" & pids+=($!) ;; *) echo "unknown base image: $t" >&2; exit 2 ;; esac
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit $failed
