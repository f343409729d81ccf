//! Peak RSS of libresizealloc.so on the memory suite's lifetime patterns:
//! each program of `scripts/membench/` runs at a small scale once without the library (glibc)
//! and once under it, and the library's peak RSS must stay within
//! `max(1.25 x glibc, glibc + 8 MiB)`. Every pattern is checked in process mode
//! (`RESIZEALLOC_REGION=process`) and in markers mode (the default: the programs' own
//! `resize_region_begin/end` regions go to the arena, and their results escape them).
//! The phase program must also give the phase back: RSS after its steady work <= 64 MiB.
//!
//! The programs fill every block with a pattern derived from its slot and check it before
//! freeing; corruption exits 3, so each run must exit 0, and print the same "result" lines under
//! both allocators. Peak RSS is `ru_maxrss` from `wait4`. Run with `--nocapture` to see the
//! measured figures of passing tests too. `scripts/mem_bench.sh` runs the same programs at full
//! scale against mimalloc, jemalloc and tcmalloc.
//!
//! The library is the one cargo built for this test run (`target/<profile>/libresizealloc.so`),
//! or `$RESIZEALLOC_SO` when set.

mod common;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use common::{library, work_dir};

const MIB_KIB: u64 = 1024;
/// What the phase program may still hold once its phase is over (KiB).
const PHASE_AFTER_LIMIT_KIB: u64 = 64 * MIB_KIB;

/// Compiles `scripts/membench/<name>.c` (once per test run; tests of the same program share
/// it) and returns the executable. The markers are found with dlsym, so nothing links the
/// library: the same binary runs without it.
fn compile(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(exe) = built.get(name) {
        return exe.clone();
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/membench");
    let src = dir.join(format!("{name}.c"));
    let exe = work_dir().join(name);
    let status = Command::new("cc")
        // -fno-builtin: gcc would otherwise drop malloc/free pairs whose memory is never used.
        .args(["-O1", "-g", "-Wall", "-fno-builtin", "-pthread", "-I"])
        .arg(&dir)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .args(["-ldl", "-lm"])
        .status()
        .expect("cc");
    assert!(status.success(), "compiling {}", src.display());
    built.insert(name.to_string(), exe.clone());
    exe
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Allocator {
    Glibc,
    Process,
    Markers,
}

impl Allocator {
    fn label(self) -> &'static str {
        match self {
            Allocator::Glibc => "glibc",
            Allocator::Process => "resizealloc (RESIZEALLOC_REGION=process)",
            Allocator::Markers => "resizealloc (markers)",
        }
    }
}

struct Run {
    maxrss_kib: u64,
    stdout: String,
}

impl Run {
    /// The lines that must not depend on the allocator.
    fn results(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with("result "))
            .collect()
    }

    /// A `metric <name> <value>` line of the program, in its units.
    fn metric(&self, name: &str) -> f64 {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("metric "))
            .find_map(|l| {
                let (n, v) = l.split_once(' ')?;
                (n == name).then(|| v.trim().parse().ok()).flatten()
            })
            .unwrap_or_else(|| panic!("no metric {name} in:\n{}", self.stdout))
    }
}

/// Runs `exe args` under `alloc` (nothing else of the caller's `LD_PRELOAD` or `RESIZEALLOC_*`
/// environment) and returns its peak RSS and output; panics unless it exits 0.
///
/// The program runs under `scripts/membench/runner.c`, which forks it and reads `ru_maxrss`
/// with `wait4`. Spawning it from this test directly would not do: a child's `ru_maxrss`
/// includes the peak RSS of the process it was forked (or vforked) from, here the test binary.
fn run(exe: &Path, args: &[&str], alloc: Allocator) -> Run {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let name = exe.file_name().unwrap().to_string_lossy();
    let rusage_path = work_dir().join(format!("{name}.{n}.rusage"));
    let out_path = work_dir().join(format!("{name}.{n}.out"));
    let err_path = work_dir().join(format!("{name}.{n}.err"));
    let mut env = Vec::new();
    if alloc != Allocator::Glibc {
        env.push(format!("LD_PRELOAD={}", library().display()));
    }
    if alloc == Allocator::Process {
        env.push("RESIZEALLOC_REGION=process".to_string());
    }
    let mut cmd = Command::new(compile("runner"));
    cmd.arg(&rusage_path)
        .args(&env)
        .arg("--")
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .env_remove("LD_PRELOAD");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("RESIZEALLOC_") {
            cmd.env_remove(k);
        }
    }
    let repro = format!("{} {} {}", env.join(" "), exe.display(), args.join(" "));
    cmd.status().expect("spawn the runner");
    let rusage = std::fs::read_to_string(&rusage_path).unwrap_or_default();
    let stdout = std::fs::read_to_string(&out_path).unwrap();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    for p in [&rusage_path, &out_path, &err_path] {
        let _ = std::fs::remove_file(p);
    }
    let field = |key: &str| {
        rusage
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("runner wrote no {key}: {rusage:?}\nstderr:\n{stderr}"))
    };
    let status: i32 = field("status").parse().unwrap();
    assert!(
        status == 0,
        "{name} under {}: {} (3 = corrupted block, 2 = malloc failed)\nrepro: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        alloc.label(),
        if status > 128 {
            format!("killed by signal {}", status - 128)
        } else {
            format!("exit status {status}")
        },
        repro.trim_start(),
    );
    Run {
        maxrss_kib: field("maxrss_kib").parse().unwrap(),
        stdout,
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Runs `program args` under glibc and under `alloc`; returns both runs and the failures of
/// the peak-RSS bound and of the output check (empty when both hold).
fn compare(program: &str, args: &[&str], alloc: Allocator) -> (Run, Run, Vec<String>) {
    let exe = compile(program);
    let glibc = run(&exe, args, Allocator::Glibc);
    let ours = run(&exe, args, alloc);
    let g = glibc.maxrss_kib;
    let bound = (g * 5 / 4).max(g + 8 * MIB_KIB);
    let what = format!("{program} {}", args.join(" "));
    eprintln!(
        "{what}: peak RSS glibc {}, {} {} ({:.2}x), bound {}",
        mib(g),
        alloc.label(),
        mib(ours.maxrss_kib),
        ours.maxrss_kib as f64 / g as f64,
        mib(bound)
    );
    let mut failures = Vec::new();
    if ours.maxrss_kib > bound {
        failures.push(format!(
            "{what}: peak RSS under {} is {} ({:.2}x glibc's {}), over the bound max(1.25 x glibc, glibc + 8 MiB) = {}",
            alloc.label(),
            mib(ours.maxrss_kib),
            ours.maxrss_kib as f64 / g as f64,
            mib(g),
            mib(bound)
        ));
    }
    if glibc.results() != ours.results() {
        failures.push(format!(
            "{what}: results differ\nglibc: {:?}\n{}: {:?}",
            glibc.results(),
            alloc.label(),
            ours.results()
        ));
    }
    (glibc, ours, failures)
}

fn assert_bound(program: &str, args: &[&str], alloc: Allocator) {
    let (_, _, failures) = compare(program, args, alloc);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The phase program: the peak bound, and what is left after the steady work.
fn assert_phase(alloc: Allocator) {
    let (glibc, ours, mut failures) = compare("phase", &["0.4"], alloc);
    let after = ours.metric("rss_after_kib") as u64;
    eprintln!(
        "phase 0.4: RSS after the steady work: glibc {}, {} {}, limit {}",
        mib(glibc.metric("rss_after_kib") as u64),
        alloc.label(),
        mib(after),
        mib(PHASE_AFTER_LIMIT_KIB)
    );
    if after > PHASE_AFTER_LIMIT_KIB {
        failures.push(format!(
            "phase 0.4: RSS after the steady work under {} is {}, over {} (glibc: {})",
            alloc.label(),
            mib(after),
            mib(PHASE_AFTER_LIMIT_KIB),
            mib(glibc.metric("rss_after_kib") as u64)
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// Scales: each run takes well under a second under glibc; the live sets are those in the
// programs' banners times the scale.

/// 2 threads replace random slots of a 10k-slot table (100k operations, cross-thread frees).
#[test]
fn server_process_mode() {
    assert_bound("server", &["0.1"], Allocator::Process);
}

#[test]
fn server_markers_mode() {
    assert_bound("server", &["0.1"], Allocator::Markers);
}

/// 10k long-lived records of 16-216 B, each allocated among four temporaries.
#[test]
fn loader_process_mode() {
    assert_bound("loader", &["0.1"], Allocator::Process);
}

#[test]
fn loader_markers_mode() {
    assert_bound("loader", &["0.1"], Allocator::Markers);
}

/// Random churn over 2,000 live blocks of 16-128 B (200k steps).
#[test]
fn churn_small_process_mode() {
    assert_bound("churn", &["0.1", "small"], Allocator::Process);
}

#[test]
fn churn_small_markers_mode() {
    assert_bound("churn", &["0.1", "small"], Allocator::Markers);
}

/// Random churn over 2,000 live blocks of 16 B-64 KiB, log-uniform (about 16 MB live).
#[test]
fn churn_log_process_mode() {
    assert_bound("churn", &["0.1", "log"], Allocator::Process);
}

#[test]
fn churn_log_markers_mode() {
    assert_bound("churn", &["0.1", "log"], Allocator::Markers);
}

/// 100 short-lived threads (two at a time), 10 MB of temporaries each, one 64-byte object kept.
#[test]
fn threads_process_mode() {
    assert_bound("threads", &["1"], Allocator::Process);
}

#[test]
fn threads_markers_mode() {
    assert_bound("threads", &["1"], Allocator::Markers);
}

/// 6,000 regions, each keeping one 100-byte result in a 2,000-entry LRU cache.
#[test]
fn lru_process_mode() {
    assert_bound("lru", &["0.2"], Allocator::Process);
}

#[test]
fn lru_markers_mode() {
    assert_bound("lru", &["0.2"], Allocator::Markers);
}

/// A 200 MB phase of 1-64 KiB blocks, all freed, then small steady churn.
#[test]
fn phase_process_mode() {
    assert_phase(Allocator::Process);
}

#[test]
fn phase_markers_mode() {
    assert_phase(Allocator::Markers);
}

/// calloc(1, 128 MiB), two bytes written, freed; then 20 rounds of the same with 64 MiB over the
/// memory the last round wrote (an allocator that clears it by writing faults in all 64 MiB).
#[test]
fn calloc_process_mode() {
    assert_bound("calloc", &["0.25"], Allocator::Process);
}

#[test]
fn calloc_markers_mode() {
    assert_bound("calloc", &["0.25"], Allocator::Markers);
}

/// 40 blocks of 5 MiB allocated, freed, then 100-byte pairs only, about a thousand a second:
/// the arena's free memory goes back within the purge delay of those small allocations (they
/// go to the small-block heap and reach the arena only through its predictor's count), not
/// after a few thousand of them. RSS 1 s into the small work <= 64 MiB.
#[test]
fn freed_phase_then_sparse_small_work_gives_the_phase_back_process_mode() {
    let (glibc, ours, mut failures) = compare("freed_phase", &["0.4"], Allocator::Process);
    let after = ours.metric("rss_1s_kib") as u64;
    eprintln!(
        "freed_phase 0.4: RSS 1 s after the phase: glibc {}, resizealloc {}, limit {}",
        mib(glibc.metric("rss_1s_kib") as u64),
        mib(after),
        mib(PHASE_AFTER_LIMIT_KIB)
    );
    assert!(
        ours.metric("rss_phase_kib") as u64 > 3 * PHASE_AFTER_LIMIT_KIB,
        "the phase was not resident"
    );
    if after > PHASE_AFTER_LIMIT_KIB {
        failures.push(format!(
            "freed_phase 0.4: RSS 1 s after the phase is {}, over {}",
            mib(after),
            mib(PHASE_AFTER_LIMIT_KIB)
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// 20 slots of 5-25 MB blocks, zeroed with a memset, replaced at random (80 replacements).
#[test]
fn bigslots_process_mode() {
    assert_bound("bigslots", &["0.2"], Allocator::Process);
}

#[test]
fn bigslots_markers_mode() {
    assert_bound("bigslots", &["0.2"], Allocator::Markers);
}

/// 20 threads one after another, each with 10 MB of temporaries, each keeping one object.
#[test]
fn serial_threads_process_mode() {
    assert_bound("serial_threads", &["0.2"], Allocator::Process);
}

#[test]
fn serial_threads_markers_mode() {
    assert_bound("serial_threads", &["0.2"], Allocator::Markers);
}

/// 4 threads hand tables of objects on each round, each freeing two thirds of what it gets.
#[test]
fn handoff_process_mode() {
    assert_bound("handoff", &["0.2"], Allocator::Process);
}

#[test]
fn handoff_markers_mode() {
    assert_bound("handoff", &["0.2"], Allocator::Markers);
}
