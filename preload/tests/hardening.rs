//! Hardening: the library opened and closed with `dlopen`/`dlclose`, C++'s sized deletes, the
//! glibc extensions of the malloc family (`__libc_*`, `mallinfo`, `malloc_trim`, `malloc_stats`,
//! `malloc_info`, ...), and the CUDA hooks in a process without CUDA. Each C program under
//! `tests/c/` is run with the library preloaded and, where glibc is the reference, without it.
//!
//! The library is the one cargo built for this test run (`target/<profile>/libresizealloc.so`),
//! or `$RESIZEALLOC_SO` when set (`common/mod.rs`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::*;

// ------------------------------------------------------------------------------ dlclose

/// The library registers a pthread key destructor; unloading it would leave the destructor
/// pointing into unmapped code. It is linked with `-z nodelete`, so `dlclose` keeps it mapped.
#[test]
fn dlclose_leaves_later_thread_exits_working() {
    let exe = compile_as("dlclose", "dlclose", false);
    let out = Command::new(&exe).arg(library()).output().unwrap();
    assert_ok(&out, "dlclose.c");
}

// ------------------------------------------------------------------------------ C++ sized deletes

/// `tests/c/sized_delete.cpp`, compiled with the sized deletes C++14 emits (`-DREPLACED`: with
/// the program's own `operator new` and `operator delete(void *)`).
fn sized_delete_program(replaced: bool) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let name = if replaced {
        "sized_delete_replaced"
    } else {
        "sized_delete"
    };
    let exe = work_dir().join(name);
    let mut cxx = Command::new("c++");
    cxx.args(["-O1", "-g", "-Wall", "-std=c++17", "-fsized-deallocation"]);
    if replaced {
        cxx.arg("-DREPLACED");
    }
    let status = cxx
        .arg(manifest.join("tests/c/sized_delete.cpp"))
        .arg("-o")
        .arg(&exe)
        .arg("-ldl")
        .status()
        .expect("c++");
    assert!(status.success(), "compiling sized_delete.cpp");
    exe
}

/// C++ objects of every heap are freed by the sized deletes, in both modes: the C++ runtime's
/// under the library, the size-checking ones of its heap-debug build (`src/cxx.rs`) under that.
/// A program that replaces `operator new` and `operator delete(void *)` keeps its own (whose
/// pointers are no block's start, and must not be checked).
#[test]
fn sized_deletes_free_every_object_and_keep_replaced_operators() {
    for so in [library().as_path(), heap_debug_library()] {
        for replaced in [false, true] {
            let exe = sized_delete_program(replaced);
            for env in [&[][..], &[("RESIZEALLOC_REGION", "process")][..]] {
                let out = preloaded_with(so, Command::new(&exe), env);
                let what = format!(
                    "sized_delete.cpp ({}, replaced {replaced}, {env:?})",
                    so.display()
                );
                assert_ok(&out, &what);
            }
        }
    }
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

/// `__libc_free` of an arena block must be the library's free: glibc's would abort (`free():
/// invalid pointer`).
#[test]
fn libc_names_are_the_library_s_own_functions() {
    for preload in [false, true] {
        let out = compat("libc", preload);
        assert_ok(&out, &format!("glibc_compat libc, preload {preload}"));
    }
}

/// `mallinfo`/`mallinfo2` and `resize_stats_get` see 50 MiB of live blocks in a region, and the
/// blocks of each of the arena's fast paths at once (`glibc_compat.c`).
#[test]
fn mallinfo_counts_the_arenas() {
    for preload in [false, true] {
        let out = compat("mallinfo", preload);
        assert_ok(&out, &format!("glibc_compat mallinfo, preload {preload}"));
    }
}

#[test]
fn malloc_trim_trims_the_arenas() {
    for preload in [false, true] {
        let out = compat("trim", preload);
        assert_ok(&out, &format!("glibc_compat trim, preload {preload}"));
    }
}

#[test]
fn malloc_stats_reports_the_arenas_after_glibc() {
    let plain = compat("stats", false);
    assert_ok(&plain, "glibc_compat stats");
    let glibc_total = "Total (incl. mmap):";
    assert!(
        text(&plain.stderr).contains(glibc_total),
        "{}",
        text(&plain.stderr)
    );
    let out = compat("stats", true);
    assert_ok(&out, "glibc_compat stats, preloaded");
    let err = text(&out.stderr);
    let (glibc, ours) = (err.find(glibc_total), err.find("resizealloc arenas:"));
    assert!(
        matches!((glibc, ours), (Some(g), Some(o)) if g < o),
        "glibc's report, then the arenas': {err}"
    );
    let committed: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("committed bytes  ="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no committed bytes line: {err}"));
    assert!(
        committed >= 1 << 20,
        "a 1 MiB block is live in the arena: {err}"
    );
}

#[test]
fn malloc_stats_reports_the_small_block_heap() {
    // Process mode with the arena's size bound at 1 byte: every small block is the heap's.
    let mut cmd = Command::new(glibc_compat());
    cmd.arg("stats");
    let out = preloaded(
        cmd,
        &[
            ("RESIZEALLOC_REGION", "process"),
            ("RESIZEALLOC_MAX_SIZE", "1"),
        ],
    );
    assert_ok(&out, "glibc_compat stats, process mode");
    let err = text(&out.stderr);
    let field = |name: &str| -> u64 {
        err.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim_start_matches([' ', '=']).trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name:?} line: {err}"))
    };
    assert!(
        field("pages in use") >= 1,
        "2000 blocks of 64 B are live in the heap: {err}"
    );
    assert!(field("bytes in pages") >= 2000 * 64, "{err}");
}

/// Parses `xml` with Python's XML parser; returns the root tag, the number of `<heap>`
/// children, and the `committed` attribute of every `<resizealloc>` child.
fn parse_malloc_info(xml: &[u8]) -> (String, usize, Vec<u64>) {
    let script = work_dir().join("parse_malloc_info.py");
    std::fs::write(
        &script,
        r#"
import sys, xml.etree.ElementTree as ET
root = ET.fromstring(sys.stdin.buffer.read())
print(root.tag, len(root.findall("heap")), *[e.get("committed") for e in root.findall("resizealloc")])
"#,
    )
    .unwrap();
    let xml_file = work_dir().join("malloc_info.xml");
    std::fs::write(&xml_file, xml).unwrap();
    let out = Command::new("python3")
        .arg(&script)
        .stdin(std::fs::File::open(&xml_file).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "not a well-formed XML document:\n{}\n{}",
        text(xml),
        text(&out.stderr)
    );
    let line = text(&out.stdout);
    let mut words = line.split_whitespace();
    let root = words.next().unwrap().to_string();
    let heaps = words.next().unwrap().parse().unwrap();
    (root, heaps, words.map(|w| w.parse().unwrap()).collect())
}

#[test]
fn malloc_info_is_one_xml_document_with_the_arenas() {
    let plain = compat("info", false);
    assert_ok_on_stderr(&plain, "glibc_compat info");
    let (root, heaps, ours) = parse_malloc_info(&plain.stdout);
    assert_eq!((root.as_str(), ours.len()), ("malloc", 0));
    assert!(heaps >= 1);
    let out = compat("info", true);
    assert_ok_on_stderr(&out, "glibc_compat info, preloaded");
    let (root, heaps, ours) = parse_malloc_info(&out.stdout);
    assert_eq!(root, "malloc", "glibc's root element");
    assert!(heaps >= 1, "glibc's heaps are still there");
    assert_eq!(
        ours.len(),
        1,
        "one <resizealloc/> element: {}",
        text(&out.stdout)
    );
    assert!(ours[0] >= 1 << 20, "a 1 MiB block is live in the arena");
}

fn assert_ok_on_stderr(out: &Output, what: &str) {
    assert!(
        out.status.success() && text(&out.stderr).contains("all ok"),
        "{what} failed: {:?}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
}

/// `mallopt` (glibc's), `malloc_usable_size` of the next allocator's blocks and
/// `posix_memalign`'s errors answer exactly as on plain glibc.
#[test]
fn mallopt_usable_size_and_posix_memalign_match_glibc() {
    let plain = compat("same", false);
    assert_ok(&plain, "glibc_compat same");
    let out = compat("same", true);
    assert_ok(&out, "glibc_compat same, preloaded");
    assert_eq!(text(&plain.stdout), text(&out.stdout));
    let t = text(&plain.stdout);
    assert!(
        t.contains("posix_memalign(align 4) = 22, errno 0, out untouched"),
        "{t}"
    );
}

/// Blocks the library served from its bootstrap buffer (while it looked up the next allocator):
/// `malloc_usable_size`, `realloc`, `free` and `__libc_free` accept them. A shim preloaded in
/// front of the library makes its `dlsym` lookup allocate (see `tests/c/boot_shim.c`).
#[test]
fn bootstrap_blocks_are_valid_blocks_for_the_whole_family() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shim = work_dir().join("boot_shim.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-o"])
        .arg(&shim)
        .arg(manifest.join("tests/c/boot_shim.c"))
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(status.success(), "building boot_shim.so");
    let mut cmd = Command::new(glibc_compat());
    cmd.arg("boot").env(
        "LD_PRELOAD",
        format!("{} {}", shim.display(), library().display()),
    );
    let out = cmd.output().unwrap();
    assert_ok(&out, "glibc_compat boot");
}

// ------------------------------------------------------------------------------ CUDA absent

/// In a process with no CUDA driver or runtime (nothing on the library path either), a probe
/// by symbol must not find the library's CUDA exports as if a driver were there: `dlsym`
/// answers as without the library, and the hooks, reached through weak references, answer
/// what cudart and the driver answer without a driver (35; 3 before `cuInit`, 100 from it
/// on). See `tests/c/cuda/absent.c`.
#[test]
fn a_process_without_cuda_does_not_look_like_it_has_cuda() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = work_dir().join("cuda_absent");
    let status = Command::new("cc")
        .args(["-O1", "-Wall", "-o"])
        .arg(&exe)
        .arg(manifest.join("tests/c/cuda/absent.c"))
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(status.success(), "building absent.c");
    let probes = |out: &Output| -> Vec<String> {
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("dlsym"))
            .map(str::to_string)
            .collect()
    };
    let mut plain = Command::new(&exe);
    plain.env_remove("LD_LIBRARY_PATH");
    let plain = plain.output().unwrap();
    assert_ok(&plain, "absent.c without the library");
    assert!(probes(&plain).iter().all(|l| l.ends_with(" absent")));
    let envs: [&[(&str, &str)]; 3] = [
        &[],
        &[("RESIZEALLOC_CUDA", "off")],
        &[("RESIZEALLOC_REGION", "process")],
    ];
    for env in envs {
        let mut cmd = Command::new(&exe);
        cmd.env_remove("LD_LIBRARY_PATH");
        let out = preloaded(cmd, env);
        assert_ok(&out, &format!("absent.c under the library, {env:?}"));
        assert_eq!(probes(&plain), probes(&out), "dlsym probes, {env:?}");
    }
    // Python's probe: attribute lookup on the process's own symbols (dlsym underneath).
    let mut py = Command::new("python3");
    py.env_remove("LD_LIBRARY_PATH").args([
        "-c",
        "import ctypes; p = ctypes.CDLL(None); \
         print([n for n in ('cudaMalloc', 'cudaFree', 'cuInit', 'cuGetProcAddress', \
         'cuGetProcAddress_v2', 'cuMemAlloc_v2') if hasattr(p, n)]); print('all ok')",
    ]);
    let out = preloaded(py, &[]);
    assert_ok(&out, "ctypes probe");
    assert!(text(&out.stdout).starts_with("[]"), "{}", text(&out.stdout));
}
