#!/bin/bash
# CASITA as the oracle for offload_waits and device_idle. Builds CASITA (rdietric/casita,
# BSD-style licence) with CMake against Debian's OTF2 (libotf2-trace-dev) and Open MPI into a
# cache outside the work tree, runs it on the archives listed in tests/data/casita/traces.txt
# (one analysis process per rank, as CASITA wants) and writes what its summary and rating say,
# per archive, to tests/data/casita/NAME.tsv (tab-separated: a kernel's name may hold commas):
#
#   idle_device         -  SECONDS  -   Offloading: Idle device (all ranks)
#   compute_idle_device -  SECONDS  -   Offloading: Compute idle device
#   early_blocking_wait -  SECONDS  N   Offloading: Early blocking wait and its occurrences
#   on_compute_kernels  -  SECONDS  -   Offloading: ... on compute kernels
#   kernel_blame   REGION  SECONDS  -   a region's blame for host waits (Blame [s] x "blame for
#                                       host wait [%]" of casita_rating.csv), where it is not 0
#   critical_path  REGION  SECONDS  -   a region's time on the critical path ("Time on CP [s]"),
#                                       where it is not 0
#
# Never part of commdb's build: the comparison test (tests/tests/behaviour/casita_oracle.rs) reads only
# those files.
#
# Usage: tests/casita/oracle.sh            (from the repository root; ../shared beside it)
# Needs: cmake g++ libotf2-trace-dev libopenmpi-dev openmpi-bin (apt), git or CASITA_SRC=<tree>.
# Environment: CASITA_CACHE (default ~/.cache/commdb-casita), CASITA_SRC,
#              CASITA_GIT (default https://github.com/rdietric/casita), COMMDB (a commdb binary
#              for the generate: archives; default cargo run --release).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${CASITA_CACHE:-$HOME/.cache/commdb-casita}
out=$repo/tests/data/casita
mkdir -p "$cache"

# 1. CASITA.
casita=$cache/build/casita
if [ ! -x "$casita" ]; then
    if [ -z "${CASITA_SRC:-}" ]; then
        CASITA_SRC=$cache/src
        [ -d "$CASITA_SRC" ] || git clone --depth 1 "${CASITA_GIT:-https://github.com/rdietric/casita}" "$CASITA_SRC"
    fi
    mkdir -p "$cache/build" && cd "$cache/build"
    cmake "$CASITA_SRC" -DRELEASE=ON > "$cache/cmake.log" 2>&1 || { tail -30 "$cache/cmake.log"; exit 1; }
    make -j2 > "$cache/make.log" 2>&1 || { tail -30 "$cache/make.log"; exit 1; }
fi

# 2. Each archive: shared:PATH is under ../shared/data; make:SCRIPT is written by the script
# with a tick of a microsecond (so that CASITA's seconds to six places are its ticks; the
# comparison reads the archive the script writes in ns); generate:OPTIONS is written by
# `commdb generate --format otf2` (in ns, as the comparison generates it again).
grep -v '^#' "$out/traces.txt" | while read -r name source; do
    [ -n "$name" ] || continue
    case "$source" in
        shared:*) archive=$repo/../shared/data/${source#shared:} ;;
        make:*)
            archive=$(mktemp -d)/archive
            /usr/bin/python3 "$repo/${source#make:}" "$archive" 1000000 ;;
        generate:*)
            # commdb's generator, KEY=VALUE,... as its options (--KEY VALUE, a flag alone).
            archive=$(mktemp -d)/archive
            args=()
            IFS=',' read -ra items <<< "${source#generate:}"
            for item in "${items[@]}"; do
                args+=("--${item%%=*}")
                [[ "$item" == *=* ]] && args+=("${item#*=}")
            done
            if [ -n "${COMMDB:-}" ]; then
                "$COMMDB" generate "$archive" --format otf2 "${args[@]}"
            else
                (cd "$repo" && cargo run -q --release -- generate "$archive" --format otf2 "${args[@]}")
            fi ;;
        *) echo "traces.txt: $name: expected shared:PATH, make:SCRIPT or generate:OPTIONS, found '$source'" >&2; exit 1 ;;
    esac
    [ -f "$archive/traces.otf2" ] || { echo "skipping $name: $archive/traces.otf2 is absent" >&2; continue; }
    ranks=$(otf2-print -A "$archive/traces.otf2" | grep -c '^LOCATION_GROUP .*Type: PROCESS' || true)
    work=$(mktemp -d)
    (cd "$work" && mpirun --allow-run-as-root --oversubscribe -np "${ranks:-1}" "$casita" "$archive/traces.otf2" \
        -o out/casita.otf2 < /dev/null > log.txt 2>&1) || { tail -30 "$work/log.txt"; exit 1; }
    python3 - "$work/out/casita_summary.txt" "$work/out/casita_rating.csv" > "$out/$name.tsv" <<'EOF'
import re
import sys

summary, rating = open(sys.argv[1]).read(), open(sys.argv[2]).read().splitlines()
def seconds(label):
    m = re.search(r"^\s*" + re.escape(label) + r"\s*:\s*([0-9.]+) s(.*)$", summary, re.M)
    return m
for metric, label in [("idle_device", "Idle device"), ("compute_idle_device", "Compute idle device"),
                      ("early_blocking_wait", "Early blocking wait"), ("on_compute_kernels", "... on compute kernels")]:
    m = seconds(label)
    if m is None:
        print(f"{metric}\t-\t0\t" + ("0" if metric == "early_blocking_wait" else "-"))
        continue
    n = re.search(r"([0-9]+) overall occurrences", m.group(2))
    print(f"{metric}\t-\t{m.group(1)}\t{n.group(1) if n else '-'}")
header = rating[0].split(";")
blame, host = header.index("Blame [s]"), [i for i, h in enumerate(header) if "host wait" in h][0]
on_path = header.index("Time on CP [s]")
sums, path = {}, {}
for line in rating[1:]:
    f = line.split(";")
    if len(f) > host and float(f[host]) > 0:
        sums[f[0]] = sums.get(f[0], 0.0) + float(f[blame]) * float(f[host]) / 100
    # (the rating ends with its sums: "Sum of Top 20", "on host: 19", ...)
    if len(f) > on_path and float(f[on_path]) > 0 and not re.match(r"(Sum of|on host|on device|[0-9]+ on )", f[0]):
        path[f[0]] = path.get(f[0], 0.0) + float(f[on_path])
for region, s in sorted(sums.items()):
    print(f"kernel_blame\t{region}\t{s:.6f}\t-")
for region, s in sorted(path.items()):
    print(f"critical_path\t{region}\t{s:.6f}\t-")
EOF
    echo "$name:"; cat "$out/$name.tsv"
    rm -rf "$work"
done
