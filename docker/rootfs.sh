#!/usr/bin/env bash
# Makes the node image's Debian base with no registry: debootstrap of this
# machine's own Debian release from its own mirror, with the packages a node
# needs, written as a tar on stdout for `docker import`. Needs root and
# debootstrap (make setup installs it). Package docker runs it; its text is
# part of the base image's tag, so a change here makes a new base.
set -euo pipefail
trap 'echo "rootfs.sh: failed at line $LINENO" >&2' ERR

. /etc/os-release
codename="${VERSION_CODENAME:?cannot tell the Debian release from /etc/os-release}"
# The machine's own mirror: the first Debian URI apt uses that is not the
# security archive.
mirror=$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n'
            sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]\+\).*/\2/p' /etc/apt/sources.list 2>/dev/null; } |
          grep '/debian/\?$' | grep -v security | head -n1 || true)
mirror="${mirror:-http://deb.debian.org/debian}"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# redis-server and redis-sentinel are Debian's own; iptables cuts links from
# inside a node (NET_ADMIN); libfaketime fakes a node's clock; procps gives
# the tests ps.
debootstrap --variant=minbase \
  --include=redis-server,redis-sentinel,redis-tools,iptables,libfaketime,procps \
  "$codename" "$root" "$mirror" >&2
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" --numeric-owner -c .
