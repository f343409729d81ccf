#!/usr/bin/env bash
# Builds mimalloc 3 as an LD_PRELOAD library, target/peers/libmimalloc3.so, and prints its path.
# Debian ships only mimalloc 2.0.9 (libmimalloc2.0); the libmimalloc-sys crate vendors the
# newest mimalloc sources (c_src/mimalloc/v3, selected when its feature "v2" is off). A
# throwaway Cargo project that depends on the crate makes cargo fetch it into the registry
# cache; `cargo metadata` says where. The sources are compiled the way the crate's build.rs
# compiles them with its "override" feature (MI_MALLOC_OVERRIDE, -fno-builtin-malloc,
# initial-exec TLS, MI_DEBUG=0, release), as a shared library instead of a static one.
# Idempotent: does nothing when the library is newer than this script.
#   MIMALLOC_SYS_VERSION=0.1.49 (default: the newest compatible with that requirement)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$ROOT/target/peers
LIB=$OUT/libmimalloc3.so
VER=${MIMALLOC_SYS_VERSION:-0.1.49}
if [[ -f $LIB && $LIB -nt ${BASH_SOURCE[0]} ]]; then echo "$LIB"; exit 0; fi
mkdir -p "$OUT"
PROJ=$OUT/mimalloc3-fetch
mkdir -p "$PROJ/src"
cat >"$PROJ/Cargo.toml" <<TOML
[package]
name = "mimalloc3-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
libmimalloc-sys = { version = "$VER", default-features = false }

[workspace]
TOML
echo 'fn main() {}' >"$PROJ/src/main.rs"
# cargo fetch downloads only when the crate is not cached yet.
cargo fetch --quiet --manifest-path "$PROJ/Cargo.toml" >&2
MANIFEST=$(cargo metadata --quiet --format-version 1 --manifest-path "$PROJ/Cargo.toml" |
    python3 -c 'import json, sys
pkgs = json.load(sys.stdin)["packages"]
print(next(p["manifest_path"] for p in pkgs if p["name"] == "libmimalloc-sys"))')
SRC=$(dirname "$MANIFEST")/c_src/mimalloc/v3
[[ -f $SRC/src/static.c ]] || { echo "ERROR: no $SRC/src/static.c" >&2; exit 1; }
echo "building $LIB from $SRC ($(grep -o 'MI_MALLOC_VERSION [0-9]*' "$SRC/include/mimalloc.h"))" >&2
gcc -shared -fPIC -O3 -std=gnu11 -DMI_MALLOC_OVERRIDE -fno-builtin-malloc -ftls-model=initial-exec \
    -DMI_DEBUG=0 -DMI_BUILD_RELEASE -DNDEBUG -Wno-error=date-time \
    -I "$SRC/include" -I "$SRC/src" -o "$LIB.tmp" "$SRC/src/static.c" -lpthread
mv "$LIB.tmp" "$LIB"
echo "$LIB"
