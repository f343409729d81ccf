//! `ResizeAlloc`: the Rust `#[global_allocator]` front end.
//!
//! Inside a region, allocations go to the thread's resize arena; outside, and whenever the arena
//! declines (size bounds, no memory), they go to the wrapped allocator (`System` by default).
//! In process mode small requests go to the small-block heap (slab/) instead, as in
//! `libresizealloc.so`. `dealloc` and `realloc` accept a pointer from any side, on any thread,
//! at any time: range checks tell them apart.

use core::alloc::{GlobalAlloc, Layout};
use std::alloc::System;

use crate::arena::Arena;
use crate::{profile, region, router};

/// The alignment of every small-block heap block (its classes are multiples of 16 bytes, from a
/// 16-byte aligned start in each page).
const SMALL_HEAP_ALIGN: usize = 16;

/// A global allocator that serves region allocations from per-thread resize arenas and
/// everything else from `A`.
///
/// ```no_run
/// use resizealloc::ResizeAlloc;
/// #[global_allocator]
/// static A: ResizeAlloc = ResizeAlloc::new();
/// ```
pub struct ResizeAlloc<A = System> {
    next: A,
}

impl ResizeAlloc<System> {
    /// Wraps `std::alloc::System`.
    pub const fn new() -> Self {
        ResizeAlloc { next: System }
    }
}

impl Default for ResizeAlloc<System> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: GlobalAlloc> ResizeAlloc<A> {
    /// Everything `alloc`'s inlined fast path declined: the arena's slow path, or `next`.
    /// While the profiler runs, a thread outside regions first takes the profiler's common case
    /// (markers or off mode, `Route::Countdown`: a request counted down and not sampled goes to
    /// `next`), then `alloc_profiled`. Cold and out of line, so that `alloc`'s other paths keep
    /// their registers and their fall-through.
    #[cold]
    #[inline(never)]
    fn alloc_slow(&self, layout: Layout) -> *mut u8 {
        // `COUNTDOWN` is only ever set while the profiler runs. Its case is the one this
        // function serves most often (every allocation outside regions while the profiler
        // runs), so it is tested first, and the rest is a tail call: one compare before the
        // countdown, where a test for null first took two more.
        let a = region::load_active();
        if a != region::COUNTDOWN {
            return self.alloc_slow_routed(layout, a);
        }
        if profile::count_down(layout.size()) {
            // SAFETY: the GlobalAlloc caller's layout, forwarded.
            return unsafe { self.next.alloc(layout) };
        }
        self.alloc_profiled(layout)
    }

    /// [`alloc_slow`](Self::alloc_slow) for a route other than the profiler's countdown (`a`,
    /// the thread's `active` value): the arena's slow path, a thread's first allocation,
    /// process mode's predictor, or a thread with no route while the profiler runs.
    #[cold]
    #[inline(never)]
    fn alloc_slow_routed(&self, layout: Layout, a: *const Arena) -> *mut u8 {
        if a.is_null() && profile::enabled() {
            return self.alloc_profiled(layout);
        }
        self.alloc_unprofiled(layout)
    }

    /// An allocation outside regions while the profiler runs: a sampled one from `next`
    /// (timed and recorded), the rest where the mode sends it (in markers and off mode, `next`
    /// at once).
    #[inline(never)]
    fn alloc_profiled(&self, layout: Layout) -> *mut u8 {
        // A thread's first allocation comes here (the program's first, before `main`), so the
        // report is due even if every later allocation is made inside regions.
        crate::advisor::register();
        if profile::take_sample(layout.size()) {
            // SAFETY: the GlobalAlloc caller's layout, forwarded.
            return profile::sampled_alloc(layout.size(), || unsafe { self.next.alloc(layout) });
        }
        if crate::mode::passes_through() {
            region::settle_outside();
            // SAFETY: as above.
            return unsafe { self.next.alloc(layout) };
        }
        let ts = region::state();
        if ts.flags.get() & region::JOINED != 0 {
            return region::as_predicted(ts, || self.alloc_unprofiled(layout));
        }
        self.alloc_unprofiled(layout)
    }

    /// [`alloc_slow`](Self::alloc_slow) past the profiler.
    fn alloc_unprofiled(&self, layout: Layout) -> *mut u8 {
        // Every thread's first allocation comes here (its route is not set yet). The Rust API's
        // functions that take our locks without allocating register too (see fork.rs).
        crate::fork::register_handlers();
        let p = router::alloc_slow(layout.size().max(1), layout.align());
        if !p.is_null() {
            return p;
        }
        let p = Self::alloc_small_heap(layout);
        if !p.is_null() {
            return p;
        }
        // SAFETY: the GlobalAlloc caller's layout, forwarded.
        unsafe { self.next.alloc(layout) }
    }

    /// `alloc_zeroed` outside regions while the profiler runs (see
    /// [`alloc_profiled`](Self::alloc_profiled)).
    #[inline(never)]
    fn alloc_zeroed_profiled(&self, layout: Layout) -> *mut u8 {
        crate::advisor::register();
        if profile::take_sample(layout.size()) {
            // SAFETY: the GlobalAlloc caller's layout, forwarded.
            return profile::sampled_alloc(layout.size(), || unsafe {
                self.next.alloc_zeroed(layout)
            });
        }
        if crate::mode::passes_through() {
            region::settle_outside();
            // SAFETY: as above.
            return unsafe { self.next.alloc_zeroed(layout) };
        }
        let ts = region::state();
        if ts.flags.get() & region::JOINED != 0 {
            // SAFETY: the GlobalAlloc caller's layout, forwarded.
            return region::as_predicted(ts, || unsafe { self.alloc_zeroed_unprofiled(layout) });
        }
        // SAFETY: as above.
        unsafe { self.alloc_zeroed_unprofiled(layout) }
    }

    /// `alloc_zeroed` past the profiler.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc_zeroed`.
    #[inline(always)]
    unsafe fn alloc_zeroed_unprofiled(&self, layout: Layout) -> *mut u8 {
        // As in `alloc_slow`.
        crate::fork::register_handlers();
        // SAFETY: as in `alloc`. The arena clears the block unless it is known to be zero.
        let p = unsafe { router::alloc_zeroed(layout.size().max(1), layout.align(), 0) };
        if !p.is_null() {
            return p;
        }
        let p = Self::alloc_small_heap(layout);
        if !p.is_null() {
            // SAFETY: a fresh block of at least `layout.size()` bytes (its blocks are reused).
            unsafe { p.write_bytes(0, layout.size()) };
            return p;
        }
        // SAFETY: forwarded contract.
        unsafe { self.next.alloc_zeroed(layout) }
    }

    /// A block from the small-block heap, in process mode, for a small request it can align
    /// (its blocks are 16-byte aligned); null otherwise.
    #[inline]
    fn alloc_small_heap(layout: Layout) -> *mut u8 {
        if layout.align() > SMALL_HEAP_ALIGN {
            return core::ptr::null_mut();
        }
        router::alloc_routed_away(layout.size().max(1))
    }

    /// A free of a block of `next` that may be a sampled one (the profiler records it). Cold and
    /// out of line: the closure's frame would otherwise be set up on every `dealloc`.
    ///
    /// # Safety
    /// `ptr` is a live block of `next` with this layout, which the caller frees.
    #[cold]
    #[inline(never)]
    unsafe fn dealloc_sampled(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's obligation.
        profile::sampled_free(ptr, || unsafe { self.next.dealloc(ptr, layout) });
    }

    /// Arena blocks `dealloc`'s inlined fast path declined: counted blocks, other threads'
    /// blocks, sampled blocks and invalid frees (which abort).
    #[cold]
    #[inline(never)]
    fn dealloc_slow(&self, ptr: *mut u8) {
        // SAFETY: the caller frees a live block it got from us; it lies in the reservation.
        unsafe { router::free_owned_not_recent(ptr) }
    }
}

impl<A> ResizeAlloc<A> {
    /// Wraps another allocator, for example `mimalloc::MiMalloc`, which then serves everything
    /// outside regions.
    pub const fn wrap(next: A) -> Self {
        ResizeAlloc { next }
    }
}

// SAFETY: every block comes either from the arena, which hands out disjoint, live, suitably
// aligned memory until it is freed (see arena/), or from `A`, which upholds the contract
// itself. Frees and reallocs go back to the side that owns the pointer (`router::owns`).
unsafe impl<A: GlobalAlloc> GlobalAlloc for ResizeAlloc<A> {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match router::route() {
            router::Route::Arena(a) => {
                // SAFETY: the thread's own active arena; Layout's align is a power of two; a
                // size of 0 is declined (and `alloc_slow` serves it as 1).
                let p = unsafe { (*a).try_alloc_fast(layout.size(), layout.align()) };
                if !p.is_null() {
                    return p;
                }
                self.alloc_slow(layout)
            }
            // SAFETY: forwarded contract.
            router::Route::Next => unsafe { self.next.alloc(layout) },
            // One arm for the rest (a test for null before the settled one cost the
            // pass-through two instructions; an arm of its own for the profiler's countdown
            // changed where the compiler inlines `alloc`).
            router::Route::Check | router::Route::Predict | router::Route::Countdown => {
                self.alloc_slow(layout)
            }
        }
    }

    #[inline(always)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if profile::enabled() && region::is_unrouted(region::load_active()) {
            return self.alloc_zeroed_profiled(layout);
        }
        // SAFETY: forwarded contract.
        unsafe { self.alloc_zeroed_unprofiled(layout) }
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // One range check first: outside regions nearly every block is `next`'s, and the
        // pass-through path should cost no more than that.
        if !router::owns(ptr) {
            if router::owns_small(ptr) {
                // SAFETY: a live small-block heap block the caller frees.
                return unsafe { router::free_small(ptr) };
            }
            if profile::enabled() && profile::maybe_sampled(ptr) {
                // SAFETY: not ours, so it came from `next` with this layout.
                return unsafe { self.dealloc_sampled(ptr, layout) };
            }
            // SAFETY: not ours, so it came from `next` with this layout.
            return unsafe { self.next.dealloc(ptr, layout) };
        }
        // SAFETY: an arena block the GlobalAlloc caller frees.
        if !unsafe { router::free_fast(ptr) } {
            self.dealloc_slow(ptr);
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if router::owns(ptr) {
            let next = &self.next;
            // SAFETY: a live arena block; new_size >= 1 after max; align from a valid Layout.
            return unsafe {
                router::realloc_owned(ptr, new_size.max(1), layout.align(), 0, |size, align| {
                    // SAFETY: GlobalAlloc::realloc guarantees the new layout is valid.
                    next.alloc(Layout::from_size_align_unchecked(size, align))
                })
            };
        }
        if router::owns_small(ptr) {
            // SAFETY: a live small-block heap block; on success the caller gives it up. The new
            // layout is valid (GlobalAlloc::realloc's contract), and `alloc` returns null or a
            // fresh block.
            return unsafe {
                router::realloc_small(ptr, new_size.max(1), |n| {
                    self.alloc(Layout::from_size_align_unchecked(n, layout.align()))
                })
            };
        }
        if profile::enabled() {
            // SAFETY: not ours, so it came from `next`, with this layout.
            return profile::foreign_realloc(ptr, new_size, || unsafe {
                self.next.realloc(ptr, layout, new_size)
            });
        }
        // SAFETY: not ours, so it came from `next`, with this layout.
        unsafe { self.next.realloc(ptr, layout, new_size) }
    }
}
