//! `fork` support: the core crate's locks are taken before `fork` and released after it in the
//! parent and the child, so that the child never inherits a lock held by a thread that does not
//! exist there (its next slow path would spin forever).
//!
//! Both front ends register the handlers: the preload library at load time (before any thread
//! exists), `ResizeAlloc` from its first slow path (and the Rust API's `region_begin`, `stats`
//! and `trim`, which take the slot table's lock without allocating). They register once per
//! copy of the crate (a Rust program that also preloads the library has two copies, each with
//! its own locks).
//!
//! Left open: a thread that forks while another is inside `register_handlers` (at the
//! process's first allocation) may fork before the handlers exist; and a Rust program whose
//! very first allocation happens inside another library's fork handler would call
//! `pthread_atfork` from there, which glibc does not allow.

use core::sync::atomic::{AtomicBool, Ordering};

use crate::{reservation, slab};

static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Registers the handlers with `pthread_atfork`, once. Must not be called from inside `malloc`
/// before the libc is ready (glibc may allocate to record the handlers): the preload library
/// calls it from its constructor, and the Rust front end's allocations never reach our
/// `malloc` through glibc.
#[inline]
pub fn register_handlers() {
    if !REGISTERED.load(Ordering::Relaxed) {
        register_slow();
    }
}

#[cold]
#[inline(never)]
fn register_slow() {
    if REGISTERED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: handlers with the right signatures, which never unwind.
    if unsafe { libc::pthread_atfork(Some(prepare), Some(finish), Some(finish)) } != 0 {
        // Out of memory in glibc: try again from the next slow path.
        REGISTERED.store(false, Ordering::Release);
    }
}

/// Takes every lock, in the order the slow paths take them: the slot table before the
/// small-block heap's (an arena is never acquired under a heap lock).
extern "C" fn prepare() {
    reservation::fork_prepare();
    slab::fork_prepare();
}

/// Releases what [`prepare`] took, in the parent and in the child.
extern "C" fn finish() {
    // SAFETY: pthread_atfork runs this after `prepare`, in the thread that forked (or its copy
    // in the child), so the locks are held by our own `prepare`.
    unsafe {
        slab::fork_finish();
        reservation::fork_finish();
    }
}
