//! libresizealloc.so under LD_PRELOAD: C programs compiled here cover every export and its edge
//! cases; real programs (python3, sqlite3, xz, sort, git) must give byte-identical output and
//! exit codes with `RESIZEALLOC_REGION=process` as without the library.
//!
//! The library is the one cargo built for this test run (`target/<profile>/libresizealloc.so`),
//! or `$RESIZEALLOC_SO` when set.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::*;

#[test]
fn every_export_and_edge_case() {
    let exe = compile("api");
    let out = preloaded(Command::new(&exe), &[]);
    assert_ok(&out, "api.c");
}

/// The inline paths of `malloc` and `free` (x86-64 Linux: assembly) against what the arena's
/// Rust paths do; `scripts/test.sh` also runs it with the library built with the core crate's
/// `check-invariants` feature (`$RESIZEALLOC_SO`).
#[test]
fn inline_malloc_and_free_paths() {
    let out = preloaded(Command::new(compile("fast_paths")), &[]);
    assert_ok(&out, "fast_paths.c");
}

/// Requests nothing can serve get NULL and ENOMEM in both modes (process mode's predictor once
/// overflowed its byte clock on `malloc(SIZE_MAX)`).
#[test]
fn huge_requests_fail_cleanly_in_both_modes() {
    let exe = compile("huge_requests");
    for mode in ["on", "process"] {
        let out = preloaded(Command::new(&exe), &[("RESIZEALLOC_REGION", mode)]);
        assert_ok(&out, &format!("huge_requests.c, RESIZEALLOC_REGION={mode}"));
    }
}

#[test]
fn two_threads_cross_thread_frees_and_thread_exit() {
    let out = preloaded(Command::new(compile("threads")), &[]);
    assert_ok(&out, "threads.c");
}

#[test]
fn workers_that_reach_glibc_first_exit_cleanly() {
    // Whoever calls glibc's malloc first gets its main arena, counted as the main thread's.
    // In process mode the main thread may never call it; several workers then raced into
    // glibc's initialisation, and the first to exit detached the arena from the others
    // (glibc aborted 3 runs in 60 before the library made the first call itself at load).
    let exe = compile("first_glibc");
    for run in 0..100 {
        let out = preloaded(
            Command::new(&exe),
            &[
                ("RESIZEALLOC_REGION", "process"),
                ("RESIZEALLOC_MIN_SIZE", "64"),
            ],
        );
        assert_ok(&out, &format!("first_glibc.c, run {run}"));
    }
}

#[test]
fn the_reservation_leaves_rlimit_as_to_the_program() {
    use std::os::unix::process::CommandExt;
    let exe = compile("rlimit");
    for mode in ["on", "process"] {
        let mut cmd = Command::new(&exe);
        // SAFETY: setrlimit is async-signal-safe; the closure touches no shared state.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 1 << 30,
                    rlim_max: 1 << 30,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        };
        let out = preloaded(
            cmd,
            &[
                ("RESIZEALLOC_REGION", mode),
                ("RESIZEALLOC_MAX_SIZE", "64M"),
            ],
        );
        assert_ok(&out, &format!("rlimit.c, RESIZEALLOC_REGION={mode}"));
    }
}

#[test]
fn routing_changes_mid_run_lose_nothing() {
    let out = preloaded(
        Command::new(compile("routing")),
        &[("RESIZEALLOC_REGION", "process")],
    );
    assert_ok(&out, "routing.c");
}

/// Runs `tests/c/<name>.c` preloaded in process mode and in markers mode; each run must pass.
fn assert_ok_in_both_modes(name: &str) {
    for mode in ["process", "markers"] {
        let out = preloaded(Command::new(compile(name)), &[("RESIZEALLOC_REGION", mode)]);
        assert_ok(&out, &format!("{name}.c ({mode} mode)"));
    }
}

#[test]
fn a_buffer_appended_to_between_allocations_moves_a_logarithmic_number_of_times() {
    assert_ok_in_both_modes("realloc_append");
}

#[test]
fn sparsely_touched_regions_of_large_blocks_stay_small() {
    let out = preloaded(Command::new(compile("sparse_regions")), &[]);
    assert_ok(&out, "sparse_regions.c");
}

#[test]
fn large_blocks_freed_by_another_thread_give_their_pages_back_at_once() {
    assert_ok_in_both_modes("cross_big");
}

#[test]
fn arenas_of_exited_threads_are_handed_on_without_losing_a_block() {
    // Waves of short threads keep blocks that a long-lived thread frees while the next wave
    // adopts (process mode) or reuses (both modes) the exited threads' arenas.
    assert_ok_in_both_modes("handover");
}

#[test]
fn a_freed_phase_goes_back_from_the_frees_and_at_the_next_allocation() {
    let out = preloaded(
        Command::new(compile("give_back")),
        &[
            ("RESIZEALLOC_REGION", "process"),
            ("RESIZEALLOC_MAX_SIZE", "1"),
            ("RESIZEALLOC_GIVE_BACK_AFTER", "256M"),
        ],
    );
    assert_ok(&out, "give_back.c");
}

#[test]
fn a_freed_phase_goes_back_while_the_small_block_heap_fills() {
    let out = preloaded(
        Command::new(compile("give_back_heap")),
        &[("RESIZEALLOC_REGION", "process")],
    );
    assert_ok(&out, "give_back_heap.c");
}

#[test]
fn small_block_heap_under_stress() {
    // Every request of 2 B..1 KiB goes to the small-block heap (the arena's size bound sends it
    // away, and process mode sends what the arena declines there).
    let out = preloaded(
        Command::new(compile("slab")),
        &[
            ("RESIZEALLOC_REGION", "process"),
            ("RESIZEALLOC_MAX_SIZE", "1"),
        ],
    );
    assert_ok(&out, "slab.c");
}

#[test]
fn process_mode_sends_every_small_request_to_the_small_block_heap() {
    let out = preloaded(
        Command::new(compile("small_temporaries")),
        &[("RESIZEALLOC_REGION", "process")],
    );
    assert_ok(&out, "small_temporaries.c");
    // The stress test of the heap with process mode's defaults too (above, the size bound sends
    // every small request there; here process mode itself does).
    let out = preloaded(
        Command::new(compile("slab")),
        &[("RESIZEALLOC_REGION", "process")],
    );
    assert_ok(&out, "slab.c, default options");
}

#[test]
fn freed_memory_waits_for_the_purge_delay_then_goes_back() {
    for (how, delay) in [("wait", "50"), ("at-once", "0")] {
        for size in ["200", "8"] {
            for place in ["top", "below", "thread"] {
                let mut cmd = Command::new(compile("purge_delay"));
                cmd.args([how, size, place]);
                let out = preloaded(
                    cmd,
                    &[
                        ("RESIZEALLOC_REGION", "process"),
                        ("RESIZEALLOC_PURGE_DELAY_MS", delay),
                    ],
                );
                assert_ok(&out, &format!("purge_delay.c {how} {size} MiB {place}"));
            }
        }
    }
}

#[test]
fn small_block_heap_double_free_aborts() {
    use std::os::unix::process::ExitStatusExt;
    for how in ["cached", "page"] {
        let mut cmd = Command::new(compile("slab_double_free"));
        cmd.arg(how);
        let out = preloaded(
            cmd,
            &[
                ("RESIZEALLOC_REGION", "process"),
                ("RESIZEALLOC_MAX_SIZE", "1"),
            ],
        );
        assert_eq!(
            out.status.signal(),
            Some(libc_sigabrt()),
            "{how}: {:?}",
            out.status
        );
        assert!(
            text(&out.stderr).starts_with("resizealloc: double free detected")
                && text(&out.stderr).contains("(small-block heap)"),
            "{how}: stderr: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn fork_inside_a_region() {
    let out = preloaded(Command::new(compile("fork")), &[]);
    assert_ok(&out, "fork.c");
    assert!(text(&out.stdout).contains("child ok"));
}

/// A program that lowers `RLIMIT_AS` after the library reserved its address space (the first
/// region, the first allocation in process mode), with `setrlimit` or `prlimit`, then creates
/// threads and allocates large blocks outside regions: it runs as it does under glibc alone,
/// and maps no more than its limit (the library gave back what it held beyond its budget).
#[test]
fn a_limit_lowered_after_the_reservation_leaves_the_program_its_address_space() {
    let exe = compile("rlimit_after");
    for how in ["setrlimit", "prlimit"] {
        for mode in ["off", "on", "process"] {
            let mut cmd = Command::new("timeout");
            cmd.arg("60").arg(&exe).arg(how);
            let out = preloaded(cmd, &[("RESIZEALLOC_REGION", mode)]);
            assert_ok(&out, &format!("rlimit_after.c ({how}, {mode} mode)"));
        }
    }
}

/// `fork` from a signal handler that interrupts `fork` (glibc's `tst-mallocfork2`): the
/// library's fork handlers run nested inside themselves on one thread, and must neither wait for
/// a lock the interrupted `fork` holds nor release one it still needs. In every mode, with the
/// loop outside and inside a region, the program runs to its end.
#[test]
fn fork_in_a_signal_handler_that_interrupts_fork_never_hangs() {
    let exe = compile("fork_in_signal");
    for mode in ["on", "process", "off"] {
        for place in ["outside", "region"] {
            let mut cmd = Command::new("timeout");
            cmd.args(["60"]).arg(&exe).args(["1500", place]);
            let out = preloaded(cmd, &[("RESIZEALLOC_REGION", mode)]);
            assert_ok(&out, &format!("fork_in_signal.c ({mode} mode, {place})"));
        }
    }
}

/// Every entry point of the malloc family sets `errno` as glibc does, on every failure (huge
/// requests, overflows, bad alignments, real exhaustion under `RLIMIT_AS`) and leaves it alone
/// where glibc does (`free`, successes): `errno_contract.c` prints what each call returned and
/// what `errno` then held, and its lines under the library, in every mode, inside and outside
/// a region, must be glibc's.
#[test]
fn errno_after_each_entry_point_and_failure_is_glibcs() {
    let exe = compile_as("errno_contract", "errno_contract", false);
    let plain = Command::new(&exe).args(["rlimit"]).output().expect("spawn");
    assert_ok_status(&plain, "errno_contract.c under glibc alone");
    let reference = text(&plain.stdout);
    assert!(reference.lines().count() > 50, "{reference}");
    for (mode, args) in [
        ("on", &["region", "rlimit"][..]),
        ("on", &["rlimit"][..]),
        ("process", &["rlimit"][..]),
    ] {
        let mut cmd = Command::new(&exe);
        cmd.args(args);
        let out = preloaded(cmd, &[("RESIZEALLOC_REGION", mode)]);
        assert_ok_status(&out, &format!("errno_contract.c ({mode} mode, {args:?})"));
        let got = text(&out.stdout);
        for (g, r) in got.lines().zip(reference.lines()) {
            assert_eq!(g, r, "{mode} mode, {args:?}: differs from glibc");
        }
        assert_eq!(
            got.lines().count(),
            reference.lines().count(),
            "{mode} mode, {args:?}"
        );
    }
}

/// `mallinfo2`'s `uordblks`, the bytes in use, follows what the program allocates and frees
/// whoever serves the blocks (the arena in a region, the small-block heap in process mode),
/// as under glibc alone; `hblkhd` stays glibc's mmapped bytes.
#[test]
fn mallinfo_counts_the_librarys_blocks_in_use() {
    let exe = compile_as("mallinfo_counts", "mallinfo_counts", false);
    let plain = Command::new(&exe).output().expect("spawn");
    assert_ok_status(&plain, "mallinfo_counts.c under glibc alone");
    for (mode, args) in [("on", &["region"][..]), ("process", &[][..])] {
        let mut cmd = Command::new(&exe);
        cmd.args(args);
        let out = preloaded(cmd, &[("RESIZEALLOC_REGION", mode)]);
        assert_ok_status(&out, &format!("mallinfo_counts.c ({mode} mode)"));
    }
}

fn assert_ok_status(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn double_free_aborts_with_glibcs_message() {
    assert_double_free_abort("double_free");
}

#[test]
fn double_free_of_the_last_block_aborts() {
    assert_double_free_abort("double_free_last");
}

#[test]
fn double_free_after_another_threads_free_aborts() {
    assert_double_free_abort("double_free_remote");
}

/// Runs `tests/c/<program>.c` preloaded: it must die of SIGABRT with glibc's double-free message.
fn assert_double_free_abort(program: &str) {
    let out = preloaded(Command::new(compile(program)), &[]);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc_sigabrt()),
        "{program}: status {:?}, stderr: {}",
        out.status,
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).starts_with("resizealloc: double free detected")
            && text(&out.stderr).contains(": block 0x"),
        "{program}: stderr: {}",
        text(&out.stderr)
    );
}

#[test]
fn regions_on_top_of_mimalloc() {
    let mimalloc = Path::new("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2");
    assert!(
        mimalloc.exists(),
        "libmimalloc.so.2 missing: apt-get install libmimalloc2.0 (.ci/run does)"
    );
    let mut cmd = Command::new(compile("chain"));
    cmd.env(
        "LD_PRELOAD",
        format!("{} {}", library().display(), mimalloc.display()),
    );
    let out = cmd.output().unwrap();
    assert_ok(&out, "chain.c");
}

/// `tests/c/libc_shim.c` built as a shared object with `-D<variant>` at optimisation level
/// `opt` (`-O0`, `-O2`).
fn libc_shim(variant: &str, opt: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let so = work_dir().join(format!("libc_shim_{variant}{opt}.so"));
    let status = Command::new("cc")
        .args([opt, "-g", "-Wall", "-shared", "-fPIC"])
        .arg(format!("-D{variant}"))
        .arg(manifest.join("tests/c/libc_shim.c"))
        .arg("-o")
        .arg(&so)
        .arg("-ldl")
        .status()
        .expect("cc");
    assert!(status.success(), "compiling libc_shim.c with -D{variant}");
    so
}

/// Whether `function` in the shared object `so` leaves by a jump to `target`'s PLT entry: a
/// tail call, which pushes no return address of its own.
fn tail_calls(so: &Path, function: &str, target: &str) -> bool {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(so)
        .output()
        .expect("objdump");
    let text = text(&out.stdout);
    let body: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.ends_with(&format!("<{function}>:")))
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(!body.is_empty(), "{function} not found in {}", so.display());
    body.iter()
        .any(|l| l.contains("jmp") && l.contains(&format!("<{target}@plt>")))
}

/// A malloc wrapper preloaded beside the library, of each kind: one that hands its calls on to
/// glibc's `__libc_*` names (which the library exports too), one that finds the next functions
/// with `dlsym(RTLD_NEXT)`, and one that is a full allocator itself; each built at `-O0` and at
/// `-O2`, where the first one's `malloc` reaches `__libc_malloc` by a tail call (a jump: no
/// return address of the wrapper's own, so only what the thread is doing tells that the call
/// comes from the library's next allocator). In both orders of `LD_PRELOAD`, in markers,
/// process and off mode, `/bin/true` and `shim_chain.c` (regions, threads, a forked child) run
/// and exit; with the library first, the wrapper is its next allocator and sees the calls
/// outside regions but none of the regions' own (the program checks).
#[test]
fn malloc_wrappers_preloaded_beside_the_library_run_in_either_order() {
    let program = compile("shim_chain");
    let lib = library();
    let shims = ["VIA_LIBC", "VIA_NEXT", "OWN_HEAP"]
        .into_iter()
        .flat_map(|v| ["-O0", "-O2"].map(move |opt| (v, opt)));
    for (variant, opt) in shims {
        let shim = libc_shim(variant, opt);
        if variant == "VIA_LIBC" && opt == "-O2" {
            assert!(
                tail_calls(&shim, "malloc", "__libc_malloc"),
                "the -O2 wrapper's malloc must tail-call __libc_malloc, or this test shows nothing"
            );
        }
        for lib_first in [true, false] {
            let preload = if lib_first {
                format!("{} {}", lib.display(), shim.display())
            } else {
                format!("{} {}", shim.display(), lib.display())
            };
            for mode in ["markers", "process", "off"] {
                let what = format!(
                    "{variant} {opt}, {}, {mode} mode",
                    if lib_first {
                        "library first"
                    } else {
                        "wrapper first"
                    }
                );
                let run = |exe: &Path, args: &[&str]| {
                    let mut cmd = Command::new("timeout");
                    cmd.arg("60")
                        .arg(exe)
                        .args(args)
                        .env("LD_PRELOAD", &preload);
                    if mode != "markers" {
                        cmd.env("RESIZEALLOC_REGION", mode);
                    }
                    cmd.output().expect("spawn")
                };
                let out = run(Path::new("/bin/true"), &[]);
                assert!(
                    out.status.success(),
                    "/bin/true ({what}): {:?}\nstderr:\n{}",
                    out.status,
                    text(&out.stderr)
                );
                let order = if lib_first { "lib-first" } else { "shim-first" };
                let out = run(&program, &[order]);
                assert_ok(&out, &format!("shim_chain.c ({what})"));
            }
        }
    }
}

fn envcheck(env: &[(&str, &str)]) -> (String, String) {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    let exe = EXE.get_or_init(|| compile("envcheck"));
    let out = preloaded(Command::new(exe), env);
    assert!(
        out.status.success(),
        "envcheck {:?}: {}",
        env,
        text(&out.stderr)
    );
    (text(&out.stdout).trim().to_string(), text(&out.stderr))
}

#[test]
fn environment_controls_routing() {
    let (o, _) = envcheck(&[]);
    assert_eq!(o, "unmarked 0 small 1 large 1 end 0 depth 0");
    let (o, _) = envcheck(&[("RESIZEALLOC_REGION", "off")]);
    assert_eq!(
        o, "unmarked 0 small 0 large 0 end 0 depth 0",
        "off must ignore the markers"
    );
    let (o, _) = envcheck(&[("RESIZEALLOC_REGION", "process")]);
    assert!(
        o.starts_with("unmarked 1 small 1 large 1"),
        "process mode: {o}"
    );
    let (o, _) = envcheck(&[("RESIZEALLOC_MAX_SIZE", "64K")]);
    assert_eq!(
        o, "unmarked 0 small 1 large 0 end 0 depth 0",
        "max size bound"
    );
    let (o, _) = envcheck(&[("RESIZEALLOC_MIN_SIZE", "4K")]);
    assert_eq!(
        o, "unmarked 0 small 0 large 1 end 0 depth 0",
        "min size bound"
    );
    let (o, _) = envcheck(&[
        ("RESIZEALLOC_INITIAL_ARENA", "4M"),
        ("RESIZEALLOC_MAX_ARENA", "8M"),
    ]);
    assert_eq!(o, "unmarked 0 small 1 large 1 end 0 depth 0");
}

#[test]
fn garbage_environment_warns_once_and_keeps_defaults() {
    let (o, err) = envcheck(&[
        ("RESIZEALLOC_REGION", "sometimes"),
        ("RESIZEALLOC_MIN_SIZE", "lots"),
        ("RESIZEALLOC_MAX_ARENA", "12Q"),
        ("RESIZEALLOC_STATS", "maybe"),
    ]);
    assert_eq!(o, "unmarked 0 small 1 large 1 end 0 depth 0");
    for name in [
        "RESIZEALLOC_REGION=sometimes",
        "RESIZEALLOC_MIN_SIZE=lots",
        "RESIZEALLOC_MAX_ARENA=12Q",
        "RESIZEALLOC_STATS=maybe",
    ] {
        assert_eq!(
            err.matches(name).count(),
            1,
            "one warning for {name}: {err}"
        );
    }
}

#[test]
fn stats_and_verbose_print_on_stderr() {
    let (_, err) = envcheck(&[("RESIZEALLOC_STATS", "1"), ("RESIZEALLOC_VERBOSE", "1")]);
    assert!(err.contains("resizealloc: region=on"), "{err}");
    assert!(err.contains("region allocations"), "{err}");
}

#[test]
fn c_api_from_python_ctypes() {
    let script = work_dir().join("ctypes_api.py");
    std::fs::write(
        &script,
        r#"
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.resize_region_end.restype = ctypes.c_int
lib.resize_region_depth.restype = ctypes.c_int
lib.resize_version.restype = ctypes.c_char_p

OLD = ("t_capacity", "t_committed", "t_high_water", "t_region_allocs", "t_overflow", "t_spilled", "t_resizes", "t_depth",
       "p_capacity", "p_committed", "p_high_water", "p_region_allocs", "p_overflow", "p_spilled", "p_resizes",
       "p_live", "p_orphaned", "p_denied", "p_reserved")
MEMORY = ("m_t_resident", "m_t_live", "m_p_resident", "m_p_live", "m_efficiency", "m_given_back",
          "m_closures", "m_turned_away", "m_routed_away", "m_long", "m_short", "m_long_now")
SMALL = ("s_pages", "s_bytes", "s_given_back", "s_adopted")

class OldStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in OLD]

class Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in OLD + MEMORY + SMALL]

def stats():
    s = Stats()
    n = lib.resize_stats_get(ctypes.byref(s), ctypes.sizeof(s))
    assert n == ctypes.sizeof(s), (n, ctypes.sizeof(s))
    # An older caller's smaller struct gets the same prefix, and nothing past it is written.
    guard = (ctypes.c_uint64 * (len(OLD) + 1))()
    guard[len(OLD)] = 0xDEADBEEF
    assert lib.resize_stats_get(ctypes.byref(guard), ctypes.sizeof(OldStats)) == n
    assert guard[len(OLD)] == 0xDEADBEEF
    assert guard[0] == s.t_capacity and guard[len(OLD) - 1] == s.p_reserved
    return s

assert lib.resize_region_end() == -1
before = stats().t_region_allocs
for step in range(200):
    lib.resize_region_begin()
    assert lib.resize_region_depth() == 1
    data = bytearray(1 << 20)
    data[-1] = 1
    del data
    assert lib.resize_region_end() == 0
s = stats()
assert s.t_region_allocs >= before + 200, (before, s.t_region_allocs)
assert s.t_high_water >= 1 << 20 and s.t_capacity >= s.t_high_water
assert s.m_t_resident >= 1 << 20 and s.m_efficiency <= 1000, (s.m_t_resident, s.m_efficiency)
assert s.s_bytes == s.s_pages * 65536, (s.s_pages, s.s_bytes)
print("all ok", lib.resize_version().decode())
"#,
    )
    .unwrap();
    let lib = library();
    let mut cmd = Command::new(python());
    cmd.arg(&script).arg(&lib);
    let out = preloaded(cmd, &[]);
    assert_ok(&out, "ctypes_api.py");
}

// ------------------------------------------------------------------------------ CUDA hooks

/// Builds the fake driver (`tests/c/cuda/fake_libcuda.c`) as `libcuda.so.1`, linked with
/// `-Bsymbolic` like the real one, and the routes program against it (once per test run).
fn cuda_routes() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(build_cuda_routes).clone()
}

fn build_cuda_routes() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = work_dir().join("fakecuda");
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libcuda.so.1");
    let status = Command::new("cc")
        .args([
            "-shared",
            "-fPIC",
            "-O1",
            "-Wl,-Bsymbolic",
            "-Wl,-soname,libcuda.so.1",
            "-o",
        ])
        .arg(&lib)
        .arg(manifest.join("tests/c/cuda/fake_libcuda.c"))
        .status()
        .unwrap();
    assert!(status.success(), "building the fake libcuda");
    let _ = std::fs::remove_file(dir.join("libcuda.so"));
    std::os::unix::fs::symlink("libcuda.so.1", dir.join("libcuda.so")).unwrap();
    let exe = dir.join("routes");
    let status = Command::new("cc")
        .args(["-O1", "-fno-builtin", "-Wall", "-o"])
        .arg(&exe)
        .arg(manifest.join("tests/c/cuda/routes.c"))
        .arg(format!("-L{}", dir.display()))
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .args(["-lcuda", "-ldl"])
        .status()
        .unwrap();
    assert!(status.success(), "building routes.c");
    exe
}

#[test]
fn cuda_driver_hooks_through_symbols_dlsym_and_get_proc_address() {
    let exe = cuda_routes();
    let out = preloaded(Command::new(&exe), &[]);
    assert_ok(&out, "routes.c");
    let mut off = Command::new(&exe);
    off.arg("off");
    let out = preloaded(off, &[("RESIZEALLOC_CUDA", "off")]);
    assert_ok(&out, "routes.c with RESIZEALLOC_CUDA=off");
}

/// Builds the fake cudart (`tests/c/cuda/fake_libcudart.c`) as `libcudart.so.12` next to the
/// fake driver, and `tests/c/cuda/runtime.c` twice: linked with it (shared cudart) and with it
/// compiled in (static cudart). Returns (shared, static).
fn cuda_runtime_programs() -> (PathBuf, PathBuf) {
    static EXES: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    EXES.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let routes = cuda_routes(); // the fake driver lives next to it
        let dir = routes.parent().unwrap().to_path_buf();
        let fake_cudart = manifest.join("tests/c/cuda/fake_libcudart.c");
        let status = Command::new("cc")
            .args([
                "-shared",
                "-fPIC",
                "-O1",
                "-Wl,-soname,libcudart.so.12",
                "-o",
            ])
            .arg(dir.join("libcudart.so.12"))
            .arg(&fake_cudart)
            .arg("-ldl")
            .status()
            .unwrap();
        assert!(status.success(), "building the fake libcudart");
        let _ = std::fs::remove_file(dir.join("libcudart.so"));
        std::os::unix::fs::symlink("libcudart.so.12", dir.join("libcudart.so")).unwrap();
        let build = |name: &str, static_cudart: bool| {
            let exe = dir.join(name);
            let mut cc = Command::new("cc");
            cc.args(["-O1", "-fno-builtin", "-Wall", "-o"])
                .arg(&exe)
                .arg(manifest.join("tests/c/cuda/runtime.c"));
            if static_cudart {
                cc.arg(&fake_cudart);
            }
            cc.arg(format!("-L{}", dir.display()))
                .arg(format!("-Wl,-rpath,{}", dir.display()));
            if !static_cudart {
                cc.arg("-lcudart");
            }
            let status = cc.args(["-lcuda", "-ldl"]).status().unwrap();
            assert!(status.success(), "building {name}");
            exe
        };
        (
            build("runtime_shared", false),
            build("runtime_static", true),
        )
    })
    .clone()
}

#[test]
fn cuda_runtime_hooks_with_shared_and_static_cudart() {
    let (shared, static_) = cuda_runtime_programs();
    for (exe, kind) in [(&shared, "shared"), (&static_, "static")] {
        let mut cmd = Command::new(exe);
        cmd.arg(kind);
        let out = preloaded(cmd, &[]);
        assert_ok(&out, &format!("runtime.c, {kind} cudart"));
        let mut cmd = Command::new(exe);
        cmd.args([kind, "off"]);
        let out = preloaded(cmd, &[("RESIZEALLOC_CUDA", "off")]);
        assert_ok(
            &out,
            &format!("runtime.c, {kind} cudart, RESIZEALLOC_CUDA=off"),
        );
        // Process mode: every allocation is pooled, the driver's own mallocs included.
        let mut cmd = Command::new(exe);
        cmd.args([kind, "process"]);
        let out = preloaded(cmd, &[("RESIZEALLOC_REGION", "process")]);
        assert_ok(
            &out,
            &format!("runtime.c, {kind} cudart, RESIZEALLOC_REGION=process"),
        );
    }
}

/// Builds `tests/c/cuda/<name>.c` against the fake driver and the fake shared cudart.
fn cuda_program(name: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (shared, _) = cuda_runtime_programs(); // the fakes live next to it
    let dir = shared.parent().unwrap().to_path_buf();
    let exe = dir.join(name);
    let status = Command::new("cc")
        .args(["-O1", "-fno-builtin", "-Wall", "-pthread", "-o"])
        .arg(&exe)
        .arg(manifest.join(format!("tests/c/cuda/{name}.c")))
        .arg(format!("-L{}", dir.display()))
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .args(["-lcudart", "-lcuda", "-ldl"])
        .status()
        .unwrap();
    assert!(status.success(), "building {name}.c");
    exe
}

#[test]
fn cuda_stream_capture_goes_to_the_driver_and_the_pools_never_sync_or_allocate_during_it() {
    let exe = cuda_program("capture");
    let out = preloaded(Command::new(&exe), &[]);
    assert_ok(&out, "capture.c");
}

#[test]
fn cuda_cross_context_frees_ipc_handles_and_buffer_ids() {
    let exe = cuda_program("sharing");
    let out = preloaded(Command::new(&exe), &[]);
    assert_ok(&out, "sharing.c");
}

#[test]
fn cuda_pools_give_memory_back_under_pressure_when_idle_and_above_the_cap() {
    let exe = cuda_program("pressure");
    let capacity = ("FAKE_CUDA_CAPACITY", "67108864");
    let mut cmd = Command::new(&exe);
    cmd.arg("oom");
    assert_ok(&preloaded(cmd, &[capacity]), "pressure.c oom");
    let mut cmd = Command::new(&exe);
    cmd.arg("idle");
    let out = preloaded(cmd, &[capacity, ("RESIZEALLOC_CUDA_IDLE_MS", "50")]);
    assert_ok(&out, "pressure.c idle");
    let mut cmd = Command::new(&exe);
    cmd.arg("cap");
    let out = preloaded(cmd, &[capacity, ("RESIZEALLOC_CUDA_MAX_CACHED", "4M")]);
    assert_ok(&out, "pressure.c cap");
}

#[test]
fn cuda_hooks_under_four_threads_lose_and_double_no_block() {
    let exe = cuda_program("stress");
    for mode in ["process", "off"] {
        let env: &[(&str, &str)] = if mode == "off" {
            &[
                ("RESIZEALLOC_REGION", "process"),
                ("RESIZEALLOC_CUDA", "off"),
            ]
        } else {
            &[("RESIZEALLOC_REGION", "process")]
        };
        let out = preloaded(Command::new(&exe), env);
        assert_ok(&out, &format!("stress.c ({mode})"));
    }
}

#[test]
fn cuda_plug_in_entry_points_without_preload() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (shared, _) = cuda_runtime_programs(); // the fake driver lives next to it
    let dir = shared.parent().unwrap().to_path_buf();
    let exe = dir.join("plugins");
    // Linked with neither the library nor the driver: the library opens the driver itself.
    let status = Command::new("cc")
        .args(["-O1", "-Wall", "-pthread", "-o"])
        .arg(&exe)
        .arg(manifest.join("tests/c/cuda/plugins.c"))
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(status.success(), "building plugins.c");
    for off in [false, true] {
        let mut cmd = Command::new(&exe);
        cmd.arg(library()).env("LD_LIBRARY_PATH", &dir);
        if off {
            cmd.arg("off").env("RESIZEALLOC_CUDA", "off");
        }
        let out = cmd.output().unwrap();
        assert_ok(&out, &format!("plugins.c{}", if off { " off" } else { "" }));
    }
}

/// The cudarc backend of the core crate against the fake driver: the test binary runs itself
/// with the fake `libcuda.so` on `LD_LIBRARY_PATH`, where cudarc's loader finds it.
#[test]
fn cudarc_backend_pools_against_the_fake_driver() {
    use resizealloc::device::cuda::{CudaPool, CudarcDriver};
    if std::env::var_os("RESIZEALLOC_CUDARC_CHILD").is_some() {
        let mut pool = CudaPool::new(CudarcDriver::new().expect("cudarc loads the fake libcuda"));
        for i in 0..1000usize {
            let p = pool.alloc(1000 + i, 0).unwrap();
            // SAFETY: the fake driver's device memory is host memory of at least that size.
            unsafe { std::ptr::write_bytes(p as *mut u8, i as u8, 1000 + i) };
            pool.free(p).unwrap();
            pool.on_synchronize();
        }
        let s = pool.stats();
        assert_eq!(
            s.driver_allocs, 1,
            "one segment from the driver for 1000 rounds"
        );
        pool.trim().unwrap();
        assert_eq!(pool.stats().reserved, 0);
        // The pool binds the context current at its creation: moved to a thread where another
        // context is current, it allocates, frees and syncs in its own (the fake refuses
        // calls without a context, and records each block's context).
        type CtxFn = unsafe extern "C" fn(i32) -> *mut libc::c_void;
        type BlockCtxFn = unsafe extern "C" fn(u64) -> *mut libc::c_void;
        type SetFn = unsafe extern "C" fn(*mut libc::c_void) -> i32;
        // SAFETY: the fake driver cudarc loaded; its test-only functions have these signatures.
        let (context, block_ctx, set_current) = unsafe {
            let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            assert!(!h.is_null(), "the fake libcuda is loaded");
            (
                std::mem::transmute::<*mut libc::c_void, CtxFn>(libc::dlsym(
                    h,
                    c"fake_cuda_context".as_ptr(),
                )),
                std::mem::transmute::<*mut libc::c_void, BlockCtxFn>(libc::dlsym(
                    h,
                    c"fake_cuda_block_ctx".as_ptr(),
                )),
                std::mem::transmute::<*mut libc::c_void, SetFn>(libc::dlsym(
                    h,
                    c"cuCtxSetCurrent".as_ptr(),
                )),
            )
        };
        // SAFETY: test-only calls into the fake driver.
        let own = unsafe { context(0) } as usize;
        let pool = std::thread::spawn(move || {
            let mut pool = pool;
            // SAFETY: as above.
            let other = unsafe { context(1) };
            for current in [std::ptr::null_mut(), other] {
                // SAFETY: as above.
                unsafe { set_current(current) };
                let p = pool.alloc(3 << 20, 0).expect("alloc on another thread");
                // SAFETY: as above.
                assert_eq!(
                    unsafe { block_ctx(p) } as usize,
                    own,
                    "segment in the pool's context"
                );
                pool.free(p).unwrap();
                pool.trim().expect("sync and free in the pool's context");
                assert_eq!(pool.stats().reserved, 0);
            }
            pool
        })
        .join()
        .unwrap();
        assert!(pool.stats().own_syncs >= 2);
        println!("all ok");
        return;
    }
    let routes = cuda_routes(); // builds the fake driver next to it
    let dir = routes.parent().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "cudarc_backend_pools_against_the_fake_driver",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RESIZEALLOC_CUDARC_CHILD", "1")
        .env("LD_LIBRARY_PATH", dir)
        .output()
        .unwrap();
    assert_ok(&out, "cudarc child");
}

// ------------------------------------------------------------------------------ real programs

/// Runs `argv` plainly and under the library in process mode; both must agree byte for byte.
fn same_with_and_without(argv: &[&str], stdin: Option<&Path>, dir: Option<&Path>) {
    let run = |preload: bool| {
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..]);
        if let Some(d) = dir {
            cmd.current_dir(d);
        }
        if let Some(f) = stdin {
            cmd.stdin(std::fs::File::open(f).unwrap());
        }
        cmd.env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z");
        if preload {
            cmd.env("LD_PRELOAD", library())
                .env("RESIZEALLOC_REGION", "process");
        }
        cmd.output().unwrap()
    };
    let plain = run(false);
    let with = run(true);
    assert_eq!(
        plain.status.code(),
        with.status.code(),
        "{argv:?}: exit codes differ; stderr:\n{}",
        text(&with.stderr)
    );
    assert!(
        plain.stdout == with.stdout,
        "{argv:?}: stdout differs ({} vs {} bytes)",
        plain.stdout.len(),
        with.stdout.len()
    );
    assert!(
        plain.stderr == with.stderr,
        "{argv:?}: stderr differs:\n{}\n---\n{}",
        text(&plain.stderr),
        text(&with.stderr)
    );
}

fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    text(&out.stdout).trim().to_string()
}

#[test]
fn python_computation_is_identical() {
    let script = work_dir().join("compute.py");
    std::fs::write(
        &script,
        r#"
import collections, hashlib, json, re, fractions, decimal
data = [((i * 7919) % 10007, str(i) * (i % 7)) for i in range(60000)]
counts = collections.Counter(s[:3] for _, s in data)
tree = {}
for k, s in data:
    tree.setdefault(k % 97, []).append(s[::-1])
blob = json.dumps(tree, sort_keys=True)
print(hashlib.sha256(blob.encode()).hexdigest())
print(sum(fractions.Fraction(1, k + 1) for k in range(300)))
decimal.getcontext().prec = 200
print(decimal.Decimal(2).sqrt())
print(len(re.findall(r"(\d)\1", blob)), counts.most_common(3))
print(sorted({k: len(v) for k, v in tree.items()}.items())[:5])
"#,
    )
    .unwrap();
    let py = python();
    same_with_and_without(&[&py, script.to_str().unwrap()], None, None);
}

#[test]
fn python_stdlib_tests_are_identical() {
    // A runner that prints each test's outcome and no timings, so the output is byte-stable.
    let runner = work_dir().join("run_tests.py");
    std::fs::write(
        &runner,
        r#"
import sys, unittest
for name in sys.argv[1:]:
    suite = unittest.defaultTestLoader.loadTestsFromName(name)
    result = unittest.TestResult()
    suite.run(result)
    print(name, "run", result.testsRun, "failures", len(result.failures), "errors", len(result.errors), "skipped", len(result.skipped))
    for test, _ in result.failures + result.errors:
        print("  not ok", test.id())
"#,
    )
    .unwrap();
    let py = python();
    let modules = [
        "test.test_json",
        "test.test_re",
        "test.test_collections",
        "test.test_heapq",
        "test.test_bisect",
        "test.test_struct",
        "test.test_string",
    ];
    let mut argv = vec![py.as_str(), runner.to_str().unwrap()];
    argv.extend(modules);
    same_with_and_without(&argv, None, None);
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn sqlite3_workload_is_identical() {
    assert!(
        have("sqlite3"),
        "sqlite3 missing: apt-get install sqlite3 (.ci/run does)"
    );
    let sql = work_dir().join("workload.sql");
    std::fs::write(
        &sql,
        "CREATE TABLE t(a INTEGER, b TEXT);\n\
         WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)\n\
         INSERT INTO t SELECT x, printf('%08d-%s', x * 7919 % 100003, hex(x)) FROM c;\n\
         CREATE INDEX tb ON t(b);\n\
         SELECT count(*), sum(a), min(b), max(b) FROM t;\n\
         SELECT substr(b, 1, 3) AS k, count(*), group_concat(a % 10, '') FROM t GROUP BY k ORDER BY k LIMIT 20;\n\
         SELECT b FROM t ORDER BY b DESC LIMIT 5;\n",
    )
    .unwrap();
    same_with_and_without(&["sqlite3", ":memory:"], Some(&sql), None);
}

fn big_text_file() -> PathBuf {
    let f = work_dir().join("big.txt");
    if !f.exists() {
        let mut s = String::with_capacity(6 << 20);
        let mut x: u64 = 88172645463325252;
        for i in 0..80_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push_str(&format!(
                "{:016x} line {} {}\n",
                x,
                i,
                "lorem ipsum dolor ".repeat((x % 5) as usize)
            ));
        }
        std::fs::write(&f, s).unwrap();
    }
    f
}

#[test]
fn xz_round_trip_is_identical() {
    assert!(
        have("xz"),
        "xz missing: apt-get install xz-utils (.ci/run does)"
    );
    let f = big_text_file();
    same_with_and_without(&["xz", "-4", "-T1", "-c"], Some(&f), None);
    let packed = work_dir().join("big.txt.xz");
    let out = Command::new("xz")
        .args(["-4", "-T1", "-c"])
        .stdin(std::fs::File::open(&f).unwrap())
        .output()
        .unwrap();
    std::fs::write(&packed, out.stdout).unwrap();
    same_with_and_without(&["xz", "-d", "-c"], Some(&packed), None);
}

#[test]
fn sort_of_a_large_file_is_identical() {
    let f = big_text_file();
    same_with_and_without(
        &["sort", "-S", "16M", "--parallel=2", f.to_str().unwrap()],
        None,
        None,
    );
}

#[test]
fn git_is_identical() {
    assert!(have("git"), "git missing");
    let repo = work_dir().join("gitrepo");
    let _ = std::fs::remove_dir_all(&repo);
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    };
    git(&["init", "-q", "-b", "main"]);
    for i in 0..30 {
        std::fs::write(
            repo.join(format!("f{}.txt", i % 7)),
            format!("{}\n", "content ".repeat(i * 50)),
        )
        .unwrap();
        git(&["add", "-A"]);
        git(&[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "-m",
            &format!("commit {i}"),
        ]);
    }
    same_with_and_without(
        &["git", "log", "--stat", "-p", "--no-color"],
        None,
        Some(&repo),
    );
    same_with_and_without(
        &["git", "fsck", "--full", "--no-progress"],
        None,
        Some(&repo),
    );
    same_with_and_without(
        &["git", "diff", "HEAD~20", "HEAD", "--no-color"],
        None,
        Some(&repo),
    );
}

/// Threads one after another, each a region of 8 MiB of temporaries: from the third on they
/// take an exited thread's arena warm and planned, and fault in under a quarter of the pages
/// the first one did, in markers mode and in process mode.
#[test]
fn short_lived_threads_start_warm() {
    for env in [&[][..], &[("RESIZEALLOC_REGION", "process")][..]] {
        let out = preloaded(Command::new(compile("warm_threads")), env);
        assert_ok(&out, &format!("warm_threads.c {env:?}"));
    }
}
