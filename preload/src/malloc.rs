//! The malloc family's Rust paths, with glibc's semantics: 16-byte alignment, `errno` as glibc
//! sets it, bad alignments give `EINVAL`. The exports that take the caller's site are in
//! `entry.rs` (and `entry_x86_64.rs`), the `realloc` family in `realloc.rs`.
//!
//! Each entry point asks the router first (the thread's arena, inside a region) and otherwise
//! calls the next allocator. A pointer is an arena block exactly when it lies in the arena
//! reservation: one range check in `free`, `realloc` and `malloc_usable_size`. Nothing here
//! panics or allocates through itself.

use core::ffi::{c_int, c_void};
use core::ptr;

use resizealloc::arena::Predicted;
use resizealloc::router;

use crate::real;

pub(crate) const MIN_ALIGN: usize = 16;
const PAGE: usize = 4096;

#[inline(always)]
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: glibc's errno location is always valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

#[inline(always)]
fn arena_alloc(size: usize, align: usize) -> *mut c_void {
    // SAFETY: size is at least 1 and align a power of two (callers check).
    unsafe { router::alloc(size.max(1), align) as *mut c_void }
}

/// `malloc` for a caller at `site`.
pub(crate) extern "C" fn malloc_at(size: usize, site: usize) -> *mut c_void {
    match router::route() {
        router::Route::Arena(a) => malloc_in(size, site, a),
        router::Route::Next => real::malloc(size),
        router::Route::Check => malloc_slow(size, site),
        router::Route::Predict => malloc_predicted(size.max(1), site),
    }
}

/// `malloc` from `a`, the calling thread's active arena: its fast path, else the slow path.
///
/// It needs no site: an active arena's slow path takes every request (`router::alloc_slow_at`
/// reads the site only for a thread with no active arena). So `site` may be anything (the entry
/// point passes whatever the program left in that register): it is passed on to the slow path
/// unread, where a constant cost an instruction, and a dropped argument made the compiler move
/// `a` out of the third register, where the entry point put it.
///
/// A block under a page is served inline; anything else is one jump to
/// [`malloc_in_aligned`]: in one function the compiler joined the two paths at their common
/// tail, and the small one then jumped to it.
#[inline(always)]
fn malloc_in(size: usize, site: usize, a: *const resizealloc::arena::Arena) -> *mut c_void {
    if resizealloc::arena::is_small_request(size) {
        // SAFETY: the thread's own active arena; `size` is 1 to a page less one.
        let p = unsafe { (*a).try_alloc_fast_small(size) };
        if !p.is_null() {
            return p as *mut c_void;
        }
        return malloc_slow(size, site);
    }
    malloc_in_aligned(size, site, a)
}

/// [`malloc_in`] for a block of a page or more, or of 0 bytes (declined, then served by the
/// slow path).
#[inline(never)]
fn malloc_in_aligned(size: usize, site: usize, a: *const resizealloc::arena::Arena) -> *mut c_void {
    // A page or more starts on a cache line (`block_align`): asking for that alignment says so
    // as a constant, where `MIN_ALIGN` would leave the compiler to pick it by size.
    // SAFETY: the thread's own active arena; LINE is a power of two; a size of 0 is declined.
    let p = unsafe { (*a).try_alloc_fast_aligned(size, resizealloc::arena::LINE) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    malloc_slow(size, site)
}

/// `malloc` past the fast paths. `site` is the program's return address, read only when the
/// thread has no active arena (`router::alloc_slow_at`); with one it may be anything.
/// `extern "C"`: `malloc`'s assembly entry point jumps to it.
#[cold]
#[inline(never)]
pub(crate) extern "C" fn malloc_slow(size: usize, site: usize) -> *mut c_void {
    let p = router::alloc_slow_at(size.max(1), MIN_ALIGN, site);
    if !p.is_null() {
        return p as *mut c_void;
    }
    real::malloc(size)
}

/// Process mode (and regions that leave blocks behind): the predictor picks the side. The
/// common cases call nothing (so need no stack frame); the rest is one tail call. `size >= 1`.
#[inline(never)]
pub(crate) fn malloc_predicted(size: usize, site: usize) -> *mut c_void {
    // The thread's state once, for the predictor and the small-block heap's cache.
    let ts = resizealloc::region::state();
    // SAFETY: size at least 1 (the caller's obligation); `ts` is the calling thread's.
    match unsafe { router::try_alloc_predicted_fast(ts, size, site) } {
        Predicted::Block(p) => p as *mut c_void,
        Predicted::Small => malloc_small(ts, size),
        // The arena answers `Small` for everything the small-block heap would take, so this is
        // the next allocator's (markers mode's predicting regions, large requests).
        Predicted::Next => real::malloc(size),
        Predicted::General => malloc_predicted_general(size, site),
    }
}

/// A small request in process mode: the thread's cache of its class in the small-block heap,
/// else one tail call to the rest of the heap (and the next allocator when the heap has no
/// memory).
#[inline(always)]
fn malloc_small(ts: &resizealloc::region::ThreadState, size: usize) -> *mut c_void {
    // Small requests never take the predictor's general path, where a pending give-back
    // otherwise runs: a program that goes on with small blocks only after freeing a phase to
    // the next allocator runs it here (one load while none is pending).
    if crate::give_back::give_back_pending() {
        return malloc_small_uncached(size);
    }
    let p = router::alloc_small_cached(ts, size);
    if !p.is_null() {
        return p as *mut c_void;
    }
    malloc_small_uncached(size)
}

/// [`malloc_small`] past the thread's cache: a pending give-back, then the rest of the
/// routed-away path (the class's page, a new page or the thread's first heap, else the next
/// allocator), out of line so that [`malloc_predicted`] needs no stack frame for it.
#[inline(never)]
fn malloc_small_uncached(size: usize) -> *mut c_void {
    crate::give_back::run_pending_give_back();
    malloc_routed_away(size)
}

/// A block the predictor sent away from the arena: in process mode the small-block heap for
/// small requests, the next allocator for the rest (or when the heap has no memory).
#[inline(always)]
fn malloc_routed_away(size: usize) -> *mut c_void {
    let p = router::alloc_routed_away(size.max(1));
    if !p.is_null() {
        return p as *mut c_void;
    }
    real::malloc(size)
}

/// Everything [`malloc_predicted`]'s fast path left: sampling, probes, the sweep, the arena's
/// slow path; the next allocator when the arena declines.
#[inline(never)]
fn malloc_predicted_general(size: usize, site: usize) -> *mut c_void {
    // Every process-mode allocation stream passes here within a few thousand allocations
    // (samples of short sites, probes of long ones), wherever its blocks go: a pending
    // give-back runs soon after allocation resumes, off the paths every allocation takes.
    crate::give_back::run_pending_give_back();
    // SAFETY: size at least 1, MIN_ALIGN a power of two.
    let p = unsafe { router::alloc_predicted_general(size.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    malloc_routed_away(size)
}

/// `free(3)`: the Rust twin of the assembly `free` (`entry_x86_64.rs`). The owner thread's
/// single-granule blocks are freed inline; everything else is one cold call.
#[cfg(not(asm_entry_points))]
#[no_mangle]
pub extern "C" fn free(p: *mut c_void) {
    // Foreign pointers first: outside regions they are nearly all of them, and one range check
    // and one flag send them on (the next allocator takes NULL too).
    if !router::owns(p as *mut u8) {
        if router::foreign_frees_watched() {
            return free_foreign_watched(p);
        }
        // SAFETY: not ours, and no bootstrap block was ever handed out (the flag says so).
        return unsafe { real::free_next(p) };
    }
    free_arena_block(p)
}

/// `free` of a pointer in the arena reservation: the owner's blocks inline, the rest one cold
/// call. (The assembly `free` makes these tests itself.)
#[cfg(not(asm_entry_points))]
#[inline(always)]
fn free_arena_block(p: *mut c_void) {
    // SAFETY: `p` is in the reservation, so it is an arena block (or the program's bug).
    if !unsafe { router::free_fast(p as *mut u8) } {
        free_slow(p);
    }
}

/// A free of a pointer outside the arena while frees to the next allocator are watched:
/// small-block heap blocks go back to it, bootstrap blocks stay, process mode samples. Not
/// cold: in process mode it is the common free.
#[inline(never)]
pub(crate) extern "C" fn free_foreign_watched(p: *mut c_void) {
    if router::owns_small(p as *mut u8) {
        // SAFETY: a block of the small-block heap that the program frees.
        return unsafe { router::free_small(p as *mut u8) };
    }
    if p.is_null() || real::is_boot(p) {
        return;
    }
    if router::note_next_free() {
        crate::give_back::sample_next_free(p);
    }
    // SAFETY: not ours, not a bootstrap block.
    unsafe { real::free_next(p) }
}

/// An arena block the inlined fast path did not take: another thread's, sampled, or invalid
/// (which aborts).
#[cold]
#[inline(never)]
pub(crate) fn free_slow(p: *mut c_void) {
    // SAFETY: `free` found `p` in the reservation: an arena block the program frees (double
    // frees are detected and abort).
    unsafe { router::free_owned(p as *mut u8) };
}

pub(crate) extern "C" fn calloc_at(n: usize, size: usize, site: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        return calloc_overflow();
    };
    match router::route() {
        router::Route::Arena(a) => {
            // SAFETY: the thread's own active arena (a size of 0 is declined, and served by
            // the slow path).
            let p = unsafe { (*a).try_alloc_zeroed_fast(total) };
            if !p.is_null() {
                return p as *mut c_void;
            }
            calloc_slow(n, size, total, site)
        }
        router::Route::Next => real::calloc(n, size),
        router::Route::Predict => calloc_predicted(n, size, total, site),
        router::Route::Check => calloc_slow(n, size, total, site),
    }
}

/// `calloc` whose `n * size` overflows: NULL with `ENOMEM`. Out of line: the call that finds
/// `errno` made every `calloc` save and restore three registers.
#[cold]
#[inline(never)]
fn calloc_overflow() -> *mut c_void {
    set_errno(libc::ENOMEM);
    ptr::null_mut()
}

/// `calloc` through the predictor: the arena, else the small-block heap (cleared here), else
/// the next allocator.
#[inline(never)]
fn calloc_predicted(n: usize, size: usize, total: usize, site: usize) -> *mut c_void {
    // SAFETY: size at least 1, MIN_ALIGN a power of two.
    let p = unsafe { router::alloc_zeroed(total.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    let p = router::alloc_routed_away(total.max(1));
    if !p.is_null() {
        // SAFETY: a fresh block of at least `total` bytes.
        unsafe { ptr::write_bytes(p, 0, total) };
        return p as *mut c_void;
    }
    real::calloc(n, size)
}

#[inline(never)]
fn calloc_slow(n: usize, size: usize, total: usize, site: usize) -> *mut c_void {
    // SAFETY: size at least 1, MIN_ALIGN a power of two. The arena clears the block unless its
    // memory is known to be fresh from the kernel.
    let p = unsafe { router::alloc_zeroed(total.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    real::calloc(n, size)
}

/// Aligned allocation shared by every aligned entry point; `align` is a power of two.
fn aligned(align: usize, size: usize) -> *mut c_void {
    let align = align.max(MIN_ALIGN);
    let p = arena_alloc(size, align);
    if !p.is_null() {
        return p;
    }
    real::memalign(align, size)
}

/// `posix_memalign(3)`: returns `EINVAL` unless `align` is a power of two multiple of
/// `sizeof(void *)`, `ENOMEM` when no memory; `errno` is left alone, as glibc does.
#[no_mangle]
pub extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if out.is_null() {
        return libc::EINVAL;
    }
    if !align.is_power_of_two() || !align.is_multiple_of(core::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    let saved = errno();
    let p = aligned(align, size);
    if p.is_null() {
        set_errno(saved);
        return libc::ENOMEM;
    }
    // SAFETY: `out` is non-null and points to writable storage (the caller's contract).
    unsafe { *out = p };
    0
}

fn errno() -> c_int {
    // SAFETY: see set_errno.
    unsafe { *libc::__errno_location() }
}

/// `aligned_alloc(3)` (C11): a non-power-of-two alignment gives NULL with `EINVAL`.
#[no_mangle]
pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(align, size)
}

/// `memalign(3)`: like glibc, a non-power-of-two alignment is rounded up; one that cannot be
/// rounded gives NULL with `EINVAL`.
#[no_mangle]
pub extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let Some(align) = align.max(1).checked_next_power_of_two() else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if align > usize::MAX / 2 + 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(align, size)
}

/// `valloc(3)`: page aligned.
#[no_mangle]
pub extern "C" fn valloc(size: usize) -> *mut c_void {
    aligned(PAGE, size)
}

/// `pvalloc(3)`: page aligned, size rounded up to whole pages.
#[no_mangle]
pub extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let Some(rounded) = size.max(1).checked_add(PAGE - 1).map(|s| s & !(PAGE - 1)) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    aligned(PAGE, rounded)
}

/// `malloc_usable_size(3)`.
#[no_mangle]
pub extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if router::owns(p as *mut u8) {
        // SAFETY: a live arena block (the caller's contract, as with glibc).
        return unsafe { router::usable_size(p as *mut u8) };
    }
    if router::owns_small(p as *mut u8) {
        // SAFETY: a live small-block heap block (the caller's contract).
        return unsafe { router::usable_size_small(p as *mut u8) };
    }
    if real::is_boot(p) {
        return real::boot_size(p);
    }
    real::usable_size(p)
}
