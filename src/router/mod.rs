//! The router: decides, per call, whether the resize arena or the next allocator serves it (in
//! process mode, the small blocks the predictor routes away from the arena go to the
//! small-block heap of slab/ instead of the next allocator).
//! Both front ends (`ResizeAlloc` in Rust, `libresizealloc.so` for C) sit on these functions,
//! and each brings its own "next allocator".
//!
//! * allocation: the thread's active arena if it is in a region, otherwise null ("yours");
//! * free: one range check decides; arena blocks are freed locally or remotely;
//! * realloc: arena blocks grow in place when they are the last block, or move; a block moves
//!   to wherever a fresh allocation would go now (the arena inside a region, the next allocator
//!   outside), so a buffer that escaped its region leaves the arena when it next grows.

pub mod malloc;

use core::ptr;
use core::sync::atomic::Ordering;

use crate::arena::{Arena, Predicted, MIN_ALIGN};
use crate::mode::{self, MODE, MODE_OFF, MODE_PROCESS};
use crate::region;
use crate::reservation;
use crate::slab;

/// Tries the arena. Null means "not served here": the caller uses the next allocator.
///
/// # Safety
/// `size >= 1`; `align` is a power of two.
#[inline(always)]
pub unsafe fn alloc(size: usize, align: usize) -> *mut u8 {
    // SAFETY: forwarded obligations.
    let p = unsafe { alloc_fast(size, align) };
    if !p.is_null() {
        return p;
    }
    alloc_slow(size, align)
}

/// The arena's fast path only: null when the thread is outside a region or the request needs
/// the slow path. Calls nothing, so front ends can inline it into a frameless fast path and
/// send everything else to one cold function.
///
/// # Safety
/// `size >= 1`; `align` is a power of two.
#[inline(always)]
pub unsafe fn alloc_fast(size: usize, align: usize) -> *mut u8 {
    let a = region::load_active();
    if !region::is_arena(a) {
        return ptr::null_mut();
    }
    // SAFETY: the active arena is this thread's own; the caller's obligations hold.
    unsafe { (*a).try_alloc_fast(size, align) }
}

/// Where the calling thread's allocations go, as front ends dispatch on it in one load:
#[derive(Clone, Copy)]
pub enum Route {
    /// Inside a region: this arena's fast path, else [`alloc_slow`].
    Arena(*const Arena),
    /// Outside regions, mode known: the next allocator directly.
    Next,
    /// Not routed yet: [`alloc_slow`] looks at the mode (and settles the thread).
    Check,
    /// Through the lifetime predictor to the thread's arena: [`try_alloc_predicted_fast`],
    /// else [`alloc_predicted_general`].
    Predict,
    /// Outside regions while the profiler runs in markers or off mode: the next allocator once
    /// `profile::count_down` took the request, else the profiler's unrouted path.
    Countdown,
}

/// The calling thread's [`Route`].
#[inline(always)]
pub fn route() -> Route {
    let a = region::load_active();
    if region::is_arena(a) {
        Route::Arena(a)
    } else if a.is_null() {
        Route::Check
    } else if a == region::SETTLED {
        Route::Next
    } else if a == region::COUNTDOWN {
        Route::Countdown
    } else {
        Route::Predict
    }
}

/// What the arenas' periodic looks do besides their own: the warm memory of exited threads'
/// arenas and of the small-block heap's page pool goes back once its purge delay is over.
fn expire_warm_if_due() {
    reservation::expire_unowned_if_due();
    crate::slab::expire_warm_if_due();
}

/// Everything [`alloc_fast`] declined: the arena's slow path inside a region, or, outside one,
/// the mode check (first use, process mode). Null means "use the next allocator".
#[cold]
#[inline(never)]
pub fn alloc_slow(size: usize, align: usize) -> *mut u8 {
    alloc_slow_at(size, align, 0)
}

/// [`alloc_slow`] for a caller that knows the allocation site (the return address of `malloc`).
/// The site is read only when the calling thread has no active arena: a caller in a region may
/// pass anything.
#[cold]
#[inline(never)]
pub fn alloc_slow_at(size: usize, align: usize, site: usize) -> *mut u8 {
    if size == 0 || !align.is_power_of_two() {
        return ptr::null_mut(); // safe to call with anything: bad requests are the next allocator's
    }
    let ts = region::state();
    let a = region::active_arena(ts);
    if !a.is_null() {
        // SAFETY: our own arena.
        return unsafe { (*a).alloc_slow(size, align.max(MIN_ALIGN)) };
    }
    let a = predicted_or_joined(ts);
    if a.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: our own arena; size and align checked above.
    unsafe { (*a).alloc_predicted(size, align, site, false, expire_warm_if_due) }
}

/// The common cases of the [`Route::Predict`] path, calling nothing (see
/// [`Arena::try_alloc_predicted_fast`]); [`Predicted::General`] means "take
/// [`alloc_predicted_general`]", which decides again from scratch.
///
/// `ts` is the calling thread's state ([`region::state`]), which the caller loads once for this
/// and [`alloc_small_cached`].
///
/// # Safety
/// `size >= 1`.
#[inline(always)]
pub unsafe fn try_alloc_predicted_fast(
    ts: &region::ThreadState,
    size: usize,
    site: usize,
) -> Predicted {
    let a = region::predicted_arena(ts);
    if a.is_null() {
        return Predicted::General;
    }
    // SAFETY: our own arena; size >= 1 is the caller's obligation, MIN_ALIGN a power of two.
    unsafe { (*a).try_alloc_predicted_fast(size, MIN_ALIGN, site, false) }
}

/// The [`Route::Predict`] path when [`try_alloc_predicted_fast`] declined: the lifetime
/// predictor decides in full between the thread's arena and the next allocator (null). `site`
/// is the caller's return address, or 0 when unknown.
///
/// # Safety
/// `size >= 1`; `align` is a power of two.
#[inline]
pub unsafe fn alloc_predicted_general(size: usize, align: usize, site: usize) -> *mut u8 {
    let a = region::predicted_arena(region::state());
    if a.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: our own arena; size >= 1 and a power-of-two align are the callers' obligations.
    unsafe { (*a).alloc_predicted_general(size, align, site, false, expire_warm_if_due) }
}

/// Like [`alloc`], for memory that must read as zero (`calloc`, `alloc_zeroed`): the arena
/// clears the block only when its memory is not known to be fresh from the kernel.
///
/// # Safety
/// `size >= 1`; `align` is a power of two.
#[inline]
pub unsafe fn alloc_zeroed(size: usize, align: usize, site: usize) -> *mut u8 {
    let ts = region::state();
    let a = region::active_arena(ts);
    if !a.is_null() {
        // SAFETY: our own arena; the caller's obligations hold.
        return unsafe { (*a).alloc_zeroed(size, align.max(MIN_ALIGN)) };
    }
    let a = predicted_or_joined(ts);
    if a.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: as above.
    unsafe { (*a).alloc_predicted(size, align.max(MIN_ALIGN), site, true, expire_warm_if_due) }
}

/// The arena of a thread whose allocations go through the predictor, joining process mode on
/// first use; null when they go to the next allocator.
fn predicted_or_joined(ts: &region::ThreadState) -> *const Arena {
    let a = region::predicted_arena(ts);
    if !a.is_null() || attention_arena().is_null() {
        return a;
    }
    region::predicted_arena(ts)
}

/// The arena of a thread outside explicit regions: its process-mode arena (joining on first
/// use), or null when allocations go to the next allocator (which settles the thread).
#[cold]
#[inline(never)]
fn attention_arena() -> *const Arena {
    if crate::mode::passes_through() {
        region::settle_outside();
        return ptr::null();
    }
    let m = region::mode();
    if m & MODE_PROCESS == 0 || m & MODE_OFF != 0 {
        region::settle_outside();
        return ptr::null();
    }
    region::join_process(region::state())
}

/// Counts a free that is going to the next allocator: true for one in
/// `region::NEXT_FREE_SAMPLE` such frees of a process-mode thread, which the front end then
/// measures (process mode routes long-lived data there, and watches how much is freed back).
#[inline(always)]
pub fn note_next_free() -> bool {
    MODE.load(Ordering::Relaxed) & MODE_PROCESS != 0 && region::count_next_free()
}

/// True when a free that goes to the next allocator needs the front end's look (process mode
/// samples them; see [`watch_foreign_frees`]). One load.
#[inline(always)]
pub fn foreign_frees_watched() -> bool {
    mode::FOREIGN_WATCH.load(Ordering::Relaxed) != 0
}

/// From now on [`foreign_frees_watched`] is true: a front end that served blocks itself, which
/// must not reach the next allocator, calls it before it hands the first one out.
pub fn watch_foreign_frees() {
    mode::watch_front_end_frees();
}

/// A block of `size` bytes from the calling thread's small-block heap (slab/): where
/// allocations the predictor sends away from the arena go when they are small. Null when
/// `size` is 0 or above [`slab::MAX_SMALL`], or no heap or page can be had: the caller then uses
/// the next allocator.
#[inline(always)]
pub fn alloc_small(size: usize) -> *mut u8 {
    if size.wrapping_sub(1) >= slab::MAX_SMALL {
        return ptr::null_mut();
    }
    let mut h = region::slab_heap();
    if h.is_null() {
        h = region::acquire_slab_heap();
        if h.is_null() {
            return ptr::null_mut();
        }
    }
    // SAFETY: the calling thread's own heap; the class of a size in 1..=MAX_SMALL is in range.
    unsafe { slab::alloc(h, slab::class_of(size)) }
}

/// [`alloc_small`] from the thread's cache of the size's class alone: null when the size is not
/// a small one, the thread has no heap yet, or the cache is empty (then [`alloc_small`] does
/// the rest). Calls nothing, so a caller that inlines it needs no stack frame for it.
/// `ts` is the calling thread's state.
#[inline(always)]
pub fn alloc_small_cached(ts: &region::ThreadState, size: usize) -> *mut u8 {
    if size.wrapping_sub(1) >= slab::MAX_SMALL {
        return ptr::null_mut();
    }
    let h = region::slab_heap_of(ts);
    if h.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: the calling thread's own heap; the class of a size in 1..=MAX_SMALL is in range.
    unsafe { slab::alloc_cached(h, slab::class_of(size)) }
}

/// Where a request the predictor routed away from the arena goes: in process mode, a small one
/// to the small-block heap ([`alloc_small`]); null means the next allocator. Process mode only:
/// there every allocation outside the arena would otherwise go to the next allocator, while with
/// markers what lies outside regions is the next allocator's, and the escapes of regions stay
/// with it too (one heap for the long-lived data, not two that cannot reuse each other's holes).
#[inline(always)]
pub fn alloc_routed_away(size: usize) -> *mut u8 {
    if MODE.load(Ordering::Relaxed) & MODE_PROCESS == 0 {
        return ptr::null_mut();
    }
    alloc_small(size)
}

/// True when `p` is a small-block heap block (one range check).
#[inline(always)]
pub fn owns_small(p: *mut u8) -> bool {
    slab::owns(p)
}

/// Frees a small-block heap block, from any thread.
///
/// # Safety
/// `owns_small(p)` and `p` is a live block.
#[inline(always)]
pub unsafe fn free_small(p: *mut u8) {
    // SAFETY: caller's obligation; the heap is the calling thread's (or null).
    unsafe { slab::free(region::slab_heap(), p) }
}

/// `realloc` of a small-block heap block, for both front ends: in place while the new size
/// still fits its class well (no more than half of it wasted), else moved to a block from
/// `alloc(new_size)` (wherever the front end sends a fresh request of that size). Null when
/// `alloc` fails, and `p` is then left as it was.
///
/// # Safety
/// `owns_small(p)` and `p` is a live block, which the caller gives up unless null is returned;
/// `alloc` returns null or a live block of at least `new_size` bytes, distinct from `p`.
#[inline(never)]
pub unsafe fn realloc_small(
    p: *mut u8,
    new_size: usize,
    alloc: impl FnOnce(usize) -> *mut u8,
) -> *mut u8 {
    // SAFETY: caller's obligation.
    let old = unsafe { usable_size_small(p) };
    if new_size <= old && new_size >= old / 2 {
        return p;
    }
    let q = alloc(new_size);
    if !q.is_null() {
        // SAFETY: both blocks are live, distinct and at least `min(old, new_size)` long; `p` is
        // a live small-block heap block that the caller gives up.
        unsafe {
            ptr::copy_nonoverlapping(p, q, old.min(new_size));
            free_small(p);
        }
    }
    q
}

/// Usable size of a small-block heap block (aborting on a pointer that is no live block).
///
/// # Safety
/// `owns_small(p)`.
pub unsafe fn usable_size_small(p: *mut u8) -> usize {
    // SAFETY: caller's obligation; the heap is the calling thread's (or null).
    unsafe { slab::usable_size(region::slab_heap(), p) }
}

/// True when `p` is an arena block (one range check).
#[inline(always)]
pub fn owns(p: *mut u8) -> bool {
    reservation::owns(p)
}

/// The owner thread's fast free: true when `p` was an unsampled block the calling thread's own
/// arena handed out since its counts were last looked at, and is now freed; false (nothing
/// changed) for anything else, which then goes to [`free_owned_not_recent`] or the next
/// allocator. Such a block is recognised by one range check against the arena's uncounted range.
/// Calls nothing but the rare look at the memory bound.
///
/// # Safety
/// `p` is null, a live block of this allocator, or a block of the next allocator (what `free`
/// may be given: never an address below 4 KiB but null). `p`'s header is read only when `p` is
/// the arena's last block or lies inside its uncounted range.
#[inline(always)]
pub unsafe fn free_fast(p: *mut u8) -> bool {
    let own = region::load_own();
    // SAFETY: `own` is this thread's arena, alive while the thread runs; the caller's
    // obligation covers `p` (a free of a block we did not hand out is detected as far as the
    // header allows).
    !own.is_null() && unsafe { (*own).try_free_local_recent(p) }
}

/// An arena block [`free_fast`] did not take: the thread's own counted blocks (recognised by
/// one range check against its committed arena memory), then everything else
/// ([`free_owned`]: other threads' blocks, sampled blocks, and invalid frees, which abort).
///
/// # Safety
/// `owns(p)` and `p` is a live arena block.
#[cold]
#[inline(never)]
pub unsafe fn free_owned_not_recent(p: *mut u8) {
    let own = region::load_own();
    // SAFETY: as in `free_fast`.
    if !own.is_null() && unsafe { (*own).try_free_local_counted(p) } {
        return;
    }
    // SAFETY: caller's obligation.
    unsafe { free_owned(p) }
}

/// Frees an arena block, from any thread.
///
/// # Safety
/// `owns(p)` and `p` is a live arena block.
#[inline(always)]
pub unsafe fn free_owned(p: *mut u8) {
    // SAFETY: caller's obligation: `p` is a live arena block.
    let arena = unsafe { reservation::arena_of(p) };
    let ts = region::state();
    if ptr::eq(region::own_arena(ts), arena) {
        // SAFETY: our own arena, on its owner thread.
        unsafe { arena.free_local(p) };
    } else {
        free_foreign(arena, p);
    }
}

#[cold]
#[inline(never)]
fn free_foreign(arena: &'static Arena, p: *mut u8) {
    // SAFETY: `p` is a live block of `arena` (caller of free_owned).
    if unsafe { arena.free_remote(p) } {
        // SAFETY: we won the release claim of an orphaned arena with nothing live.
        unsafe { reservation::release_arena(arena) };
    }
}

/// Usable size of an arena block.
///
/// # Safety
/// `owns(p)` and `p` is a live arena block.
pub unsafe fn usable_size(p: *mut u8) -> usize {
    // SAFETY: caller's obligation.
    unsafe { reservation::arena_of(p).usable_size(p) }
}

/// Blocks that `realloc` must move and that are at least this large leave the arena.
pub const LARGE_REALLOC: usize = 4 << 20;

/// The size a block that `realloc` must move to grow gets: half as much again as it had, when
/// that is more than asked for (and the block stays in the arena), so that a buffer grown in
/// small steps while other blocks land behind it moves a logarithmic number of times, not once
/// per step. A string grown 16 bytes at a time to 4 MiB, a small block allocated every 16
/// steps, copied 4 MiB sixteen thousand times (3 s to minutes, glibc 21 ms). Later growth
/// within the slack keeps the block where it is (see [`realloc_owned`]).
fn moved_size(old: usize, new_size: usize) -> usize {
    // (Not past what stays in the arena: the growth after that moves the block out, once.)
    let grown = old.saturating_add(old / 2).min(LARGE_REALLOC - 1);
    if new_size > old && grown > new_size {
        grown
    } else {
        new_size
    }
}

/// Reallocates the arena block `p` for a caller at `site` (0 when unknown).
/// `fallback_alloc(size, align)` is the next allocator.
/// Returns null (and leaves `p` untouched) when no memory can be had.
///
/// # Safety
/// `owns(p)` and `p` is a live arena block; `new_size >= 1`; `align` a power of two.
pub unsafe fn realloc_owned(
    p: *mut u8,
    new_size: usize,
    align: usize,
    site: usize,
    fallback_alloc: impl FnOnce(usize, usize) -> *mut u8,
) -> *mut u8 {
    // SAFETY: caller's obligation.
    let arena = unsafe { reservation::arena_of(p) };
    let ts = region::state();
    let mine = ptr::eq(region::own_arena(ts), arena);
    let inside = region::in_arena_region(ts);
    // SAFETY: `p` is live.
    let old = unsafe { arena.usable_size(p) };
    let aligned = (p as usize).is_multiple_of(align.max(MIN_ALIGN));
    if mine && aligned && new_size <= old && new_size >= old / 2 {
        // Within the block, and not half of it: it stays as it is (the slack a move gave it
        // serves the next growth; see `moved_size`).
        return p;
    }
    // Shrink in place always (nothing moves, whole granules go back); grow in place only
    // inside a region: outside, an escaped buffer should leave the arena.
    let in_place = mine && aligned && (inside || new_size <= old);
    // SAFETY: our own arena on its owner thread (checked first); `p` is live.
    if in_place && unsafe { arena.try_resize_in_place(p, new_size) } {
        return p;
    }
    // A large block that must move goes to the next allocator, whose own large-block path
    // (glibc: mmap, then mremap on every later growth) moves pages instead of copying them:
    // the block is copied once, here, and never again.
    let mut q = if new_size >= LARGE_REALLOC {
        ptr::null_mut()
    } else {
        let size = moved_size(old, new_size);
        // SAFETY: caller's obligations on size and align (`size >= new_size >= 1`).
        let q = unsafe { alloc_fast(size, align) };
        if q.is_null() {
            alloc_slow_at(size, align, site)
        } else {
            q
        }
    };
    if q.is_null() {
        q = fallback_alloc(new_size, align);
        if q.is_null() {
            return ptr::null_mut();
        }
    }
    // SAFETY: both blocks are live, distinct, and at least `min(old, new_size)` long.
    unsafe {
        ptr::copy_nonoverlapping(p, q, old.min(new_size));
        free_owned(p);
    }
    q
}
