#!/usr/bin/env bash
# Installs what the harness runs against, from Debian's packages, when it is
# missing: real redis-server and redis-sentinel processes, redis-cli for
# poking at them by hand, libfaketime for the per-node clock nemesis, and
# the compiler and dpkg-dev to build the libc-allocator redis-server that
# libfaketime needs (scripts/build-faketime-redis.sh, cached after the first
# build), and Debian's python3 with python3-redis for the redis-py lock's
# worker; and, where a Docker engine answers, mmdebstrap and the docker
# backend's node image (docker/, built from these same packages with no
# registry). Safe to run again: it installs and builds nothing that is
# there.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "setup: the go command is missing: install Go 1.21 or newer; it fetches the toolchain go.mod names" >&2; exit 1; }

# From nothing the longest step is compiling the node image's tool (most of
# the module's dependencies): it needs nothing apt installs, so it starts
# first and compiles while apt downloads. The matrix's command compiles
# next, while mmdebstrap waits on the mirror: compiled here, the matrix in
# make test starts its stories at once instead of queueing its compile
# behind the tests' and lint's. Every background step writes to a log
# printed when it is waited for.
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# compile CMD [NICENESS]
compile() { nice -n "${2:-0}" go build -o "$work/$1" "./cmd/$1" >"$work/$1.log" 2>&1; }
docker=false
if docker info >/dev/null 2>&1; then
  docker=true
  compile image &
  image_pid=$!
else
  compile run &
  run_pid=$!
fi

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for pkg in redis-server redis-sentinel redis-tools libfaketime gcc make libc6-dev dpkg-dev python3 python3-redis mmdebstrap; do
  have_pkg "$pkg" || need+=("$pkg")
done

if ((${#need[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to apt-get install ${need[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "setup: installing ${need[*]} with apt-get"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The libc-allocator redis-server compiles while the image's Debian base is
# made (mmdebstrap mostly waits on the mirror and the disk). It and the
# matrix's command compile niced: the image tool's compile, then
# mmdebstrap, is setup's longest path, and they fill the cores it leaves.
nice -n 10 ./scripts/build-faketime-redis.sh >"$work/redis.path" 2>"$work/redis.log" &
redis_pid=$!
if $docker; then
  wait "$image_pid" || { sed 's/^/setup: /' "$work/image.log" >&2; exit 1; }
  compile run 10 &
  run_pid=$!
  "$work/image" -base >"$work/base.log" 2>&1 &
  base_pid=$!
fi
wait "$redis_pid" || { cat "$work/redis.log" >&2; exit 1; }
cat "$work/redis.log" >&2
faketime_redis=$(cat "$work/redis.path")
echo "setup: $(redis-server --version | cut -d' ' -f1-3), $(go version | cut -d' ' -f3), clock-nemesis redis: $faketime_redis"
wait "$run_pid" || { sed 's/^/setup: /' "$work/run.log" >&2; exit 1; }
if $docker; then
  base_ok=true
  wait "$base_pid" || base_ok=false
  sed 's/^/setup: /' "$work/base.log"
  $base_ok || exit 1
  echo "setup: docker node image $("$work/image")"
else
  echo "setup: no Docker engine answers (docker info): the docker backend's image is not built, and its tests skip"
fi
