#!/usr/bin/env bash
# Builds redis-server from Debian's own source package with the libc
# allocator and caches it. The clock nemesis needs it: libfaketime hangs
# Debian's jemalloc redis-server (jemalloc recurses into the faked
# clock_gettime), while the libc-allocator build runs under it fine.
# Prints the cached binary's path. Idempotent: a cached build is reused.
set -euo pipefail
trap 'echo "build-faketime-redis: failed at line $LINENO" >&2' ERR

cache="${LOCKTORTURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/locktorture}"
out="$cache/redis-libc/redis-server"
if [ -x "$out" ] && "$out" --version | grep -q "malloc=libc"; then
  echo "$out"
  exit 0
fi

work=$(mktemp -d)
chmod 755 "$work" # apt fetches as _apt, which must be able to write here
trap 'rm -rf "$work"' EXIT
. /etc/os-release
codename="${VERSION_CODENAME:?cannot tell the Debian release from /etc/os-release}"

# A private apt configuration with deb-src twins of the machine's own Debian
# entries (same mirrors, suites, keys), so the machine's sources are left as
# they are and no root is needed to fetch source.
mkdir -p "$work/apt/sources.list.d" "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
for f in /etc/apt/sources.list.d/*.sources; do
  [ -e "$f" ] || continue
  awk 'BEGIN { RS=""; ORS="\n\n" } /(^|\n)Types:[^\n]*deb/ && /URIs:[^\n]*debian/ { sub(/Types:[^\n]*/, "Types: deb-src"); print }' "$f"
done > "$work/apt/sources.list.d/src.sources"
{ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
  sed -n 's/^deb \(.*debian.*\)$/deb-src \1/p' > "$work/apt/sources.list.d/src.list"
if ! [ -s "$work/apt/sources.list.d/src.sources" ] && ! [ -s "$work/apt/sources.list.d/src.list" ]; then
  cat > "$work/apt/sources.list.d/src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename $codename-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $codename-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/apt/sources.list.d"
  -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o "Debug::NoLocking=1")
echo "build-faketime-redis: fetching Debian's redis source" >&2
apt-get "${apt_opts[@]}" -qq update >&2
(cd "$work" && apt-get "${apt_opts[@]}" -qq source redis >/dev/null 2>&1)
src=$(find "$work" -maxdepth 1 -type d -name 'redis-*' | head -1)
[ -n "$src" ] || { echo "build-faketime-redis: apt-get source redis gave no source tree" >&2; exit 1; }

echo "build-faketime-redis: building $(basename "$src") with MALLOC=libc (20 to 45 s on 2 cores, once; then cached)" >&2
# Its own job count, not that of a make this script may run under: make
# test runs setup beside lint, and an inherited jobserver stalls this build.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$src" -j"$(nproc)" MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no >"$work/build.log" 2>&1 ||
  { tail -20 "$work/build.log" >&2; echo "build-faketime-redis: build failed" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
cp "$src/src/redis-server" "$out.tmp" && mv "$out.tmp" "$out"
"$out" --version >&2
echo "$out"
