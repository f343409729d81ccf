//! The differential fuzzer (`tests/c/fuzz.c`), a few seeds, under the library of this test
//! run: each run must check every block it frees and print the summary line plain glibc prints
//! for the same seed, and under the heap-debug build too. `scripts/fuzz.sh` runs it for longer,
//! under the release, the check-invariants and the heap-debug builds.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

fn fuzzer() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile_as("fuzz", "fuzz", false))
}

/// `fuzz SEED 3 4000`: three rounds of 4,000 operations per thread.
fn fuzz(seed: u64, env: &[(&str, &str)], preload: Option<&Path>) -> std::process::Output {
    let mut cmd = Command::new(fuzzer());
    cmd.args([seed.to_string(), "3".into(), "4000".into()]);
    if let Some(so) = preload {
        cmd.env("LD_PRELOAD", so);
    }
    cmd.envs(env.iter().copied());
    cmd.output().expect("spawn fuzz")
}

#[test]
fn random_sequences_agree_with_glibc_in_markers_and_process_mode() {
    agree_with_glibc(&library(), 1..=4);
}

#[test]
fn random_sequences_agree_with_glibc_under_the_heap_debug_build() {
    agree_with_glibc(heap_debug_library(), 5..=6);
}

fn agree_with_glibc(lib: &Path, seeds: std::ops::RangeInclusive<u64>) {
    for seed in seeds {
        let reference = fuzz(seed, &[], None);
        assert!(
            reference.status.success(),
            "fuzz {seed} on glibc: {}",
            text(&reference.stderr)
        );
        let expected = text(&reference.stdout);
        assert!(expected.contains("blocks checked"), "{expected}");
        for env in [&[][..], &[("RESIZEALLOC_REGION", "process")][..]] {
            let out = fuzz(seed, env, Some(lib));
            assert!(
                out.status.success() && text(&out.stdout) == expected,
                "fuzz {seed} {env:?}: {:?}\nstdout: {}\nexpected: {expected}\nstderr: {}",
                out.status,
                text(&out.stdout),
                text(&out.stderr)
            );
        }
    }
}

/// The fuzzer is only worth its runs if it sees a lost byte: over glibc with a realloc that
/// changes one byte once in 200 growths, it stops with one line naming the block.
#[test]
fn the_fuzzer_catches_a_realloc_that_changes_a_byte() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let so = work_dir().join("fuzz_mutant.so");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-Wall", "-shared", "-fPIC"])
        .arg(manifest.join("tests/c/fuzz_mutant.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("cc");
    assert!(status.success(), "compiling fuzz_mutant.c");
    let out = fuzz(1, &[], Some(&so));
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr: {err}");
    assert!(
        err.starts_with("fuzz: SEED=1 thread") && err.contains("pattern lost"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
