#!/usr/bin/env bash
# Makes the node image's Debian base with no registry: mmdebstrap of this
# machine's own Debian release from its own mirror, with the packages a node
# needs, written as a tar on stdout for `docker import`. Needs root and
# mmdebstrap (make setup installs it). Package docker runs it; its text is
# part of the base image's tag, so a change here makes a new base.
#
# mmdebstrap rather than debootstrap: the same Debian packages from the same
# mirror, but fetched by apt in parallel and unpacked in one dpkg run, in
# 36 s where debootstrap took 65 s on an idle 2-core machine; it cleans its
# temporary tree and apt's caches and lists itself.
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

# redis-server and redis-sentinel are Debian's own; iptables cuts links from
# inside a node (NET_ADMIN); libfaketime fakes a node's clock; procps gives
# the tests ps. minbase is Debian's required packages (a shell, coreutils,
# mawk) and apt.
mmdebstrap --quiet --variant=minbase \
  --include=redis-server,redis-sentinel,redis-tools,iptables,libfaketime,procps \
  "$codename" - "$mirror" </dev/null
