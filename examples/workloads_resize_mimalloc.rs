//! `examples/workloads/common.rs` under `ResizeAlloc::wrap(MiMalloc)`, a region per request.
#[path = "workloads/common.rs"]
mod common;

#[global_allocator]
static A: resizealloc::ResizeAlloc<mimalloc::MiMalloc> =
    resizealloc::ResizeAlloc::wrap(mimalloc::MiMalloc);

fn main() {
    common::main::<common::Regions>()
}
