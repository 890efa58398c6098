#!/usr/bin/env bash
# Builds the offline test image (no registry is reachable): a busybox rootfs imported into Docker.
set -euo pipefail
if docker image inspect euler-test/busybox >/dev/null 2>&1 && docker image inspect alpine:3.20 >/dev/null 2>&1; then
  exit 0
fi
BB=$(command -v busybox || true)
[ -x /bin/busybox ] && BB=/bin/busybox
if [ -z "$BB" ]; then echo "busybox-static is not installed (apt-get install -y busybox-static)" >&2; exit 1; fi
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$ROOT/bin" "$ROOT/sbin" "$ROOT/usr/bin" "$ROOT/usr/sbin" "$ROOT/tmp" "$ROOT/etc" "$ROOT/proc" "$ROOT/sys" "$ROOT/dev"
cp "$BB" "$ROOT/bin/busybox"
for applet in $("$ROOT/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -sf /bin/busybox "$ROOT/bin/$applet"
done
chmod 1777 "$ROOT/tmp"
echo "root:x:0:0:root:/root:/bin/sh" > "$ROOT/etc/passwd"
echo "nobody:x:65534:65534:nobody:/:/bin/false" >> "$ROOT/etc/passwd"
echo "root:x:0:" > "$ROOT/etc/group"
(cd "$ROOT" && tar -c .) | docker import -c 'ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin' - euler-test/busybox
docker tag euler-test/busybox alpine:3.20
echo "built euler-test/busybox (also alpine:3.20)"
