//! `examples/workloads/common.rs` under the `mimalloc` crate, without regions.
#[path = "workloads/common.rs"]
mod common;

#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct NoRegion;
impl common::Region for NoRegion {
    fn run<T>(f: impl FnOnce() -> T) -> T {
        f()
    }
}

fn main() {
    common::main::<NoRegion>()
}
