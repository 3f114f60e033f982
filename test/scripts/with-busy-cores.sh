#!/usr/bin/env bash
# Runs a command while one busy loop spins per core: the suite must pass on a host busy with other work.
#   test/scripts/with-busy-cores.sh npm test
set -u
pids=()
for _ in $(seq "$(nproc)"); do node -e 'for (;;) {}' & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
"$@"
