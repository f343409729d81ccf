//! The region advisor (`RESIZEALLOC_PROFILE`) on `tests/c/advisor.c`: temporaries inside
//! `parse_request` (the most bytes) and `score_batch`, long-lived nodes built by `remember`.
//! The report must name the first two as region candidates, in that order, and not the third;
//! the program's output must not change; the profile's memory stays bounded; threads, `fork`
//! and `dlclose` work; bad option values get a warning, a report file that cannot be written
//! goes to stderr. `scripts/advisor.sh` measures the estimate against a region's real saving
//! and the overhead.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{assert_ok, compile_as, compile_with, library, preloaded, text, work_dir};

/// `tests/c/advisor.c`, compiled once for all the tests of this binary.
fn advisor() -> PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| compile_as("advisor", "advisor", false))
        .clone()
}

/// Runs the program with the profiler writing to `name` in the work directory; its output and
/// the report.
fn profiled(args: &[&str], name: &str, env: &[(&str, &str)]) -> (Output, String, PathBuf) {
    profiled_at(Some("16K"), args, name, env)
}

/// [`profiled`] at a sampling rate of `rate`, or at the default (paced) rate for `None`.
fn profiled_at(
    rate: Option<&str>,
    args: &[&str],
    name: &str,
    env: &[(&str, &str)],
) -> (Output, String, PathBuf) {
    profiled_program(&advisor(), rate, args, name, env)
}

/// [`profiled_at`] for another build of the program, `exe`.
fn profiled_program(
    exe: &std::path::Path,
    rate: Option<&str>,
    args: &[&str],
    name: &str,
    env: &[(&str, &str)],
) -> (Output, String, PathBuf) {
    let path = work_dir().join(name);
    let _ = std::fs::remove_file(&path);
    let mut cmd = Command::new(exe);
    cmd.args(args).env_remove("RESIZEALLOC_PROFILE_RATE");
    let p = path.to_str().unwrap().to_string();
    let mut all = vec![("RESIZEALLOC_PROFILE", p.as_str())];
    if let Some(r) = rate {
        all.push(("RESIZEALLOC_PROFILE_RATE", r));
    }
    all.extend_from_slice(env);
    let out = preloaded(cmd, &all);
    assert!(
        out.status.success(),
        "advisor.c failed: {:?}\n{}",
        out.status,
        text(&out.stderr)
    );
    let report = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}", path.display()));
    (out, report, path)
}

/// The ranked candidates' function names, in report order.
fn candidates(report: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in report.lines() {
        if line.starts_with("Region candidates") {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() {
                break;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.first().is_some_and(|f| f.parse::<usize>().is_ok()) {
                // The line ends with the function, then its `(file:line)` where known.
                let mut rest = fields.iter().rev();
                let last = rest.next().copied().unwrap_or("");
                let f = if last.starts_with('(') {
                    rest.next().copied().unwrap_or("")
                } else {
                    last
                };
                names.push(f.to_string());
            }
        }
    }
    names
}

fn checksum(out: &Output) -> String {
    text(&out.stdout)
        .lines()
        .find(|l| l.starts_with("checksum"))
        .unwrap_or("")
        .to_string()
}

/// The report's count of stacks from the fast walk and from the unwinder.
fn walks(report: &str) -> (u64, u64) {
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("call stacks:"))
        .unwrap_or_else(|| panic!("no count of stacks:\n{report}"));
    let n: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(n.len(), 2, "{line}");
    (n[0], n[1])
}

/// glibc 2.35 or later (`_dl_find_object`, which the fast walk needs).
fn glibc_has_dl_find_object() -> bool {
    let out = Command::new("getconf").arg("GNU_LIBC_VERSION").output();
    let Ok(out) = out else { return false };
    let v = String::from_utf8_lossy(&out.stdout);
    let mut parts = v.trim().trim_start_matches("glibc ").split('.');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (2, 35)
}

#[test]
fn names_the_two_temporary_functions_by_bytes_and_not_the_builder() {
    for threads in ["1", "2"] {
        let plain = Command::new(advisor())
            .args(["plain", "20000", threads])
            .output()
            .unwrap();
        let (out, report, path) = profiled(
            &["plain", "20000", threads],
            &format!("report-{threads}"),
            &[],
        );
        assert_eq!(
            checksum(&out),
            checksum(&plain),
            "output changed under profiling"
        );
        let c = candidates(&report);
        assert!(
            c.len() >= 2 && c[0] == "parse_request" && c[1] == "score_batch",
            "{threads} thread(s): candidates {c:?}\n{report}"
        );
        assert!(
            !c.iter().any(|n| n == "remember"),
            "remember is no candidate:\n{report}"
        );
        assert!(
            report.contains("advisor.c:"),
            "file:line from the debug info:\n{report}"
        );
        let (fast, unwound) = walks(&report);
        if glibc_has_dl_find_object() {
            assert!(
                fast > 0 && unwound == 0,
                "every stack from the fast walk:\n{report}"
            );
        }
        let folded = std::fs::read_to_string(path.with_extension("folded"))
            .or_else(|_| std::fs::read_to_string(format!("{}.folded", path.display())))
            .unwrap();
        let line = folded
            .lines()
            .find(|l| l.contains(";parse_request "))
            .expect("folded stack");
        let bytes: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(line.contains(";run;parse_request") && bytes > 0, "{line}");
    }
}

/// A program with debug info but no full symbol table (`.symtab` stripped, the dynamic one
/// kept, exporting `main` and `_start` but not the static functions): the candidates are named
/// from DWARF, not after an exported symbol below them.
#[test]
fn a_program_without_its_symbol_table_is_named_from_its_debug_info() {
    let exported = compile_with("advisor", "advisor_exported", false, &["-rdynamic"]);
    let exe = work_dir().join("advisor_debug_only");
    let status = Command::new("objcopy")
        .args(["--strip-all", "--keep-section=.debug_*"])
        .arg(&exported)
        .arg(&exe)
        .status()
        .expect("objcopy");
    assert!(status.success(), "objcopy");
    let sections = text(
        &Command::new("readelf")
            .arg("-S")
            .arg(&exe)
            .output()
            .expect("readelf")
            .stdout,
    );
    assert!(
        sections.contains(".debug_info") && !sections.contains(".symtab"),
        "debug info without a symbol table:\n{sections}"
    );
    let (_, report, _) = profiled_program(
        &exe,
        Some("16K"),
        &["plain", "20000"],
        "report-debug-only",
        &[],
    );
    let c = candidates(&report);
    assert!(
        c.len() >= 2 && c[0] == "parse_request" && c[1] == "score_batch",
        "candidates {c:?}\n{report}"
    );
}

/// The first line of a report: its run, samples and rate.
fn rate_line(report: &str) -> &str {
    report.lines().next().unwrap_or("")
}

#[test]
fn the_default_rate_is_paced_and_a_given_rate_is_kept() {
    // About 25 GB/s allocated: at the default start of 512 KiB the profiler's stack walks take
    // well over its share, so the rate goes up; the candidates stay what they are.
    let (_, report, _) = profiled_at(None, &["plain", "200000"], "report-paced", &[]);
    let line = rate_line(&report);
    assert!(
        line.contains("from 512.0 KiB on at the start: paced"),
        "the default rate paced:\n{report}"
    );
    let c = candidates(&report);
    assert!(
        c.len() >= 2 && c[0] == "parse_request" && c[1] == "score_batch",
        "candidates at the paced rate {c:?}\n{report}"
    );
    let (_, report, _) = profiled_at(Some("512K"), &["plain", "200000"], "report-given", &[]);
    let line = rate_line(&report);
    assert!(
        line.contains("one per 512.0 KiB allocated on average,") && !line.contains("paced"),
        "a given rate stays as given:\n{report}"
    );
}

#[test]
fn works_in_process_mode_and_inside_regions() {
    for (mode, args) in [("process", ["plain", "20000"]), ("on", ["region", "20000"])] {
        let (_, report, _) = profiled(
            &args,
            &format!("report-{mode}"),
            &[("RESIZEALLOC_REGION", mode)],
        );
        let c = candidates(&report);
        if mode == "process" {
            assert_eq!(
                c.first().map(String::as_str),
                Some("parse_request"),
                "{report}"
            );
        } else {
            // parse_request's calls are regions already: its blocks are not sampled. Every
            // sample is then inside score_batch, so its calls look like one (no sample falls
            // between them): a whole-thread frame, or a candidate.
            assert!(!report.contains("parse_request"), "{report}");
            assert!(report.contains("score_batch"), "{report}");
        }
    }
}

/// Every allocation sampled: the tables fill, samples are dropped, the run goes on, and the
/// profile's memory stays within its fixed tables.
#[test]
fn the_profile_memory_stays_bounded() {
    let peak = |out: &Output| -> u64 {
        text(&out.stderr)
            .lines()
            .find_map(|l| l.strip_prefix("anon_kib "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let mut cmd = Command::new(advisor());
    cmd.args(["plain", "20000"]);
    let plain = preloaded(cmd, &[("ADVISOR_ANON", "1")]);
    let (out, report, _) = profiled(
        &["plain", "20000"],
        "report-bounded",
        &[("RESIZEALLOC_PROFILE_RATE", "1"), ("ADVISOR_ANON", "1")],
    );
    assert_eq!(checksum(&out), checksum(&plain));
    let grown = peak(&out).saturating_sub(peak(&plain));
    assert!(peak(&plain) > 0, "no anonymous memory printed");
    assert!(grown < 16 << 10, "the profile took {grown} KiB\n{report}");
}

#[test]
fn fork_and_dlclose_work_under_the_profiler() {
    let (out, report, path) = profiled(&["fork", "5000"], "report-fork", &[]);
    assert!(
        checksum(&out).starts_with("checksum"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        candidates(&report).first().map(String::as_str),
        Some("parse_request"),
        "{report}"
    );
    // The child's own report, with its pid appended.
    let dir = path.parent().unwrap();
    let child = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("report-fork.") && !n.ends_with(".folded")
        })
        .expect("the forked child's report");
    let child_report = std::fs::read_to_string(&child).unwrap();
    assert_eq!(
        candidates(&child_report).first().map(String::as_str),
        Some("parse_request"),
        "{child_report}"
    );
    let _ = std::fs::remove_file(child);

    let dir = work_dir();
    let exe = compile_as("dlclose", "dlclose", false);
    let out = Command::new(&exe)
        .arg(library())
        .env(
            "RESIZEALLOC_PROFILE",
            dir.join("report-dl").to_str().unwrap(),
        )
        .output()
        .unwrap();
    assert_ok(&out, "dlclose.c under the profiler");
}

#[test]
fn bad_values_get_a_warning_and_an_unwritable_file_goes_to_stderr() {
    let mut cmd = Command::new(advisor());
    cmd.args(["plain", "2000"]);
    let out = preloaded(
        cmd,
        &[
            ("RESIZEALLOC_PROFILE", "/nonexistent/dir/report"),
            ("RESIZEALLOC_PROFILE_RATE", "lots"),
        ],
    );
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("RESIZEALLOC_PROFILE_RATE"), "{err}");
    assert!(err.contains("cannot write the report file"), "{err}");
    assert!(err.contains("Region candidates"), "{err}");
}

/// `1.2K`, `3.4M`, `5.6G` or a plain count, as the report writes counts.
fn parse_count(s: &str) -> f64 {
    let (num, mult) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 1e3),
        Some('M') => (&s[..s.len() - 1], 1e6),
        Some('G') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    num.parse::<f64>()
        .unwrap_or_else(|_| panic!("no count: {s}"))
        * mult
}

/// `12 B`, `3.4 KiB`, `5.6 MiB` or `7.8 GiB`, as the report writes sizes.
fn parse_bytes(num: &str, unit: &str) -> f64 {
    let mult = match unit.trim_end_matches([',', ';']) {
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => 1.0,
    };
    num.parse::<f64>()
        .unwrap_or_else(|_| panic!("no size: {num}"))
        * mult
}

/// A value countdown.c printed.
fn printed(out: &Output, key: &str) -> f64 {
    text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("countdown.c printed no {key}:\n{}", text(&out.stdout)))
}

/// The countdown (in `malloc`'s assembly, and its twin in the other build) samples as often as
/// the rate says and every block of 1 MiB or more, whatever the requests' mix of sizes and of
/// `malloc` and `calloc`: the report's estimates of what was allocated match what the program
/// counted.
#[test]
fn the_countdown_samples_at_the_rate_and_every_large_block() {
    let exe = compile_as("countdown", "countdown", false);
    let path = work_dir().join("report-countdown");
    let _ = std::fs::remove_file(&path);
    let mut cmd = Command::new(&exe);
    cmd.arg("4000");
    let out = preloaded(
        cmd,
        &[
            ("RESIZEALLOC_PROFILE", path.to_str().unwrap()),
            ("RESIZEALLOC_PROFILE_RATE", "64K"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = std::fs::read_to_string(&path).unwrap();
    let (allocations, bytes, large) = (
        printed(&out, "allocations "),
        printed(&out, "bytes "),
        printed(&out, "large "),
    );
    let first: Vec<&str> = rate_line(&report).split_whitespace().collect();
    let samples: f64 = first
        .iter()
        .position(|w| w.starts_with("samples"))
        .and_then(|i| first[i - 1].parse().ok())
        .unwrap_or_else(|| panic!("no samples:\n{report}"));
    let totals: Vec<&str> = report
        .lines()
        .find(|l| l.trim_start().starts_with("outside regions: about"))
        .unwrap_or_else(|| panic!("no totals:\n{report}"))
        .split_whitespace()
        .collect();
    let (est_allocations, est_bytes) = (parse_count(totals[3]), parse_bytes(totals[5], totals[6]));
    // The small blocks' bytes at one sample per 64 KiB on average, and every large block.
    let large_bytes = large / 2.0 * ((3 << 19) + (2 << 20)) as f64;
    let expected = (bytes - large_bytes) / (64 << 10) as f64 + large;
    assert!(
        samples >= large && (samples - expected).abs() < 0.2 * expected,
        "{samples} samples, {expected:.0} expected ({large} large blocks)\n{report}"
    );
    assert!(
        (est_allocations - allocations).abs() < 0.1 * allocations,
        "about {est_allocations} allocations estimated, {allocations} made\n{report}"
    );
    assert!(
        (est_bytes - bytes).abs() < 0.1 * bytes,
        "about {est_bytes} bytes estimated, {bytes} allocated\n{report}"
    );
}
