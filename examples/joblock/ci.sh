#!/usr/bin/env bash
# What this module's CI runs (.github/workflows/locktest.yml calls it; it
# runs the same on a laptop): the machine's pieces, then the tests. setup
# installs with apt-get (as root, or through sudo) only what is missing,
# and builds the libc-allocator redis-server the clock stories need once,
# into ~/.cache/locktorture; run again, it says everything is there. Its
# version is the one go.mod requires: that of the locktest the tests
# import.
set -euo pipefail
cd "$(dirname "$0")"
go run github.com/locktorture/locktorture/cmd/setup
go test ./...
