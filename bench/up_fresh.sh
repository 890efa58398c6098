#!/usr/bin/env bash
# `make up` on a fresh clone: seconds until /readyz answers 200 (pip, migrations, admin, Redis, web, workers, beat,
# and the local node when Docker answers), then a second start on the same clone (warm). Each run is stopped by
# its own process group (SIGTERM, as Ctrl-C would), and waited for.
#   bash bench/up_fresh.sh [CLONE_DIR] [PORT]      # CLONE_DIR must not exist (default /tmp/upclone)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/upclone}
port=${2:-18765}
[ ! -e "$dir" ] || { echo "$dir exists: give a new directory" >&2; exit 2; }
git clone -q "$src" "$dir"
cd "$dir"
run() {  # label
  local label=$1 start pid code
  start=$(date +%s.%N)
  env -u DATABASE_URL -u REDIS_URL -u VIRTUAL_ENV PORT="$port" setsid make up > "up-$label.log" 2>&1 &
  pid=$!
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)
    [ "$code" = 200 ] && break
    kill -0 "$pid" 2>/dev/null || { echo "make up ($label) exited before /readyz answered; see $dir/up-$label.log" >&2; exit 1; }
    sleep 0.2
  done
  printf '%s: /readyz 200 after %.1f s\n' "$label" "$(echo "$(date +%s.%N) - $start" | bc)"
  kill -TERM -- "-$pid"  # make and its supervisor (Ctrl-C's signal); the supervisor stops its children in order
  wait "$pid" || true
  while left=$(in_clone); [ -n "$left" ]; do sleep 0.2; done  # every process of this clone has ended
}
in_clone() {  # pids whose working directory is the clone (make up's children run there)
  local p
  for p in /proc/[0-9]*; do
    # Neither this script nor the subshell running this loop (its cwd is the clone too: $BASHPID, not $$).
    [ "${p#/proc/}" != "$$" ] && [ "${p#/proc/}" != "$BASHPID" ] && [ "$(readlink "$p/cwd" 2>/dev/null)" = "$dir" ] &&
      echo "${p#/proc/}"
  done
  true
}
run fresh
run warm
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
