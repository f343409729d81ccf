//! `examples/workloads/common.rs` under the `mimalloc` crate, without regions.
#[path = "workloads/common.rs"]
mod common;

#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    common::main::<common::NoRegion>()
}
