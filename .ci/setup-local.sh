#!/usr/bin/env bash
# CI entry point: install what the tests need, start dockerd, build the offline image, run `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

need=()
command -v dockerd >/dev/null || need+=(docker.io)
[ -x /bin/busybox ] || need+=(busybox-static)
[ -x /usr/bin/chromium ] || need+=(chromium)
dpkg -s fonts-wqy-microhei >/dev/null 2>&1 || need+=(fonts-wqy-microhei)
# manage.py backup/restore on PostgreSQL: pg_dump and pg_restore (Debian's match its server, 15 on bookworm).
{ command -v pg_dump && command -v pg_restore; } >/dev/null || need+=(postgresql-client)
if [ ${#need[@]} -gt 0 ]; then
  echo "ci: installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "ci: starting dockerd"
  (dockerd >/tmp/euler-ci-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "ci: dockerd did not start"; tail -50 /tmp/euler-ci-dockerd.log; exit 1; }
fi
scripts/build-test-image.sh

# The services this machine kind runs before CI; start them if they are not answering.
pg_isready -h 127.0.0.1 -p 5432 -q || pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /tmp

export CI=true
export DATABASE_URL="${DATABASE_URL:-postgres://root@127.0.0.1:5432/test}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

