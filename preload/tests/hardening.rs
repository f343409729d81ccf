//! Hardening (issue 8): the library opened and closed with `dlopen`/`dlclose`, the glibc
//! extensions of the malloc family (`__libc_*`, `mallinfo`, `malloc_trim`, `malloc_stats`,
//! `malloc_info`, ...), and the CUDA hooks in a process without CUDA. Each C program under
//! `tests/c/` is run with the library preloaded and, where glibc is the reference, without it.
//!
//! The library is the one cargo built for this test run (`target/<profile>/libresizealloc.so`),
//! or `$RESIZEALLOC_SO` when set. The helpers are the ones of `preload.rs`, trimmed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn target_profile_dir() -> PathBuf {
    // target/<profile>/deps/hardening-<hash>
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

fn library() -> PathBuf {
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

fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = target_profile_dir().join("hardening-tests");
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

/// Compiles `tests/c/<name>.c` into `<out>`; `link_library` links it against the library
/// (otherwise it only sees glibc, and reaches the library by `dlopen` or `LD_PRELOAD`).
fn compile_as(name: &str, out: &str, link_library: bool) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = manifest.join("tests/c").join(format!("{name}.c"));
    let exe = work_dir().join(out);
    let mut cc = Command::new("cc");
    // -fno-builtin: gcc would otherwise drop malloc/free pairs whose memory is never used.
    cc.args(["-O1", "-g", "-Wall", "-fno-builtin", "-pthread", "-I"])
        .arg(manifest.join("include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe);
    if link_library {
        let dir = library().parent().unwrap().to_path_buf();
        cc.arg(format!("-L{}", dir.display()))
            .arg(format!("-Wl,-rpath,{}", dir.display()))
            .arg("-lresizealloc");
    }
    let status = cc.arg("-ldl").status().expect("cc");
    assert!(status.success(), "compiling {}", src.display());
    exe
}

/// Runs `cmd` with the library preloaded plus `env`.
fn preloaded(mut cmd: Command, env: &[(&str, &str)]) -> Output {
    cmd.env("LD_PRELOAD", library());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("spawn")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success() && text(&out.stdout).contains("all ok"),
        "{what} failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

// ------------------------------------------------------------------------------ dlclose

/// The library registers a pthread key destructor; unloading it would leave the destructor
/// pointing into unmapped code. It is linked with `-z nodelete`, so `dlclose` keeps it mapped.
#[test]
fn dlclose_leaves_later_thread_exits_working() {
    let exe = compile_as("dlclose", "dlclose", false);
    let out = Command::new(&exe).arg(library()).output().unwrap();
    assert_ok(&out, "dlclose.c");
}

// ------------------------------------------------------------------------------ glibc extensions

fn glibc_compat() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile_as("glibc_compat", "glibc_compat", false))
}

/// Runs `glibc_compat <mode>`, with the library preloaded or on plain glibc.
fn compat(mode: &str, preload: bool) -> Output {
    let mut cmd = Command::new(glibc_compat());
    cmd.arg(mode);
    if preload {
        preloaded(cmd, &[])
    } else {
        cmd.output().expect("spawn")
    }
}

/// `__libc_free` of an arena block used to reach glibc and abort (`free(): invalid pointer`).
#[test]
fn libc_names_are_the_library_s_own_functions() {
    for preload in [false, true] {
        let out = compat("libc", preload);
        assert_ok(&out, &format!("glibc_compat libc, preload {preload}"));
    }
}
