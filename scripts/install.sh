#!/usr/bin/env bash
# Installs libresizealloc for C, C++ and anything that loads shared libraries:
#   PREFIX/lib/libresizealloc.so.X.Y.Z     the library (SONAME libresizealloc.so.X)
#   PREFIX/lib/libresizealloc.so.X         -> libresizealloc.so.X.Y.Z (what programs load)
#   PREFIX/lib/libresizealloc.so           -> libresizealloc.so.X (what -lresizealloc links)
#   PREFIX/include/resizealloc.h
#   PREFIX/lib/pkgconfig/resizealloc.pc    (pkg-config --cflags --libs resizealloc)
# Usage: bash scripts/install.sh PREFIX
#   LIBDIR=dir    where the library and the .pc go (default PREFIX/lib)
#   DESTDIR=dir   staged install for packagers (files land in DESTDIR/PREFIX/...)
#   SO=path       install this build instead of building target/release/libresizealloc.so
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -eq 1 && -n $1 ]] || { echo "usage: bash scripts/install.sh PREFIX" >&2; exit 2; }
PREFIX=$1
[[ $PREFIX == /* ]] || PREFIX=$(cd "$PREFIX" 2>/dev/null && pwd || echo "$PWD/$PREFIX")
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=$PREFIX/include
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/preload/Cargo.toml" | head -1)
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "install: no version in preload/Cargo.toml" >&2; exit 1; }
MAJOR=${VERSION%%.*}
if [[ -z ${SO:-} ]]; then
    (cd "$ROOT" && cargo build --release -p resizealloc-preload)
    SO=$ROOT/target/release/libresizealloc.so
fi
[[ -f $SO ]] || { echo "install: $SO not found" >&2; exit 1; }
soname=$(readelf -d "$SO" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == "libresizealloc.so.$MAJOR" ]] || {
    echo "install: $SO has SONAME '$soname', not libresizealloc.so.$MAJOR (a build of another version?)" >&2
    exit 1
}
D=${DESTDIR:-}
install -d "$D$LIBDIR" "$D$LIBDIR/pkgconfig" "$D$INCLUDEDIR"
install -m 755 "$SO" "$D$LIBDIR/libresizealloc.so.$VERSION"
ln -sfn "libresizealloc.so.$VERSION" "$D$LIBDIR/libresizealloc.so.$MAJOR"
ln -sfn "libresizealloc.so.$MAJOR" "$D$LIBDIR/libresizealloc.so"
install -m 644 "$ROOT/preload/include/resizealloc.h" "$D$INCLUDEDIR/resizealloc.h"
cat >"$D$LIBDIR/pkgconfig/resizealloc.pc" <<PC
prefix=$PREFIX
libdir=$LIBDIR
includedir=$INCLUDEDIR

Name: resizealloc
Description: Resize-arena allocator: region allocations bump from a per-thread arena sized to the peak
URL: https://docs.rs/resizealloc
Version: $VERSION
Libs: -L\${libdir} -lresizealloc
Cflags: -I\${includedir}
PC
echo "installed libresizealloc $VERSION into $D$PREFIX (library in $D$LIBDIR)"
