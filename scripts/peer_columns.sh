# Sourced by the heap-check tables (scripts/corruption.sh, scripts/security.sh).
# peer_columns: sets the array COLUMNS_ to "glibc|" and a "name|LD_PRELOAD=lib" entry for each
# peer allocator Debian installs (scripts/setup.sh). A peer whose library is missing is left
# out with a warning: a preload that cannot be loaded is ignored by the loader, and its column
# would silently repeat glibc's.
peer_columns() {
    local libdir=/usr/lib/x86_64-linux-gnu spec lib
    COLUMNS_=("glibc|")
    for spec in mimalloc:libmimalloc.so.2 jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4; do
        lib=$libdir/${spec#*:}
        if [[ -f $lib ]]; then COLUMNS_+=("${spec%%:*}|LD_PRELOAD=$lib")
        else echo "WARNING: $lib not found; skipping ${spec%%:*} (install with: bash scripts/setup.sh)" >&2; fi
    done
}
