#!/usr/bin/env bash
# Runs every test of both modules from the binaries `make build` linked
# into .testbin: go test links a package's test binary again on every run,
# and a link beside a story whose verdict rests on timing is load that the
# machine-wide room does not count. Two packages at a time, the longest
# first (below), each in its package's directory, with go test's lines
# ("ok", "FAIL" and a failing package's whole output) and a closing count. Exit 1 if any package failed.
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
# The longest packages start first, by the times the last run took
# (.unit-times; a package not timed yet goes first), so no long one
# starts last and runs on alone. Two at a time: a third lane, and the
# small matrices beside the Redis one, made make test no shorter (542 s
# for the step against 535 s): the room's seats, not the lanes, are full.
times=.unit-times
touch "$times"
awk -v times="$times" 'FILENAME == times { t[$1] = $2; next } { print (($1 in t) ? t[$1] : 999999999), $0 }' "$times" "$logs/list" |
  sort -s -k1,1nr | cut -d' ' -f2- >"$logs/ordered"
xargs -P 2 -L 1 bash -c 'one "$@"' _ <"$logs/ordered"
cat "$logs"/*.ms 2>/dev/null >"$times.new" && mv "$times.new" "$times"
total=$(wc -l <"$logs/list")
failed=$(find "$logs" -name 'failed.*' | wc -l)
echo "unit: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
