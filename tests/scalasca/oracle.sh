#!/bin/bash
# Scalasca's trace analyzer as the oracle for wait_states, critical_path_profile and
# delay_costs. Builds Scalasca 2.6 (BSD licence) from a public source snapshot with Debian's
# Open MPI into a cache outside the work tree, runs its analyzer (scout.mpi) on the traces
# listed in tests/data/scalasca/traces.txt and writes what it found, per metric, call path and
# rank, to tests/data/scalasca/NAME.csv; then its hybrid analyzer (scout.hyb, MPI + OpenMP) on
# the archives of tests/data/scalasca/hybrid.txt, per metric, call path and location, to
# tests/data/scalasca/hybrid_NAME.csv. Never part of commdb's build: the comparison test
# (tests/tests/behaviour/scalasca_oracle.rs) reads only those files.
#
# Usage: tests/scalasca/oracle.sh            (from the repository root; ../shared beside it)
# Needs: libopenmpi-dev openmpi-bin (apt), python3-venv, git or SCALASCA_SRC=<source tree>.
# Environment: SCALASCA_CACHE (default ~/.cache/commdb-scalasca), SCALASCA_SRC,
#              SCALASCA_GIT (default https://github.com/OpenCMISS-Dependencies2/scalasca),
#              COMMDB (a commdb binary to generate the traces with; default: cargo builds one).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${SCALASCA_CACHE:-$HOME/.cache/commdb-scalasca}
out=$repo/tests/data/scalasca
mkdir -p "$cache"

# 1. Scalasca's analyzer.
if [ ! -x "$cache/install/bin/scout.mpi" ]; then
    if [ -z "${SCALASCA_SRC:-}" ]; then
        SCALASCA_SRC=$cache/src
        [ -d "$SCALASCA_SRC" ] || git clone --depth 1 "${SCALASCA_GIT:-https://github.com/OpenCMISS-Dependencies2/scalasca}" "$SCALASCA_SRC"
    fi
    # The snapshot keeps no file modes and leaves out the error-code headers a release
    # tarball carries: scripts are made executable and the headers generated from the
    # *.errors lists (OTF2 and CubeW ship generated copies for Windows builds).
    find "$SCALASCA_SRC" \( -name '*.sh' -o -name '*.py' -o -name configure -o -path '*build-config*' \) -type f -exec chmod u+x {} +
    mkdir -p "$cache/build" && cd "$cache/build"
    "$SCALASCA_SRC/configure" --prefix="$cache/install" --with-mpi=openmpi --without-otf2 > "$cache/configure.log" 2>&1
    # The vendored packages configure as the build reaches them: after each stop, put in the
    # headers of those configured so far and go on.
    put() { [ -d "$(dirname "$2")" ] && [ ! -e "$2.done" ] && cp "$1" "$2" && touch "$2.done" || true; }
    for attempt in 1 2 3 4 5; do
        put "$SCALASCA_SRC/vendor/otf2/contrib-build-vs/otf2/OTF2_ErrorCodes.h" vendor/otf2/include/otf2/OTF2_ErrorCodes.h
        put "$SCALASCA_SRC/vendor/otf2/contrib-build-vs/otf2_error_decls.gen.h" vendor/otf2/src/otf2_error_decls.gen.h
        put "$SCALASCA_SRC/vendor/cubew/vendor/windows/include/CubeWErrorCodes.h" vendor/cubew/include/cubew/CubeWErrorCodes.h
        mkdir -p vendor/cubew/src
        put "$SCALASCA_SRC/vendor/cubew/vendor/windows/include/cubew_error_decls.gen.h" vendor/cubew/src/cubew_error_decls.gen.h
        if [ -e src/ScalascaErrorCodes.h ] && [ ! -e src/ScalascaErrorCodes.h.done ]; then
            python3 "$repo/tests/scalasca/error_codes.py" "$SCALASCA_SRC/share/scalasca.errors" \
                src/ScalascaErrorCodes.h src/scalasca_error_decls.gen.h SCALASCA
            touch src/ScalascaErrorCodes.h.done
        fi
        if make -j2 > "$cache/make.log" 2>&1; then break; fi
        [ "$attempt" = 5 ] && { tail -30 "$cache/make.log"; exit 1; }
    done
    make install > "$cache/install.log" 2>&1
fi
scout=$cache/install/bin/scout.mpi

# 2. The Cube reader.
[ -x "$cache/venv/bin/python" ] || python3 -m venv "$cache/venv"
"$cache/venv/bin/python" -c 'import pycubexr' 2>/dev/null || "$cache/venv/bin/pip" install -q 'pycubexr==2.1.1'

# 3. commdb, to generate the traces (COMMDB=path uses a binary built already).
cd "$repo"
if [ -z "${COMMDB:-}" ]; then
    cargo build -q --bin commdb
    COMMDB=${CARGO_TARGET_DIR:-$repo/target}/debug/commdb
fi
commdb=$COMMDB

metrics="time mpi_finalize_wait mpi_latesender mpi_latereceiver mpi_wait_nxn mpi_barrier_wait mpi_latebroadcast mpi_earlyreduce mpi_earlyscan critical_path delay_latesender delay_latesender_longterm delay_latereceiver delay_latereceiver_longterm delay_barrier delay_barrier_longterm delay_n2n delay_n2n_longterm delay_12n delay_12n_longterm delay_n21 delay_n21_longterm"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
while read -r name ranks source; do
    case "$name" in ''|'#'*) continue ;; esac
    dir=$work/$name
    case "$source" in
        generate:*)
            args=$(echo "${source#generate:}" | tr ',' '\n' | sed -E 's/^([a-z-]+)=(.*)$/--\1 \2/; s/^([a-z-]+)$/--\1/' | tr '\n' ' ')
            # shellcheck disable=SC2086
            "$commdb" generate "$dir" $args --format otf2 > /dev/null 2>&1 < /dev/null ;;
        shapes:*)
            # shellcheck disable=SC2046
            /usr/bin/python3 "$repo/tests/scalasca/make_shapes.py" "$dir" $(echo "${source#shapes:}" | tr : " ") ;;
        shared:*)
            # Scalasca writes its report beside the archive: analyse a copy.
            cp -r "$repo/../shared/data/${source#shared:}" "$dir" ;;
    esac
    (cd "$dir" && mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$scout" traces.otf2 > scout.log 2>&1 < /dev/null) || {
        echo "$name: scout failed:"; tail -20 "$dir/scout.log"; exit 1; }
    {
        echo "# Scalasca 2.6 scout.mpi on $source ($ranks ranks); regenerate with tests/scalasca/oracle.sh"
        # shellcheck disable=SC2086
        "$cache/venv/bin/python" "$repo/tests/scalasca/extract.py" "$dir/scout.cubex" $metrics
    } > "$out/$name.csv"
    echo "$name: $(($(wc -l < "$out/$name.csv") - 2)) values"
done < "$out/traces.txt"
# 4. The hybrid analyzer on MPI + OpenMP archives, OMP_NUM_THREADS at the archive's threads.
hyb=$cache/install/bin/scout.hyb
hybrid_metrics="time mpi_latesender mpi_latereceiver mpi_wait_nxn mpi_barrier_wait omp_fork omp_management omp_ebarrier_wait omp_ibarrier_wait omp_lock_contention_critical omp_lock_contention_api critical_path delay_latesender delay_latesender_longterm delay_latereceiver delay_latereceiver_longterm delay_barrier delay_barrier_longterm delay_n2n delay_n2n_longterm delay_12n delay_12n_longterm delay_n21 delay_n21_longterm delay_ompbarrier delay_ompbarrier_longterm delay_ompidle delay_ompidle_longterm"
while read -r name ranks threads source; do
    case "$name" in ''|'#'*) continue ;; esac
    dir=$work/hybrid_$name
    case "$source" in
        data:*) cp -r "$repo/tests/data/${source#data:}" "$dir" ;;
        without-gpu:*)
            /usr/bin/python3 "$repo/tests/otf2/without_gpu.py" "$repo/../shared/data/${source#without-gpu:}/traces.otf2" "$dir" > /dev/null ;;
        generate:*)
            args=$(echo "${source#generate:}" | tr ',' '\n' | sed -E 's/^([a-z-]+)=(.*)$/--\1 \2/; s/^([a-z-]+)$/--\1/' | tr '\n' ' ')
            # shellcheck disable=SC2086
            "$commdb" generate "$dir" $args --format otf2 > /dev/null 2>&1 < /dev/null ;;
        script:*)
            # shellcheck disable=SC2046
            /usr/bin/python3 "$repo/tests/otf2/$(echo "${source#script:}" | cut -d: -f1)" "$dir" $(echo "${source#script:}" | cut -d: -f2- -s | tr : " ") ;;
    esac
    (cd "$dir" && OMP_NUM_THREADS=$threads mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$hyb" traces.otf2 > scout.log 2>&1 < /dev/null) || {
        echo "hybrid $name: scout.hyb failed:"; tail -20 "$dir/scout.log"; exit 1; }
    {
        echo "# Scalasca 2.6 scout.hyb on $source ($ranks ranks x $threads threads); regenerate with tests/scalasca/oracle.sh"
        # shellcheck disable=SC2086
        "$cache/venv/bin/python" "$repo/tests/scalasca/extract.py" "$dir/scout.cubex" $hybrid_metrics
    } > "$out/hybrid_$name.csv"
    echo "hybrid $name: $(($(wc -l < "$out/hybrid_$name.csv") - 2)) values"
done < "$out/hybrid.txt"
