//! The malloc family's decisions, for a front end whose next allocator is a set of C functions
//! (the preload library): per request, the active arena's fast path, the arena's slow path, the
//! lifetime predictor, the small-block heap or the next allocator. The front end calls one of
//! these once per request and keeps only the C ABI: errno, the site stubs, the next allocator's
//! lookup (its [`Next`]).
//!
//! Every function is generic over the front end's [`Next`], a type with no data: the calls to
//! it compile to direct calls, as if the front end had written them. `malloc`'s assembly entry
//! point (the preload library's `entry_x86_64.rs`) jumps to [`malloc_slow`],
//! [`malloc_unrouted`] and [`malloc_predicted`], `free`'s to [`free_foreign_watched`] and
//! [`free_slow`].

use core::ptr;
use core::sync::atomic::Ordering;

use super::{
    alloc_predicted_general, alloc_routed_away, alloc_slow_at, alloc_small_cached, alloc_zeroed,
    free_owned_not_recent, free_small, note_next_free, owns_small, route, try_alloc_predicted_fast,
    Route,
};
use crate::arena::{Arena, Predicted, LINE, MIN_ALIGN};
use crate::profile;
use crate::region::{self, ThreadState};

/// The next allocator of a front end, and the work the front end does on the way to it.
pub trait Next {
    /// The next allocator's `malloc`.
    fn malloc(size: usize) -> *mut u8;
    /// The next allocator's `calloc`.
    fn calloc(n: usize, size: usize) -> *mut u8;
    /// The next allocator's `free`.
    ///
    /// # Safety
    /// `p` is null or a block of the next allocator that [`Next::is_boot`] did not claim.
    unsafe fn free(p: *mut u8);
    /// True for a block the front end served itself before the next allocator was found.
    fn is_boot(p: *mut u8) -> bool;
    /// One free to the next allocator in `region::NEXT_FREE_SAMPLE` (process mode): its bytes,
    /// for the front end's give-back of the next allocator's free memory.
    fn sample_free(p: *mut u8);
    /// True while a give-back of the next allocator's free memory waits to run (one load).
    fn give_back_pending() -> bool;
    /// Runs that give-back, if one waits.
    fn run_pending_give_back();
}

/// `malloc` for a caller at `site`.
#[inline(always)]
pub fn malloc_at<N: Next>(size: usize, site: usize) -> *mut u8 {
    match route() {
        Route::Arena(a) => malloc_in::<N>(size, site, a),
        Route::Next => N::malloc(size),
        Route::Check | Route::Countdown => malloc_unrouted::<N>(size, site),
        Route::Predict => malloc_predicted::<N>(size.max(1), site),
    }
}

/// `malloc` for a thread with no route, or with the profiler's (`region::COUNTDOWN`): the
/// profiler's countdown while it runs, else [`malloc_slow`], which looks at the mode (and
/// settles the thread). `extern "C"`: `malloc`'s assembly entry point reaches it (for the
/// countdown's route, only when the request did not fit in what was left).
#[inline(never)]
pub extern "C" fn malloc_unrouted<N: Next>(size: usize, site: usize) -> *mut u8 {
    if profile::enabled() {
        let sampled = profile::take_sample(size);
        if !sampled && crate::mode::passes_through() {
            region::settle_outside();
            return N::malloc(size);
        }
        return malloc_profiled::<N>(size, site, sampled);
    }
    malloc_slow::<N>(size, site)
}

/// `malloc` outside regions while the profiler runs, past its common case: a sampled request
/// goes to the next allocator (timed and recorded), the rest where the mode sends it.
#[inline(never)]
fn malloc_profiled<N: Next>(size: usize, site: usize, sampled: bool) -> *mut u8 {
    if sampled {
        return profile::sampled_alloc(size, || N::malloc(size));
    }
    let ts = region::state();
    if ts.flags.get() & region::JOINED != 0 {
        return region::as_predicted(ts, || malloc_predicted::<N>(size.max(1), site));
    }
    malloc_slow::<N>(size, site)
}

/// `malloc` from `a`, the calling thread's active arena: its fast path, else the slow path.
///
/// It needs no site: an active arena's slow path takes every request (`alloc_slow_at` reads the
/// site only for a thread with no active arena). So `site` may be anything (the entry point
/// passes whatever the program left in that register): it is passed on to the slow path
/// unread, where a constant cost an instruction, and a dropped argument made the compiler move
/// `a` out of the third register, where the entry point put it.
///
/// A block under a page is served inline; anything else is one jump to
/// [`malloc_in_aligned`]: in one function the compiler joined the two paths at their common
/// tail, and the small one then jumped to it.
#[inline(always)]
fn malloc_in<N: Next>(size: usize, site: usize, a: *const Arena) -> *mut u8 {
    if crate::arena::is_small_request(size) {
        // SAFETY: the thread's own active arena; `size` is 1 to a page less one.
        let p = unsafe { (*a).try_alloc_fast_small(size) };
        if !p.is_null() {
            return p;
        }
        return malloc_slow::<N>(size, site);
    }
    malloc_in_aligned::<N>(size, site, a)
}

/// [`malloc_in`] for a block of a page or more, or of 0 bytes (declined, then served by the
/// slow path).
#[inline(never)]
fn malloc_in_aligned<N: Next>(size: usize, site: usize, a: *const Arena) -> *mut u8 {
    // A page or more starts on a cache line (`block_align`): asking for that alignment says so
    // as a constant, where `MIN_ALIGN` would leave the compiler to pick it by size.
    // SAFETY: the thread's own active arena; LINE is a power of two; a size of 0 is declined.
    let p = unsafe { (*a).try_alloc_fast_aligned(size, LINE) };
    if !p.is_null() {
        return p;
    }
    malloc_slow::<N>(size, site)
}

/// `malloc` past the fast paths. `site` is the program's return address, read only when the
/// thread has no active arena (`alloc_slow_at`); with one it may be anything. `extern "C"`:
/// `malloc`'s assembly entry point jumps to it.
#[cold]
#[inline(never)]
pub extern "C" fn malloc_slow<N: Next>(size: usize, site: usize) -> *mut u8 {
    let p = alloc_slow_at(size.max(1), MIN_ALIGN, site);
    if !p.is_null() {
        return p;
    }
    // A thread's first small request in process mode (it joins here, and the arena declines
    // small requests): the small-block heap, as for every later one.
    malloc_routed_away::<N>(size)
}

/// Process mode (and regions that leave blocks behind): the predictor picks the side. The
/// common cases call nothing (so need no stack frame); the rest is one tail call. `size >= 1`.
#[inline(never)]
pub fn malloc_predicted<N: Next>(size: usize, site: usize) -> *mut u8 {
    // The thread's state once, for the predictor and the small-block heap's cache.
    let ts = region::state();
    // SAFETY: size at least 1 (the caller's obligation); `ts` is the calling thread's.
    match unsafe { try_alloc_predicted_fast(ts, size, site) } {
        Predicted::Block(p) => p,
        Predicted::Small => malloc_small::<N>(ts, size),
        // The arena answers `Small` for everything the small-block heap would take, so this is
        // the next allocator's (markers mode's predicting regions, large requests).
        Predicted::Next => N::malloc(size),
        Predicted::General => malloc_predicted_general::<N>(size, site),
    }
}

/// A small request in process mode: the thread's cache of its class in the small-block heap,
/// else one tail call to the rest of the heap (and the next allocator when the heap has no
/// memory).
#[inline(always)]
fn malloc_small<N: Next>(ts: &ThreadState, size: usize) -> *mut u8 {
    // Small requests never take the predictor's general path, where a pending give-back
    // otherwise runs: a program that goes on with small blocks only after freeing a phase to
    // the next allocator runs it here (one load while none is pending).
    if N::give_back_pending() {
        return malloc_small_uncached::<N>(size);
    }
    let p = alloc_small_cached(ts, size);
    if !p.is_null() {
        return p;
    }
    malloc_small_uncached::<N>(size)
}

/// [`malloc_small`] past the thread's cache: a pending give-back, then the rest of the
/// routed-away path (the class's page, a new page or the thread's first heap, else the next
/// allocator), out of line so that [`malloc_predicted`] needs no stack frame for it.
#[inline(never)]
fn malloc_small_uncached<N: Next>(size: usize) -> *mut u8 {
    N::run_pending_give_back();
    malloc_routed_away::<N>(size)
}

/// A block the predictor sent away from the arena: in process mode the small-block heap for
/// small requests, the next allocator for the rest (or when the heap has no memory).
#[inline(always)]
fn malloc_routed_away<N: Next>(size: usize) -> *mut u8 {
    let p = alloc_routed_away(size.max(1));
    if !p.is_null() {
        return p;
    }
    N::malloc(size)
}

/// Everything [`malloc_predicted`]'s fast path left: sampling, probes, the sweep, the arena's
/// slow path; the next allocator when the arena declines.
#[inline(never)]
fn malloc_predicted_general<N: Next>(size: usize, site: usize) -> *mut u8 {
    // Every process-mode allocation stream passes here within a few thousand allocations
    // (samples of short sites, probes of long ones), wherever its blocks go: a pending
    // give-back runs soon after allocation resumes, off the paths every allocation takes.
    N::run_pending_give_back();
    // SAFETY: size at least 1, MIN_ALIGN a power of two.
    let p = unsafe { alloc_predicted_general(size.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p;
    }
    malloc_routed_away::<N>(size)
}

/// `calloc` of `n` elements of `size` bytes, `total` bytes in all (the caller checked that the
/// product does not overflow), for a caller at `site`.
#[inline(always)]
pub fn calloc_at<N: Next>(n: usize, size: usize, total: usize, site: usize) -> *mut u8 {
    match route() {
        Route::Arena(a) => {
            // SAFETY: the thread's own active arena (a size of 0 is declined, and served by
            // the slow path).
            let p = unsafe { (*a).try_alloc_zeroed_fast(total) };
            if !p.is_null() {
                return p;
            }
            calloc_slow::<N>(n, size, total, site)
        }
        Route::Next => N::calloc(n, size),
        Route::Predict => calloc_predicted::<N>(n, size, total, site),
        Route::Check | Route::Countdown => calloc_unrouted::<N>(n, size, total, site),
    }
}

/// `calloc` for a thread with no route: as [`malloc_unrouted`].
#[inline(never)]
fn calloc_unrouted<N: Next>(n: usize, size: usize, total: usize, site: usize) -> *mut u8 {
    if !profile::enabled() {
        return calloc_slow::<N>(n, size, total, site);
    }
    if profile::take_sample(total) {
        return profile::sampled_alloc(total, || N::calloc(n, size));
    }
    if crate::mode::passes_through() {
        region::settle_outside();
        return N::calloc(n, size);
    }
    let ts = region::state();
    if ts.flags.get() & region::JOINED != 0 {
        return region::as_predicted(ts, || calloc_predicted::<N>(n, size, total, site));
    }
    calloc_slow::<N>(n, size, total, site)
}

/// `calloc` through the predictor: the arena, else the small-block heap (cleared here), else
/// the next allocator.
#[inline(never)]
fn calloc_predicted<N: Next>(n: usize, size: usize, total: usize, site: usize) -> *mut u8 {
    // SAFETY: size at least 1, MIN_ALIGN a power of two.
    let p = unsafe { alloc_zeroed(total.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p;
    }
    let p = alloc_routed_away(total.max(1));
    if !p.is_null() {
        // SAFETY: a fresh block of at least `total` bytes.
        unsafe { ptr::write_bytes(p, 0, total) };
        return p;
    }
    N::calloc(n, size)
}

#[inline(never)]
fn calloc_slow<N: Next>(n: usize, size: usize, total: usize, site: usize) -> *mut u8 {
    // SAFETY: size at least 1, MIN_ALIGN a power of two. The arena clears the block unless its
    // memory is known to be fresh from the kernel.
    let p = unsafe { alloc_zeroed(total.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p;
    }
    // A thread's first small request in process mode, as in `malloc_slow`.
    let p = alloc_routed_away(total.max(1));
    if !p.is_null() {
        // SAFETY: a fresh block of at least `total` bytes.
        unsafe { ptr::write_bytes(p, 0, total) };
        return p;
    }
    N::calloc(n, size)
}

/// A free of a pointer outside the arena while frees to the next allocator are watched:
/// small-block heap blocks go back to it, bootstrap blocks stay, process mode samples. Not
/// cold: in process mode it is the common free. `extern "C"`: `free`'s assembly entry point
/// jumps to it.
///
/// # Safety
/// `p` is null or a block outside the arena reservation that the program frees.
#[inline(never)]
pub unsafe extern "C" fn free_foreign_watched<N: Next>(p: *mut u8) {
    if crate::mode::FOREIGN_WATCH.load(Ordering::Relaxed) == crate::mode::WATCH_PROFILE
        && !profile::maybe_sampled(p)
    {
        // Only the profiler watches (markers mode, nothing served by the front end or the
        // small-block heap, so no bootstrap block exists either), and `p` is not a sampled
        // block: straight on.
        // SAFETY: not ours (the caller's obligation), not a bootstrap block.
        return unsafe { N::free(p) };
    }
    if owns_small(p) {
        // SAFETY: a block of the small-block heap that the program frees.
        return unsafe { free_small(p) };
    }
    if p.is_null() || N::is_boot(p) {
        return;
    }
    if note_next_free() {
        N::sample_free(p);
    }
    if profile::enabled() && profile::maybe_sampled(p) {
        // SAFETY: not ours, not a bootstrap block.
        return profile::sampled_free(p, || unsafe { N::free(p) });
    }
    // SAFETY: not ours, not a bootstrap block.
    unsafe { N::free(p) }
}

/// An arena block the front end's fast path did not take: a counted one, another thread's, a
/// sampled one, or an invalid free (which aborts).
///
/// # Safety
/// `p` lies in the arena reservation: an arena block the program frees (double frees are
/// detected and abort).
#[inline(always)]
pub unsafe fn free_slow(p: *mut u8) {
    // SAFETY: the caller's obligation.
    unsafe { free_owned_not_recent(p) };
}
