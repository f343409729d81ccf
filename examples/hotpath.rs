//! Instruction counts of the hot paths, for `scripts/callgrind.sh`: runs N alloc+free pairs of
//! one 80-byte block (the Bumper loop's `Vec<i64>` of 10) through one allocator.
//! Usage: hotpath <region|outside|system|bumpalo> <N>

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

use resizealloc::ResizeAlloc;

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

#[inline(never)]
fn pairs<G: GlobalAlloc>(g: &G, n: u64) {
    let layout = Layout::from_size_align(80, 8).unwrap();
    for _ in 0..n {
        // SAFETY: non-zero layout; freed once with the same layout.
        unsafe {
            let p = black_box(g.alloc(layout));
            g.dealloc(p, layout);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args[2].parse().unwrap();
    match args[1].as_str() {
        "region" => resizealloc::region(|| pairs(&A, n)),
        "outside" => pairs(&A, n),
        "system" => pairs(&System, n),
        "bumpalo" => {
            let b = bumpalo::Bump::new();
            let layout = Layout::from_size_align(80, 8).unwrap();
            for _ in 0..n {
                black_box(b.alloc_layout(layout));
            }
        }
        other => panic!("unknown mode {other}"),
    }
}
