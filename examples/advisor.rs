//! The region advisor's Rust program (`examples/advisor/program.rs`) under `ResizeAlloc`.
//!
//! Usage: `advisor [plain|region] [ROUNDS]` (`plain`, 100000 by default): `region` puts each
//! call of `parse_request` in a region, as the report advises. Prints the checksum on stdout
//! and the loop's time on stderr as `loop_ns N`, as `preload/tests/c/advisor.c` does.
#[path = "advisor/program.rs"]
mod program;

use std::time::Instant;

#[global_allocator]
static A: resizealloc::ResizeAlloc = resizealloc::ResizeAlloc::new();

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let regions = match args.get(1).map(String::as_str) {
        None | Some("plain") => false,
        Some("region") => true,
        Some(other) => {
            eprintln!("advisor: unknown mode {other:?} (plain or region)");
            std::process::exit(2);
        }
    };
    let rounds = match args.get(2).map(|s| s.parse::<u64>()) {
        None => 100_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("advisor: ROUNDS must be a positive integer");
            std::process::exit(2);
        }
    };
    let t0 = Instant::now();
    let sum = program::workload(rounds, regions);
    eprintln!("loop_ns {}", t0.elapsed().as_nanos());
    println!("checksum {sum}");
}
