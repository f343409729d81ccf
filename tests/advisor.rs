//! The region advisor (`RESIZEALLOC_PROFILE`) under `#[global_allocator] ResizeAlloc`: this test
//! binary runs itself again with the option set (the options are read at the first
//! allocation), and the child's report on the advisor's Rust program
//! (`examples/advisor/program.rs`) must name the two functions with temporaries, in order of
//! bytes, and not the one that builds long-lived data.

use std::process::Command;

use resizealloc::ResizeAlloc;

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

#[path = "../examples/advisor/program.rs"]
mod program;

/// The rounds of the profiled run (a given rate of 16 KiB samples it densely enough).
const ROUNDS: u64 = 20_000;

/// The child's side: runs only when the parent test sets the option.
#[test]
#[ignore = "run by report_names_the_temporaries_under_resize_alloc"]
fn advisor_child() {
    if std::env::var_os("RESIZEALLOC_PROFILE").is_none() {
        return;
    }
    println!("checksum {}", program::workload(ROUNDS, false));
}

#[test]
fn report_names_the_temporaries_under_resize_alloc() {
    let dir = std::env::temp_dir().join(format!("resizealloc-advisor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "advisor_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RESIZEALLOC_PROFILE", &report)
        .env("RESIZEALLOC_PROFILE_RATE", "16K")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let expected = format!("checksum {}", program::workload(ROUNDS, false));
    assert!(stdout.contains(&expected), "output changed: {stdout}");
    let text = std::fs::read_to_string(&report).unwrap();
    let ranked: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Region candidates"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let pos = |name: &str| ranked.iter().position(|l| l.contains(name));
    let (p, s) = (pos("program::parse_request"), pos("program::score_batch"));
    assert!(p.is_some() && s.is_some() && p < s, "candidates:\n{text}");
    assert!(
        pos("program::remember").is_none(),
        "remember is no candidate:\n{text}"
    );
    assert!(
        text.contains("advisor/program.rs:"),
        "file:line from the debug info:\n{text}"
    );
    let folded = std::fs::read_to_string(dir.join("report.folded")).unwrap();
    assert!(
        folded.lines().any(|l| l.contains("program::parse_request")),
        "{folded}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
