//! The main demo: the same repeated work with and without regions, under `ResizeAlloc`.
//!
//! Each "step" of the work builds a few temporary vectors and strings and throws them away, the
//! way a solver iteration or a request handler does. Outside regions every allocation goes to
//! `System` (glibc malloc); inside, to the thread's resize arena, which overflows once, resizes
//! to the peak and then serves every later run with zero overflow.
//!
//! Run: `cargo run --release --example demo`

use std::hint::black_box;
use std::time::Instant;

use resizealloc::{region, stats, ResizeAlloc};

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

/// One unit of repeated work: temporaries of many sizes, all dropped at the end.
fn work(seed: u64) -> u64 {
    let mut acc = 0u64;
    let mut keep: Vec<Vec<u64>> = Vec::new();
    for i in 0..200u64 {
        let v: Vec<u64> = (0..(4 + (seed + i) % 60)).map(|k| k ^ i).collect();
        acc = acc.wrapping_add(v[v.len() / 2]);
        if i % 8 == 0 {
            keep.push(v); // some temporaries live until the end of the step
        }
    }
    let name = format!("step {seed}");
    let big = vec![seed as u8; 64 << 10]; // one larger temporary per step
    acc + keep.len() as u64 + name.len() as u64 + big[4096] as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // Rounds of each mode, alternating, so that a busy machine slows both alike; the median
    // round counts.
    const ROUNDS: usize = 7;
    const STEPS: u64 = 3_000;

    region(|| black_box(work(0)));
    let first = stats().thread;
    let (mut plain, mut arena) = (0u64, 0u64);
    let (mut system_rounds, mut arena_rounds) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for s in 0..STEPS {
            plain = plain.wrapping_add(work(black_box(s)));
        }
        system_rounds.push(t.elapsed().as_nanos() as f64 / STEPS as f64);
        let t = Instant::now();
        for s in 0..STEPS {
            arena = arena.wrapping_add(region(|| work(black_box(s))));
        }
        arena_rounds.push(t.elapsed().as_nanos() as f64 / STEPS as f64);
    }
    let (system_ns, arena_ns) = (median(system_rounds), median(arena_rounds));
    let after = stats().thread;
    assert_eq!(plain, arena, "same work, same answer");

    // An escape: a value built inside a region and kept stays valid.
    let kept: Vec<String> = region(|| (0..100).map(|i| format!("kept {i}")).collect());
    for s in 0..1000 {
        region(|| black_box(work(s)));
    }
    assert!(kept
        .iter()
        .enumerate()
        .all(|(i, s)| *s == format!("kept {i}")));

    let regions = ROUNDS as u64 * STEPS;
    println!(
        "resizealloc demo: {ROUNDS} rounds of {STEPS} steps of work per mode, alternating \
         (~230 allocations each, one of 64 KiB); median round"
    );
    println!(
        "  System (outside regions): {:>9.2} us per step",
        system_ns / 1000.0
    );
    let speed = if arena_ns <= system_ns {
        format!("{:.2}x faster", system_ns / arena_ns)
    } else {
        format!("{:.2}x slower", arena_ns / system_ns)
    };
    println!(
        "  ResizeAlloc in regions:   {:>9.2} us per step   ({speed})",
        arena_ns / 1000.0
    );
    println!(
        "  first region: {} overflow allocations, resized to {} KiB (high water {} KiB)",
        first.overflow_allocs,
        first.arena_capacity >> 10,
        first.high_water >> 10
    );
    println!(
        "  next {regions} regions: {} region allocations, {} more overflow allocations, {} resizes in all",
        after.region_allocs - first.region_allocs,
        after.overflow_allocs - first.overflow_allocs,
        after.resizes
    );
    println!(
        "  an escaped Vec<String> of {} items survived 1000 later regions intact",
        kept.len()
    );
    let p = stats().process;
    println!(
        "  process: {} live arena(s), {} KiB capacity, {} KiB committed",
        p.arenas_live,
        p.arena_capacity >> 10,
        p.arena_committed >> 10
    );
    println!(
        "  shows: the same Rust code, with #[global_allocator] ResizeAlloc, is {speed} inside \
         regions, sized after one region, and escapes stay valid"
    );
}
