//! Heap corruption: the programs of `tests/c/corruption/`, one wrong use of the heap each (a
//! double free, a free of a pointer that is no block, a write before a block, ...), run with
//! the library in markers mode (each program runs in a region) and in process mode. Each one
//! the library must catch ends with an abort and one line on stderr naming the block, or with
//! the right value ("caught"); `scripts/corruption.sh` prints the whole table beside glibc,
//! mimalloc, jemalloc and tcmalloc. The library's heap-debug build (guards, poison and a
//! quarantine: `src/debug_heap.rs`) must catch every one of them, and lose no byte of a live
//! block while threads free into it at once.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

/// Caught in both modes.
const CAUGHT: &[&str] = &[
    "calloc_overflow",
    "double_free_across_region_end",
    "double_free_after_realloc",
    "double_free_large",
    "double_free_large_delayed",
    "double_free_remote",
    "double_free_remote_last",
    "double_free_small",
    "double_free_small_delayed",
    "free_foreign_mapping",
    "free_global",
    "free_stack",
    "free_unallocated_far",
    "free_unallocated_neighbour",
    "impossibly_large_malloc",
    "interior_free_large",
    "realloc_of_freed",
    "unaligned_free_large",
    "unaligned_free_small",
    "usable_size_interior",
    "usable_size_of_freed",
    "usable_size_unaligned",
];

/// Caught in markers mode, where a small block has a header in the arena. In process mode the
/// small-block heap keeps none, so what lies before a block is the end of another block.
const CAUGHT_IN_MARKERS_MODE: &[&str] = &[
    "header_size_grown",
    "header_underflow_byte",
    "header_underflow_last",
    "header_underflow_realloc",
    "header_underflow_word",
    "interior_free_small",
    "overflow_into_next_block",
    "overflow_next_block_freed_first",
    "write_zero_size",
];

/// A pointer the library does not own goes to the next allocator (glibc), which faults on these
/// as it does without the library: counted as caught, not asserted here.
const LEFT_TO_THE_NEXT_ALLOCATOR: &[&str] = &[
    "free_protected_mapping",
    "free_wild",
    "realloc_wild",
    "usable_size_wild",
];

/// The programs, compiled once per test binary (the tests run at once, and a program being
/// written cannot be run).
fn programs() -> &'static [(String, PathBuf)] {
    static PROGRAMS: OnceLock<Vec<(String, PathBuf)>> = OnceLock::new();
    PROGRAMS.get_or_init(compile_programs)
}

fn compile_programs() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/corruption");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let src = entry.unwrap().path();
        if src.extension().is_none_or(|e| e != "c") {
            continue;
        }
        let name = src.file_stem().unwrap().to_string_lossy().into_owned();
        let exe = work_dir().join(format!("corruption_{name}"));
        // -O0: every wrong access stays in the program as written.
        let status = Command::new("cc")
            .args(["-O0", "-g", "-w", "-fno-builtin", "-pthread"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .args(["-ldl", "-lstdc++"])
            .status()
            .expect("cc");
        assert!(status.success(), "compiling {}", src.display());
        out.push((name, exe));
    }
    out.sort();
    out
}

#[test]
fn corrupting_programs_are_caught_with_one_line_naming_the_block() {
    let all = programs();
    assert_eq!(all.len(), 44, "the suite has 44 programs");
    for name in CAUGHT
        .iter()
        .chain(CAUGHT_IN_MARKERS_MODE)
        .chain(LEFT_TO_THE_NEXT_ALLOCATOR)
    {
        assert!(all.iter().any(|(n, _)| n == name), "{name} is in no file");
    }
    for process in [false, true] {
        let env: &[(&str, &str)] = if process {
            &[("RESIZEALLOC_REGION", "process")]
        } else {
            &[]
        };
        let mode = if process { "process" } else { "markers" };
        let mut caught = 0;
        for (name, exe) in all {
            let out = preloaded(Command::new(exe), env);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            let signal = out.status.signal();
            let was_caught = stdout.trim() == "caught" || signal.is_some();
            caught += was_caught as usize;
            let required = CAUGHT.contains(&name.as_str())
                || (!process && CAUGHT_IN_MARKERS_MODE.contains(&name.as_str()));
            if !required {
                continue;
            }
            assert!(
                was_caught,
                "{name}, {mode} mode: not caught: {:?}\nstdout: {stdout}\nstderr: {stderr}",
                out.status
            );
            if signal.is_some() {
                assert_eq!(
                    signal,
                    Some(libc_sigabrt()),
                    "{name}, {mode} mode: {stderr}"
                );
                assert_eq!(stderr.lines().count(), 1, "{name}, {mode} mode: {stderr}");
                // The builds with checks (debug, check-invariants) may find the damage first,
                // in their walk of the arena after an operation.
                assert!(
                    !stderr.starts_with("resizealloc:")
                        || stderr.contains(": block 0x")
                        || stderr.starts_with("resizealloc: arena invariant broken"),
                    "{name}, {mode} mode: the line names no block: {stderr}"
                );
            }
        }
        assert!(caught >= 26, "{mode} mode: {caught} of 44 caught");
    }
}

/// The heap-debug build catches all 44, in both modes, each with a fault or one line (naming
/// the block where the library caught it).
#[test]
fn the_heap_debug_build_catches_every_program() {
    let so = heap_debug_library();
    let all = programs();
    for env in [&[][..], &[("RESIZEALLOC_REGION", "process")][..]] {
        for (name, exe) in all {
            let out = preloaded_with(so, Command::new(exe), env);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            let signal = out.status.signal();
            assert!(
                stdout.trim() == "caught" || signal.is_some(),
                "{name} {env:?}: not caught: {:?}\nstdout: {stdout}\nstderr: {stderr}",
                out.status
            );
            if signal == Some(libc_sigabrt()) {
                assert_eq!(stderr.lines().count(), 1, "{name} {env:?}: {stderr}");
                assert!(
                    !stderr.starts_with("resizealloc:") || stderr.contains(": block 0x"),
                    "{name} {env:?}: the line names no block: {stderr}"
                );
            }
        }
    }
}

/// Threads that free at once into a full quarantine keep every block whole (each is given back
/// to its heap exactly once).
#[test]
fn the_heap_debug_quarantine_takes_frees_from_many_threads() {
    let exe = compile_as("quarantine_threads", "quarantine_threads", false);
    for env in [&[][..], &[("RESIZEALLOC_REGION", "process")][..]] {
        let out = preloaded_with(heap_debug_library(), Command::new(&exe), env);
        assert_ok(&out, &format!("quarantine_threads.c {env:?}"));
    }
}
