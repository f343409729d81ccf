//! `examples/workloads/common.rs` under `ResizeAlloc` (over `System`), a region per request.
#[path = "workloads/common.rs"]
mod common;

#[global_allocator]
static A: resizealloc::ResizeAlloc = resizealloc::ResizeAlloc::new();

fn main() {
    common::main::<common::Regions>()
}
