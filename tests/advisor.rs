//! The region advisor (`RESIZEALLOC_PROFILE`) under `#[global_allocator] ResizeAlloc`: this test
//! binary runs itself again with the option set (the options are read at the first
//! allocation), and the child's report must name the two functions with temporaries, in order
//! of bytes, and not the one that builds long-lived data.

use std::process::Command;

use resizealloc::ResizeAlloc;

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

/// Temporaries: a parsed "request" of 48 fields, joined and dropped.
#[inline(never)]
fn parse_request(seed: u64) -> u64 {
    let fields: Vec<String> = (0..48)
        .map(|i| format!("field-{seed}-{i}-{}", "x".repeat((seed as usize + i) % 200)))
        .collect();
    let joined = fields.join(",");
    std::hint::black_box(joined.len() as u64)
}

/// Fewer, smaller temporaries.
#[inline(never)]
fn score_batch(seed: u64) -> u64 {
    let scores: Vec<Box<u64>> = (0..8).map(|i| Box::new(seed ^ i)).collect();
    scores.iter().map(|b| **b).sum()
}

/// Long-lived: kept until the end of the run, one allocation each.
#[inline(never)]
#[allow(clippy::vec_box)]
fn remember(kept: &mut Vec<Box<[u8; 40]>>, seed: u64) {
    kept.push(Box::new([seed as u8; 40]));
}

#[inline(never)]
fn workload() -> u64 {
    let mut kept = Vec::new();
    let mut sum = 0u64;
    for r in 0..20_000u64 {
        sum = sum.wrapping_add(parse_request(r));
        sum = sum.wrapping_add(score_batch(r));
        if r % 64 == 0 {
            remember(&mut kept, r);
        }
    }
    sum.wrapping_add(kept.len() as u64)
}

/// The child's side: runs only when the parent test sets the option.
#[test]
#[ignore = "run by report_names_the_temporaries_under_resize_alloc"]
fn advisor_child() {
    if std::env::var_os("RESIZEALLOC_PROFILE").is_none() {
        return;
    }
    println!("checksum {}", workload());
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
    let expected = format!("checksum {}", workload());
    assert!(stdout.contains(&expected), "output changed: {stdout}");
    let text = std::fs::read_to_string(&report).unwrap();
    let ranked: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Region candidates"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let pos = |name: &str| ranked.iter().position(|l| l.contains(name));
    let (p, s) = (pos("advisor::parse_request"), pos("advisor::score_batch"));
    assert!(p.is_some() && s.is_some() && p < s, "candidates:\n{text}");
    assert!(
        pos("advisor::remember").is_none(),
        "remember is no candidate:\n{text}"
    );
    assert!(
        text.contains("tests/advisor.rs:"),
        "file:line from the debug info:\n{text}"
    );
    let folded = std::fs::read_to_string(dir.join("report.folded")).unwrap();
    assert!(
        folded.lines().any(|l| l.contains("advisor::parse_request")),
        "{folded}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
