//! `examples/workloads/common.rs` under `ResizeAlloc` (over `System`), a region per request.
#[path = "workloads/common.rs"]
mod common;

#[global_allocator]
static A: resizealloc::ResizeAlloc = resizealloc::ResizeAlloc::new();

struct Regions;
impl common::Region for Regions {
    fn run<T>(f: impl FnOnce() -> T) -> T {
        resizealloc::region(f)
    }
}

fn main() {
    common::main::<Regions>()
}
