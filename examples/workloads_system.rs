//! `examples/workloads/common.rs` under `std::alloc::System` (glibc), without regions.
#[path = "workloads/common.rs"]
mod common;

fn main() {
    common::main::<common::NoRegion>()
}
