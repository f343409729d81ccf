#!/usr/bin/env bash
# Checks that resizealloc installs the way users install allocators, from the packages alone:
#   1. Rust: every crate of the workspace passes `cargo publish --dry-run`, and a new project
#      that depends on the packaged crate (unpacked from its .crate) builds and runs with
#      `#[global_allocator]`, a region and a `#[resizealloc::region] async fn`;
#   2. C: scripts/install.sh into a fresh prefix; examples/c/app.c builds with the README's
#      pkg-config line and runs against the installed library, then runs unmodified under
#      LD_PRELOAD of a second build (one copy loaded: the preloaded one); Python's ctypes
#      reaches the installed library by its SONAME, and a preloaded one through CDLL(None);
#   3. Python: the wheel (built by scripts/python_env.sh) installs into a fresh virtualenv
#      with no Rust on PATH and no source build, and the package's tests run against it,
#      from outside the source tree.
# Run by scripts/test.sh after the debug builds (target/debug and target/twins/debug).
#   ONLY="rust c python"   the parts to run
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ONLY=${ONLY:-rust c python}
WORK=$ROOT/target/package-check
rm -rf "$WORK"
mkdir -p "$WORK"
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
MAJOR=${VERSION%%.*}
fail() { echo "package_check: $*" >&2; exit 1; }

if [[ " $ONLY " == *" rust "* ]]; then
    # --allow-dirty: a working copy with edits still checks what it would publish.
    cargo publish --workspace --dry-run --allow-dirty
    # (the dry run leaves the .crate files in target/package/tmp-crate)
    CRATES=target/package/tmp-crate
    for c in resizealloc resizealloc-macros resizealloc-preload; do
        crate=$CRATES/$c-$VERSION.crate
        [[ -f $crate ]] || fail "$crate was not made"
        if tar tzf "$crate" | grep -E '/(benches|examples|tests|scripts|python)/' >/dev/null; then
            fail "$crate ships benchmarks, examples, tests or scripts: $(tar tzf "$crate" | grep -E '/(benches|examples|tests|scripts|python)/' | head -3)"
        fi
    done
    tar xzf "$CRATES/resizealloc-$VERSION.crate" -C "$WORK"
    tar xzf "$CRATES/resizealloc-macros-$VERSION.crate" -C "$WORK"
    APP=$WORK/rust-app
    mkdir -p "$APP/src"
    cat >"$APP/Cargo.toml" <<TOML
[package]
name = "adopter"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
resizealloc = { path = "$WORK/resizealloc-$VERSION" }
tokio = { version = "1", features = ["rt-multi-thread"] }

[workspace]

# Until it is on crates.io: the packaged attribute crate the packaged core depends on.
[patch.crates-io]
resizealloc-macros = { path = "$WORK/resizealloc-macros-$VERSION" }
TOML
    cat >"$APP/src/main.rs" <<'RS'
use resizealloc::{region, stats, ResizeAlloc};

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

#[resizealloc::region]
async fn shout(s: String) -> String {
    s.to_uppercase()
}

fn main() {
    let mut kept = Vec::new();
    for step in 0..1000u64 {
        let total: u64 = region(|| {
            let v: Vec<u64> = (0..100).map(|x| x + step).collect();
            if step % 100 == 0 {
                kept.push(format!("step {step}")); // escapes the region: stays valid
            }
            v.iter().sum()
        });
        assert_eq!(total, 4950 + 100 * step);
    }
    assert_eq!(kept[3], "step 300");
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(rt.block_on(shout("adopted".to_string())), "ADOPTED");
    let s = stats().thread;
    assert!(s.region_allocs >= 1000, "{s:?}");
    println!("adopter: {} region allocations, capacity {} B", s.region_allocs, s.arena_capacity);
}
RS
    # The workspace's lock file pins the same dependency versions (and works offline).
    cp Cargo.lock "$APP/Cargo.lock"
    (cd "$APP" && CARGO_TARGET_DIR="$WORK/rust-target" cargo run -q) | tee "$WORK/rust-app.out"
    grep -q '^adopter: ' "$WORK/rust-app.out" || fail "the packaged crate's program printed nothing"
fi

if [[ " $ONLY " == *" c "* ]]; then
    SO=$ROOT/target/debug/libresizealloc.so
    SECOND=$ROOT/target/twins/debug/libresizealloc.so
    [[ -f $SO && -f $SECOND ]] || fail "build target/debug and target/twins/debug first (scripts/test.sh)"
    # The README's requirement: glibc 2.34 or later (the newest symbol version the library needs).
    newest=$(objdump -T "$SO" | grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sort -uV | tail -1)
    [[ $newest == GLIBC_2.34 ]] || fail "the library needs $newest; README.md and preload/README.md say glibc 2.34"
    PREFIX=$WORK/prefix
    SO=$SO bash scripts/install.sh "$PREFIX"
    for f in lib/libresizealloc.so.$VERSION lib/libresizealloc.so.$MAJOR lib/libresizealloc.so \
        include/resizealloc.h lib/pkgconfig/resizealloc.pc; do
        [[ -e $PREFIX/$f ]] || fail "install.sh did not install $f"
    done
    export PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig
    [[ $(pkg-config --modversion resizealloc) == "$VERSION" ]] || fail "pkg-config reads another version"
    # The README's line, word for word but for the paths.
    cc -O2 examples/c/app.c $(pkg-config --cflags --libs resizealloc) \
        -Wl,-rpath,"$(pkg-config --variable=libdir resizealloc)" -o "$WORK/app"
    readelf -d "$WORK/app" | grep -q "NEEDED.*\[libresizealloc.so.$MAJOR\]" \
        || fail "app does not record libresizealloc.so.$MAJOR"
    "$WORK/app" | tee "$WORK/app.out"
    grep -q "^resizealloc $VERSION: " "$WORK/app.out" || fail "app did not run against the installed library"
    # The same binary under LD_PRELOAD of a second build: one copy, the preloaded one.
    LD_PRELOAD=$SECOND "$WORK/app" | tee "$WORK/app.preload.out"
    loaded=$(LD_PRELOAD=$SECOND LD_TRACE_LOADED_OBJECTS=1 "$WORK/app" | grep libresizealloc || true)
    [[ $(grep -c . <<<"$loaded") == 1 && $loaded == *"$SECOND"* ]] \
        || fail "app under LD_PRELOAD loads, of the library: $loaded"
    # ctypes by the SONAME, and CDLL(None) when preloaded.
    LD_LIBRARY_PATH=$PREFIX/lib python3 -c '
import ctypes
lib = ctypes.CDLL("libresizealloc.so.'"$MAJOR"'")
lib.resize_region_begin(); assert lib.resize_region_depth() == 1; assert lib.resize_region_end() == 0
print("ctypes.CDLL(\"libresizealloc.so.'"$MAJOR"'\"): ok")'
    LD_PRELOAD=$PREFIX/lib/libresizealloc.so.$MAJOR python3 -c '
import ctypes
lib = ctypes.CDLL(None)
lib.resize_region_begin(); x = bytearray(1 << 16); assert lib.resize_region_depth() == 1; assert lib.resize_region_end() == 0
print("ctypes.CDLL(None) under LD_PRELOAD: ok")'
fi

if [[ " $ONLY " == *" python "* ]]; then
    shopt -s nullglob
    wheels=(target/wheels/resizealloc-*.whl)
    [[ ${#wheels[@]} == 1 ]] || fail "want one wheel in target/wheels (scripts/python_env.sh builds it), found ${#wheels[@]}"
    WHEEL=$ROOT/${wheels[0]}
    case $(basename "$WHEEL") in
        *-manylinux_*_x86_64.whl | *-manylinux2014_x86_64.whl) ;;
        *) fail "$(basename "$WHEEL") has no manylinux tag" ;;
    esac
    VENV=$WORK/venv
    python3 -m venv "$VENV"
    # No Rust on PATH and binaries only: the wheel must install as it is.
    NORUST_PATH=$VENV/bin:/usr/local/bin:/usr/bin:/bin
    env -u CARGO_HOME -u RUSTUP_HOME PATH="$NORUST_PATH" "$VENV/bin/python" -m pip install -q \
        --disable-pip-version-check --only-binary=:all: "$WHEEL" numpy pytest hypothesis meson ninja
    if PATH="$NORUST_PATH" bash -c 'command -v cargo || command -v rustc' >/dev/null; then
        fail "Rust is on the no-Rust PATH $NORUST_PATH"
    fi
    where=$(cd "$WORK" && "$VENV/bin/python" -c 'import resizealloc, numpy
with resizealloc.region():
    a = numpy.ones(1 << 16).sum()
assert a == 1 << 16
print(resizealloc.__file__)')
    [[ $where == "$VENV"/* ]] || fail "resizealloc imported from $where, not the fresh virtualenv"
    # The tests, copied out of the source tree so that nothing but the wheel can be imported.
    cp -r python/tests "$WORK/tests"
    (cd "$WORK" && env PATH="$NORUST_PATH" RESIZEALLOC_TEST_LIB="$ROOT/target/debug/libresizealloc.so" \
        "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests)
fi
echo "package_check: ${ONLY// /, }: ok"
