//! `examples/workloads/common.rs` under `std::alloc::System` (glibc), without regions.
#[path = "workloads/common.rs"]
mod common;

struct NoRegion;
impl common::Region for NoRegion {
    fn run<T>(f: impl FnOnce() -> T) -> T {
        f()
    }
}

fn main() {
    common::main::<NoRegion>()
}
