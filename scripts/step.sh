#!/usr/bin/env bash
# step.sh NAME COMMAND...: runs one step of make test and prints how long
# it took, so every run of make test (a clean clone's above all) says where
# its minutes went. Exit status is the command's.
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
echo "make test: $name took $(($(date +%s) - start))s (exit $rc)"
exit "$rc"
