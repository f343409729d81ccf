//! The region advisor: at exit, the profiler's samples (profile/) become the report of region
//! candidates, the sites to keep out of them and the folded stacks of short-lived bytes (see
//! docs/advisor.md). Above the router: it measures the arena against the program's allocator
//! on a replay of each candidate's blocks.
//!
//! `report.rs` ranks and writes; `symbols.rs` names the frames.

mod report;
mod symbols;

use core::sync::atomic::{AtomicBool, Ordering};

static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Registers the report at exit, once, while the profiler runs (`RESIZEALLOC_PROFILE`). The
/// front ends call it: the preload library from its constructor, `ResizeAlloc` from each
/// allocation outside regions while the profiler runs (one load once registered; `atexit` may
/// allocate, and that allocation finds it registered).
#[inline]
pub fn register() {
    if REGISTERED.load(Ordering::Relaxed)
        || !crate::profile::enabled()
        || REGISTERED.swap(true, Ordering::AcqRel)
    {
        return;
    }
    // SAFETY: `report_at_exit` is an `extern "C" fn()` that never unwinds.
    unsafe { libc::atexit(report_at_exit) };
}

extern "C" fn report_at_exit() {
    crate::profile::inside(report::write);
}
