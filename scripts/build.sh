#!/usr/bin/env bash
# Links every test binary of both modules (go test would link them again on
# every run) and the matrix's command into Go's build cache, so the steps
# after it compile and link nothing. go test -c links every binary anew
# even when nothing changed (about 50 s on 2 cores), so the binaries are
# kept under a stamp of what they were linked from: every file git does not
# ignore, the Go toolchain and its environment (every build is -trimpath,
# so a clone's path is not in them). They are kept in the harness's cache
# (testbin/STAMP under $LOCKTORTURE_CACHE, else ~/.cache/locktorture), as
# Go keeps its build cache, so a second clone of the same tree links
# nothing either; .testbin is a link to them. Any edit, new file or
# removed one links them all again; the two stamps used last are kept,
# and any used in the last two hours. Without git, it links into .testbin
# itself, every time.
set -euo pipefail
cd "$(dirname "$0")/.."

# stamp: a hash of the inputs, or nothing when they cannot be listed.
stamp() {
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
  {
    go version
    go env GOOS GOARCH GOAMD64 GOFLAGS GOEXPERIMENT GOWORK CGO_ENABLED
    git ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [ -f "$f" ] || continue; printf '%s\0' "$f"; done |
      xargs -0 -r sha256sum
  } | sha256sum | cut -d' ' -f1
}

# link DIR: every test binary of both modules into DIR/main and DIR/joblock.
# No debug information (-s -w): nothing debugs these binaries, a panic's
# trace needs none, and linking without it is a fifth faster.
link() {
  go test -c -ldflags='-s -w' -o "$1/main/" ./... >/dev/null
  (cd examples/joblock && go test -c -ldflags='-s -w' -o "$1/joblock/" ./... >/dev/null)
}

want=$(stamp)
rm -rf .testbin
if [ -z "$want" ]; then
  link "$PWD/.testbin"
else
  cache=${LOCKTORTURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/locktorture}/testbin
  mkdir -p "$cache"
  cache=$(cd "$cache" && pwd)
  if [ -f "$cache/$want/linked" ]; then
    echo "build: these sources were linked before ($cache/$want); nothing to link"
  else
    # Linked aside and renamed into place, so a make test beside this one
    # never sees half of it.
    tmp=$(mktemp -d "$cache/.linking.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    link "$tmp"
    touch "$tmp/linked"
    mv -T "$tmp" "$cache/$want" 2>/dev/null || rm -rf "$tmp"
    [ -f "$cache/$want/linked" ] || { echo "build: $cache/$want is not whole: remove it and build again" >&2; exit 1; }
  fi
  touch "$cache/$want"
  ln -s "$cache/$want" .testbin
  # The two stamps used last stay (about 600 MB each), and any used in the
  # last two hours (a make test of another tree may still be running its
  # binaries); older ones go, and links a killed build left.
  find "$cache" -mindepth 1 -maxdepth 1 -type d -printf '%T@ %p\0' | sort -zrn | tail -zn +3 | cut -zd' ' -f2- |
    while IFS= read -r -d '' old; do [ -n "$(find "$old" -maxdepth 0 -mmin +120)" ] && rm -rf "$old"; done || true
fi
# go run keeps what it links: the matrix's command is linked here, once.
go run ./cmd/run -list >/dev/null
