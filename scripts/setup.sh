#!/usr/bin/env bash
# Gets this machine ready for make run and make test. What the harness runs
# against comes from cmd/setup, the command a user's CI runs too (see
# docs/your-lock.md, "In CI"): redis-server, redis-sentinel,
# redis-tools and libfaketime from Debian's packages, and the
# libc-allocator redis-server that libfaketime needs, built once from
# Debian's redis source and cached. This script adds what only this
# repository's own tests need: python3 with python3-redis for the redis-py
# lock's worker, the lock services the harness sets beside Redis
# (zookeeper with its JVM, etcd-server, postgresql-15, mariadb-server-core, memcached) and,
# where a Docker engine answers, mmdebstrap and the docker backend's
# node image (docker/, built from these same packages
# with no registry). Safe to run again: it installs and builds nothing
# that is there.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "setup: the go command is missing: install Go 1.21 or newer; it fetches the toolchain go.mod names" >&2; exit 1; }

# Debian's kernel schedules each session as one group (autogroup), and
# PostgreSQL makes every backend a session of its own. Beside a busy session
# (the harness's with two busy loops) a process in a session of its own
# then waited up to 1.5 s for a core, where one in the busy session waited
# 53 ms at most, so PostgreSQL pairs starved for the scheduler's grouping
# more than for the machine's load (docs/measurements.md, "Issue 43:
# autogroup"). Off, every process is weighed alike. It lasts until the
# machine restarts.
autogroup=/proc/sys/kernel/sched_autogroup_enabled
if [ "$(cat "$autogroup" 2>/dev/null)" = 1 ]; then
  if [ "$(id -u)" = 0 ] && sysctl -qw kernel.sched_autogroup_enabled=0 2>/dev/null ||
     sudo -n sysctl -qw kernel.sched_autogroup_enabled=0 2>/dev/null; then
    echo "setup: kernel.sched_autogroup_enabled set to 0 (until the machine restarts): PostgreSQL's backends are each a session, and a session's group waited for a core far longer than its processes"
  else
    echo "setup: kernel.sched_autogroup_enabled is 1 and could not be set: run 'sudo sysctl kernel.sched_autogroup_enabled=0', or PostgreSQL pairs starve beside busy work"
  fi
fi

# From nothing the longest step is compiling the node image's tool (most of
# the module's dependencies): it needs nothing apt installs, so it compiles
# while apt downloads. The matrix's command compiles next, while
# mmdebstrap waits on the mirror: compiled here, the matrix in make test
# starts its stories at once instead of queueing its compile behind the
# tests' and lint's. Every background step writes to a log printed when it
# is waited for.
work=$(mktemp -d)
# Each background step is a process group of its own (job control), so an
# exit that leaves one running (a failed apt-get) stops it with what it
# started: make and cc under cmd/setup's build, mmdebstrap under the
# image's tool.
set -m
trap 'for j in $(jobs -p); do kill -- "-$j" 2>/dev/null || true; done; rm -rf "$work"' EXIT
# compile CMD [NICENESS]
compile() { nice -n "${2:-0}" go build -o "$work/$1" "./cmd/$1" >"$work/$1.log" 2>&1; }
# cmd/setup imports only the standard library. It compiles first, alone
# (13 to 15 s from nothing on 2 cores, nearly all of it the runtime and
# packages the image's tool needs too, which then finds them compiled),
# and then installs, in the foreground, the packages of what is missing,
# its build's tools and this repository's own.
compile setup || { sed 's/^/setup: /' "$work/setup.log" >&2; exit 1; }
docker=false
if docker info >/dev/null 2>&1; then
  docker=true
  compile image &
  image_pid=$!
else
  compile run &
  run_pid=$!
fi
# The libraries the workers put under test, as Debian packages them
# (locks/library): Python's and PHP's, with the drivers their backends need.
libraries=python3-tooz,python3-pymemcache,python3-psycopg2,python3-pymysql,python3-portalocker,python3-etcd3,\
php-cli,php-redis,php-nrk-predis,php-pgsql,php-mysql,php-memcached,\
php-symfony-lock,php-illuminate-cache,php-illuminate-redis,php-malkusch-lock
# What no package provides and the machine's own compiler can build (the
# libc-allocator redis-server: gcc, make and dpkg-dev come with the machine,
# the redis source through a private apt configuration) builds niced beside
# apt-get rather than after it: from nothing it was setup's longest step
# after the packages. The gain measured was small (setup and tools 170 s
# against 185 s): from nothing both cores are busy all through setup.
nice -n 10 "$work/setup" -workers -only build-ready >"$work/ready.log" 2>&1 &
ready_pid=$!
"$work/setup" -workers -only packages -packages python3,python3-redis,python3-kazoo,memcached,zookeeper,etcd-server,postgresql-15,mariadb-server-core,mariadb-client-core,mmdebstrap,"$libraries"

wait "$ready_pid" || { cat "$work/ready.log" >&2; exit 1; }
cat "$work/ready.log"

# What waited for the packages (the Curator worker: javac and Curator's
# jars, or the redis-server where the machine had no compiler) builds while
# the image's Debian base is made (mmdebstrap mostly waits on the mirror and
# the disk). The base waits for the libc-allocator build: from nothing both
# cores are busy, and mmdebstrap started beside that build made setup
# slower, not faster (docs/ci-and-benchmarks.md, "Tried and left"). It and the matrix's command compile niced: the image tool's
# compile, then mmdebstrap, is setup's longest path, and they fill the
# cores it leaves.
nice -n 10 "$work/setup" -workers -only build >"$work/build.log" 2>&1 &
build_pid=$!
if $docker; then
  wait "$image_pid" || { sed 's/^/setup: /' "$work/image.log" >&2; exit 1; }
  compile run 10 &
  run_pid=$!
  "$work/image" -base >"$work/base.log" 2>&1 &
  base_pid=$!
fi
wait "$build_pid" || { cat "$work/build.log" >&2; exit 1; }
cat "$work/build.log"
echo "setup: $(redis-server --version | cut -d' ' -f1-3), $(go version | cut -d' ' -f3)"
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
