//! The region advisor's Rust program (the twin of `preload/tests/c/advisor.c`): temporaries
//! inside two functions (`parse_request`, the larger, and `score_batch`), long-lived data built
//! in a third (`remember`), all called from a loop. `tests/advisor.rs` profiles it and checks the
//! report; `examples/advisor.rs` runs it with and without a region around each call of
//! `parse_request`, for `scripts/advisor.sh` to set the saving against the report's estimate.

/// Temporaries: a parsed "request" of 48 fields, joined and dropped.
#[inline(never)]
pub fn parse_request(seed: u64) -> u64 {
    let fields: Vec<String> = (0..48)
        .map(|i| format!("field-{seed}-{i}-{}", "x".repeat((seed as usize + i) % 200)))
        .collect();
    let joined = fields.join(",");
    std::hint::black_box(joined.len() as u64)
}

/// Fewer, smaller temporaries.
#[inline(never)]
pub fn score_batch(seed: u64) -> u64 {
    let scores: Vec<Box<u64>> = (0..8).map(|i| Box::new(seed ^ i)).collect();
    scores.iter().map(|b| **b).sum()
}

/// Long-lived: kept until the end of the run, one allocation each.
#[inline(never)]
#[allow(clippy::vec_box)]
pub fn remember(kept: &mut Vec<Box<[u8; 40]>>, seed: u64) {
    kept.push(Box::new([seed as u8; 40]));
}

/// The loop: `rounds` requests, each call of `parse_request` in a region when `regions` is
/// set. Returns a checksum that must not change under profiling or regions.
#[inline(never)]
pub fn workload(rounds: u64, regions: bool) -> u64 {
    let mut kept = Vec::new();
    let mut sum = 0u64;
    for r in 0..rounds {
        let parsed = if regions {
            resizealloc::region(|| parse_request(r))
        } else {
            parse_request(r)
        };
        sum = sum.wrapping_add(parsed);
        sum = sum.wrapping_add(score_batch(r));
        if r % 64 == 0 {
            remember(&mut kept, r);
        }
    }
    sum.wrapping_add(kept.len() as u64)
}
