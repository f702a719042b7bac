#!/usr/bin/env bash
# Links every test binary of both modules into .testbin (go test would link
# them again on every run) and the matrix's command into Go's build cache,
# so the steps after it compile and link nothing. go test -c links every
# binary anew even when nothing changed (about 20 s on 2 cores), so the
# binaries are kept with a stamp of what they were linked from: every file
# git does not ignore, the Go toolchain and its environment. A second make
# test of an unchanged tree links nothing; any edit, new file or removed
# one links them all again. Without git, it always links.
set -euo pipefail
cd "$(dirname "$0")/.."

# stamp: a hash of the inputs, or nothing when they cannot be listed.
stamp() {
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
  {
    go version
    go env GOOS GOARCH GOAMD64 GOFLAGS GOEXPERIMENT GOWORK CGO_ENABLED
    git ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
      xargs -0 -r sha256sum
  } | sha256sum | cut -d' ' -f1
}

want=$(stamp)
if [ -n "$want" ] && [ -d .testbin/main ] && [ -d .testbin/joblock ] && [ -f .testbin/stamp ] && [ "$(cat .testbin/stamp)" = "$want" ]; then
  echo "build: .testbin was linked from these sources; nothing to link"
else
  rm -rf .testbin
  # No debug information (-s -w): nothing debugs these binaries, a
  # panic's trace needs none, and linking without it is a fifth faster.
  go test -c -ldflags='-s -w' -o .testbin/main/ ./... >/dev/null
  (cd examples/joblock && go test -c -ldflags='-s -w' -o ../../.testbin/joblock/ ./... >/dev/null)
  [ -z "$want" ] || echo "$want" >.testbin/stamp
fi
# go run keeps what it links: the matrix's command is linked here, once.
go run ./cmd/run -list >/dev/null
