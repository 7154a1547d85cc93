#!/usr/bin/env bash
# OTF2 load benchmark: commdb's reader against the reference library (libotf2) on the same
# generated archive. Needs gcc and libotf2-trace-dev (apt-get install libotf2-trace-dev).
# Usage: tests/otf2/bench.sh [ITERATIONS]   (default 1250: about 51 M events on 1024 ranks)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/commdb-target}"
work="${BENCH_DIR:-$(mktemp -d)}"
iterations="${1:-1250}"

gcc -O2 -o "$work/count_events" tests/otf2/count_events.c -lotf2
archive="$work/archive"
# Generates the archive with commdb's writer when it is not there yet, then reads it.
cargo bench -q -p commdb-shell --bench otf2 -- "$archive" "$iterations"
du -sh "$archive"
cat "$archive"/traces/*.evt > /dev/null   # the page cache is warm for both readers
/usr/bin/time -f "libotf2 reference reader peak memory: %M KiB" "$work/count_events" "$archive/traces.otf2"
# Three rounds in one process; the allocator keeps freed pages, so round 0 shows a first load
# (fresh pages) and rounds 1-2 the load itself on warm pages.
MIMALLOC_PURGE_DELAY=-1 cargo bench -q -p commdb-shell --bench otf2 -- "$archive" "$iterations" 3
