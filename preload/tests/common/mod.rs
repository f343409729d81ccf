//! What the integration tests of libresizealloc.so share: finding the library cargo built for
//! this test run (`target/<profile>/libresizealloc.so`, or `$RESIZEALLOC_SO`) and its heap-debug
//! build, a work directory
//! per test binary, compiling the C programs under `tests/c/`, running them preloaded, and
//! checking their "all ok".

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `target/<profile>`, from the test binary at `target/<profile>/deps/<name>-<hash>`.
pub fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The library under test.
pub fn library() -> PathBuf {
    if let Some(p) = std::env::var_os("RESIZEALLOC_SO") {
        return PathBuf::from(p);
    }
    let so = target_profile_dir().join("libresizealloc.so");
    assert!(
        so.exists(),
        "{} is missing: build it with `cargo build -p resizealloc-preload`",
        so.display()
    );
    so
}

/// The `heap-debug` build of the library (guards, poison, quarantine: `src/debug_heap.rs`):
/// `$RESIZEALLOC_HEAP_DEBUG_SO`, else built once per test binary into `target/heap-debug`
/// (its own target directory, so that it does not undo the build under test).
pub fn heap_debug_library() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| {
        if let Some(p) = std::env::var_os("RESIZEALLOC_HEAP_DEBUG_SO") {
            return PathBuf::from(p);
        }
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target = manifest.parent().unwrap().join("target/heap-debug");
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "-q",
                "-p",
                "resizealloc-preload",
                "--features",
                "heap-debug",
            ])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(manifest)
            .status()
            .expect("cargo");
        assert!(status.success(), "building the heap-debug library");
        target.join("debug/libresizealloc.so")
    })
}

/// A directory of this test binary's own (`target/<profile>/<binary>-tests`).
pub fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let stem = exe.file_name().unwrap().to_string_lossy().into_owned();
        let binary = stem.split('-').next().unwrap_or("tests").to_owned();
        let d = target_profile_dir().join(format!("{binary}-tests"));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// Compiles `tests/c/<name>.c` into `<out>` in the work directory; `link_library` links it
/// against the library (otherwise it only sees glibc, and reaches the library by `dlopen` or
/// `LD_PRELOAD`).
pub fn compile_as(name: &str, out: &str, link_library: bool) -> PathBuf {
    compile_with(name, out, link_library, &[])
}

/// [`compile_as`] with `extra` compiler arguments.
pub fn compile_with(name: &str, out: &str, link_library: bool, extra: &[&str]) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = manifest.join("tests/c").join(format!("{name}.c"));
    let exe = work_dir().join(out);
    let mut cc = Command::new("cc");
    // -fno-builtin: gcc would otherwise drop malloc/free pairs whose memory is never used.
    cc.args(["-O1", "-g", "-Wall", "-fno-builtin", "-pthread", "-I"])
        .arg(manifest.join("include"))
        .args(extra)
        .arg(&src)
        .arg("-o")
        .arg(&exe);
    if link_library {
        let dir = library().parent().unwrap().to_path_buf();
        // An old-style rpath (DT_RPATH): it comes before `LD_LIBRARY_PATH`, which `cargo test`
        // points at `target/<profile>`, so that a program links to the library under test when
        // that is `$RESIZEALLOC_SO` (with a DT_RUNPATH it got cargo's too: two copies, each
        // with its own state).
        cc.arg(format!("-L{}", dir.display()))
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .arg("-Wl,--disable-new-dtags")
            .arg("-lresizealloc");
    }
    let status = cc.arg("-ldl").status().expect("cc");
    assert!(status.success(), "compiling {}", src.display());
    exe
}

/// Compiles `tests/c/<name>.c`, linked against the library.
pub fn compile(name: &str) -> PathBuf {
    compile_as(name, name, true)
}

/// Runs `cmd` with the library preloaded plus `env`.
pub fn preloaded(cmd: Command, env: &[(&str, &str)]) -> Output {
    preloaded_with(&library(), cmd, env)
}

/// Runs `cmd` with `so` preloaded plus `env`.
pub fn preloaded_with(so: &Path, mut cmd: Command, env: &[(&str, &str)]) -> Output {
    cmd.env("LD_PRELOAD", so);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The program exited 0 and printed "all ok".
pub fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success() && text(&out.stdout).contains("all ok"),
        "{what} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// SIGABRT's number (6 on Linux), which `abort` ends a process with.
pub fn libc_sigabrt() -> i32 {
    6
}
