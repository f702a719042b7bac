#!/usr/bin/env bash
# Runs every test of both modules from the binaries `make build` linked
# into .testbin: go test links a package's test binary again on every run,
# and a link beside a story whose verdict rests on timing is load that the
# machine-wide room does not count. Two packages at a time, four once the
# matrix beside them is done, the longest first (below), each in its
# package's directory, with go test's lines ("ok", "FAIL" and a failing
# package's whole output) and a closing count. Exit 1 if any package
# failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# MODULE-DIR BIN-DIR: one line per package with tests: import path, dir, binary.
packages() {
  (cd "$1" && go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./...) |
    while read -r pkg dir; do
      bin="$root/$2/${pkg##*/}.test"
      [ -x "$bin" ] || { echo "unit: $bin is missing: run make build first" >&2; exit 1; }
      echo "$pkg $dir $bin"
    done
}

# one PKG DIR BIN: runs one package's binary and prints its result.
one() {
  local pkg=$1 dir=$2 bin=$3 log="$logs/${1//\//_}.log" start rc
  start=$(date +%s%N)
  (cd "$dir" && "$bin" -test.paniconexit0 -test.timeout=15m) >"$log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  echo "$pkg $ms" >"$log.ms"
  if [ "$rc" -eq 0 ]; then
    printf 'ok  \t%s\t%d.%03ds\n' "$pkg" $((ms / 1000)) $((ms % 1000))
  else
    cat "$log"
    printf 'FAIL\t%s\t%d.%03ds\n' "$pkg" $((ms / 1000)) $((ms % 1000))
    touch "$logs/failed.${pkg//\//_}"
  fi
}
export -f one
export logs

{ packages . .testbin/main && packages examples/joblock .testbin/joblock; } >"$logs/list" || exit 1
# The longest packages start first, by the times the last run on this
# machine took (kept in the harness's cache, so a fresh clone has them),
# so no long one starts last and runs on alone. A package not timed yet
# goes first; where none is (a machine's first run), the ones below, the
# longest of a make test from nothing, longest first, lead the rest.
cache=${LOCKTORTURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/locktorture}
mkdir -p "$cache"
times=$cache/unit-times
touch "$times"
first="locks/library engine locktest internal/mutants cluster docker cmd/run nemesis"
awk -v times="$times" -v first="$first" '
  BEGIN { n = split(first, f, " "); for (i = 1; i <= n; i++) lead["github.com/locktorture/locktorture/" f[i]] = n - i + 1 }
  FILENAME == times { t[$1] = $2; next }
  { print (($1 in t) ? t[$1] : 1000000000 + lead[$1]), $0 }' "$times" "$logs/list" |
  sort -s -k1,1nr | cut -d' ' -f2- >"$logs/ordered"
# Two at a time beside the matrix: a third lane, or the library's cases in
# parallel, took CPU the matrix's stories needed and made the step longer.
# Once the matrix's lane ends (make test's matrix target then leaves the
# file $MATRIX_DONE), the unit lane runs alone on a machine its packages,
# which mostly wait on servers and leases, leave four fifths idle: xargs
# takes two more at a time (GNU xargs widens by one on each SIGUSR1; a
# second signal sent before the first is taken would be lost, hence the
# pause between them). xargs runs in the background so that it can be
# signalled; a script's background job ignores SIGINT and SIGQUIT, and so
# would the test binaries it starts, so env puts them back (Ctrl-C ends
# them all, as it did xargs in the foreground).
env --default-signal=INT,QUIT xargs -P 2 -L 1 bash -c 'one "$@"' _ <"$logs/ordered" &
lanes=$!
if [ -n "${MATRIX_DONE:-}" ]; then
  (
    # xargs handles SIGUSR1 only once it runs: a signal before that
    # would end it.
    sleep 1
    while [ ! -e "$MATRIX_DONE" ]; do
      kill -0 "$lanes" 2>/dev/null || exit 0
      sleep 1
    done
    kill -USR1 "$lanes" && sleep 0.5 && kill -USR1 "$lanes" &&
      echo "unit: the matrix is done: four packages at a time from $(date +%T)"
  ) 2>/dev/null &
  widen=$!
fi
wait "$lanes"
lanes_rc=$?
[ -z "${widen:-}" ] || kill "$widen" 2>/dev/null
{ cat "$logs"/*.ms >"$times.$$" && mv "$times.$$" "$times"; } 2>/dev/null || rm -f "$times.$$"
total=$(wc -l <"$logs/list")
ran=$(find "$logs" -name '*.ms' | wc -l)
failed=$(find "$logs" -name 'failed.*' | wc -l)
if [ "$lanes_rc" -ne 0 ] || [ "$ran" -ne "$total" ]; then
  echo "unit: xargs ended with status $lanes_rc after $ran of $total packages" >&2
  exit 1
fi
echo "unit: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
