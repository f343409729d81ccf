//! Per-thread region state: the nesting depth, the thread's arena, and whether allocations go
//! to it right now. Region markers, the closure form and the guard live here.
//!
//! The thread state is a `thread_local!` with a `const` initialiser and no `Drop`, so touching it
//! never allocates and registers no TLS destructor (which could allocate and recurse). Thread
//! exit is caught by a pthread key destructor instead, which orphans the arena: it stays until
//! its last block is freed, by any thread.
//!
//! # Files
//! | file | concept |
//! |---|---|
//! | `thread_state.rs` | the per-thread state and its layout |
//! | `tls.rs` | where it lives: the initial-exec TLS block, or `thread_local!` |
//! | `routing.rs` | which arena serves the thread right now |
//! | this file | markers, the closure form, the guard, thread exit |
//!
//! The global mode words are in `mode.rs`, a leaf below this module.

mod future;
mod routing;
mod thread_state;
mod tls;

pub use crate::mode::FOREIGN_WATCH;
pub use future::{InRegion, InRegionExt, POLL_PLAN};
pub(crate) use routing::{
    acquire_slab_heap, active_arena, as_predicted, count_next_free, in_arena_region, join_process,
    load_active, load_own, mode, own_arena, predicted_arena, settle_outside, slab_heap,
    slab_heap_of,
};
pub use routing::{
    add_next_freed, is_arena, is_unrouted, options_ready, COUNTDOWN, COUNTDOWN_BITS,
    NEXT_FREED_BATCH, NEXT_FREE_SAMPLE, PREDICT, PREDICT_BITS, ROUTE_BITS_MAX, SETTLED,
    SETTLED_BITS,
};
pub use thread_state::{
    no_arena, NoArena, ThreadState, FREE_ARENA_OFFSET, NO_ARENA, OWN_OFFSET, SAMPLE_LEFT_OFFSET,
    STATE_IN_TLS_BLOCK,
};
pub(crate) use thread_state::{JOINED, PROFILING};
pub use tls::state;

use core::marker::PhantomData;
use core::sync::atomic::Ordering;

use crate::arena::Arena;
use crate::mode::{MODE, MODE_OFF, MODE_PROCESS};
use crate::reservation;
use crate::slab;
use routing::{ensure_arena, outside_value};
use thread_state::{DEAD, IN_NEXT};

/// Marks the calling thread as inside a call to the next allocator, and returns whether it
/// already was (for [`leave_next`]). The preload library brackets every call to a next
/// allocator that is not glibc itself with the two, so that the `__libc_*` names know, by what
/// the thread is doing rather than by who called, that a call comes from that allocator.
/// Async-signal-safe: a signal handler that interrupts the bracket and enters its own leaves
/// the flag as it found it.
#[inline(always)]
pub fn enter_next() -> bool {
    let ts = state();
    let f = ts.flags.get();
    ts.flags.set(f | IN_NEXT);
    f & IN_NEXT != 0
}

/// Ends the bracket [`enter_next`] began: `was` is what it returned.
#[inline(always)]
pub fn leave_next(was: bool) {
    if !was {
        let ts = state();
        ts.flags.set(ts.flags.get() & !IN_NEXT);
    }
}

/// True while the calling thread is inside a call to the next allocator (see [`enter_next`]).
#[inline(always)]
pub fn in_next() -> bool {
    state().flags.get() & IN_NEXT != 0
}

mod exit_hook {
    //! Thread exit through a pthread key destructor (see the module docs above).
    use core::sync::atomic::{AtomicU32, Ordering};

    use super::{state, DEAD, JOINED};
    use crate::arena::Arena;
    use crate::reservation;

    /// 0: not created, u32::MAX: creation failed, otherwise key + 1.
    static KEY: AtomicU32 = AtomicU32::new(0);
    static LOCK: spin::Mutex<()> = spin::Mutex::new(());

    pub(super) fn install() -> bool {
        let k = KEY.load(Ordering::Acquire);
        if k != 0 {
            return k != u32::MAX;
        }
        let _g = LOCK.lock();
        if KEY.load(Ordering::Acquire) == 0 {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: `key` is a valid out pointer; `on_exit` has the destructor signature.
            let rc = unsafe { libc::pthread_key_create(&mut key, Some(on_exit)) };
            KEY.store(if rc == 0 { key + 1 } else { u32::MAX }, Ordering::Release);
        }
        KEY.load(Ordering::Acquire) != u32::MAX
    }

    pub(super) fn arm(arena: &'static Arena) {
        let k = KEY.load(Ordering::Acquire);
        // SAFETY: the key exists (install succeeded); a non-null value makes glibc call the
        // destructor at thread exit.
        unsafe { libc::pthread_setspecific(k - 1, arena as *const Arena as *const libc::c_void) };
    }

    /// The key's value of a thread that has a small-block heap and no arena: not null, so that
    /// the destructor runs, and never an arena's address.
    const NO_ARENA: *mut libc::c_void = core::ptr::without_provenance_mut(1);

    pub(super) fn arm_without_arena() {
        let k = KEY.load(Ordering::Acquire);
        // SAFETY: as in `arm`.
        unsafe { libc::pthread_setspecific(k - 1, NO_ARENA) };
    }

    extern "C" fn on_exit(value: *mut libc::c_void) {
        let ts = state();
        let in_region = ts.depth.get() != 0 && ts.flags.get() & JOINED == 0;
        // Null the slot first: glibc may still call free() after this (freeres), and those
        // frees must take the remote path.
        ts.active.set(core::ptr::null());
        ts.set_arena(core::ptr::null());
        ts.depth.set(0);
        ts.flags.set(ts.flags.get() | DEAD);
        let heap = ts.heap.replace(core::ptr::null_mut());
        if !heap.is_null() {
            // SAFETY: the thread's own heap; the thread state no longer names it, so the
            // thread never uses it again (its later frees of small blocks are remote).
            unsafe { crate::slab::abandon(heap) };
        }
        if value.is_null() || value == NO_ARENA {
            return;
        }
        // SAFETY: the value is the arena armed by this thread; it lives until released.
        let arena = unsafe { &*(value as *const Arena) };
        // A new thread may adopt it, live blocks and all (see `Arena::adopt`).
        let adoptable = arena.may_hand_on_live(in_region);
        // SAFETY: our own arena; the thread state no longer names it.
        unsafe { reservation::retire_arena(arena, adoptable) };
    }
}

// ------------------------------------------------------------------------------ markers

/// Error from [`region_end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// `region_end` without a matching `region_begin` on this thread.
    NotInRegion,
}

impl core::fmt::Display for RegionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("region_end without a matching region_begin on this thread")
    }
}

impl std::error::Error for RegionError {}

/// Enters a region on the calling thread. Regions nest; only the outermost end resets and
/// resizes the arena. With `RESIZEALLOC_REGION=off` the depth is counted but nothing is routed.
pub fn region_begin() {
    // A Rust program may begin a region before its first allocation through `ResizeAlloc`
    // (the C API's entry points call `region_begin_with`; the preload library registered the
    // handlers at load time).
    crate::fork::register_handlers();
    region_begin_with(state());
}

/// [`region_begin`] for the calling thread's state `ts` (from [`state`]).
#[doc(hidden)]
#[inline]
pub fn region_begin_with(ts: &ThreadState) {
    let depth = ts.depth.get();
    if depth == u32::MAX {
        return;
    }
    ts.depth.set(depth + 1);
    if ts.flags.get() & JOINED != 0 {
        // Process mode (or joined it earlier, markers now): the outermost region is the
        // process, and the program's markers only nest. A process-mode arena takes no
        // checkpoints: it reuses freed memory by laps (see `Arena::push_checkpoint`).
        return;
    }
    let m = mode();
    if m & MODE_OFF != 0 {
        return;
    }
    if m & MODE_PROCESS != 0 {
        join_process(ts);
        return;
    }
    if depth == 0 {
        let a = match ts.arena.get() {
            a if !a.is_null() => a,
            _ => ensure_arena(ts),
        };
        ts.active.set(if a.is_null() {
            outside_value()
        // SAFETY: our own arena.
        } else if unsafe { (*a).predicting() } {
            PREDICT
        } else {
            a
        });
    } else if in_arena_region(ts) {
        // SAFETY: `arena` is our own arena.
        unsafe { (*ts.arena.get()).push_checkpoint() };
    }
}

/// Leaves the innermost region. The outermost end resets the arena and resizes it to the
/// region's peak. An end without a begin is an error value, never a panic.
pub fn region_end() -> Result<(), RegionError> {
    region_end_with(state())
}

/// [`region_end`] for the calling thread's state `ts` (from [`state`]).
#[doc(hidden)]
#[inline]
pub fn region_end_with(ts: &ThreadState) -> Result<(), RegionError> {
    let depth = ts.depth.get();
    if depth == 0 {
        return Err(RegionError::NotInRegion);
    }
    ts.depth.set(depth - 1);
    if ts.flags.get() & JOINED != 0 {
        return Ok(()); // process mode: the markers only nest (see `region_begin`)
    }
    let a = ts.arena.get();
    if a.is_null() || MODE.load(Ordering::Relaxed) & MODE_OFF != 0 {
        // No arena, or markers are ignored (begin pushed nothing either).
        return Ok(());
    }
    // SAFETY: `a` is this thread's own arena.
    let arena = unsafe { &*a };
    if !in_arena_region(ts) {
        // Entered while markers were off (or no arena): nothing to undo.
    } else if depth == 1 {
        ts.active.set(outside_value());
        arena.reset();
        // Memory arenas of exited threads kept warm goes back once the purge delay is over:
        // looked at here in markers mode (process mode's periodic looks do it there). One load
        // while none waits.
        reservation::expire_unowned_if_due();
    } else {
        arena.pop_checkpoint();
    }
    Ok(())
}

/// [`region_begin`] for a thread (state `ts`) that joined process mode, where the markers only
/// nest: true when it counted the region, false when the caller must call [`region_begin`].
/// The C API tries it first: programs mark every step, and this path needs no stack frame.
#[doc(hidden)]
#[inline(always)]
pub fn region_begin_if_joined(ts: &ThreadState) -> bool {
    // The flag first: a thread in markers mode pays one test.
    if ts.flags.get() & JOINED == 0 {
        return false;
    }
    let depth = ts.depth.get();
    if depth == u32::MAX {
        return false;
    }
    ts.depth.set(depth + 1);
    true
}

/// [`region_end`] for a thread (state `ts`) that joined process mode and is in a region: the
/// depth it leaves the thread at, or `None` when the caller must call [`region_end`].
#[doc(hidden)]
#[inline(always)]
pub fn region_end_if_joined(ts: &ThreadState) -> Option<u32> {
    // As in `region_begin_if_joined`.
    if ts.flags.get() & JOINED == 0 {
        return None;
    }
    let depth = ts.depth.get();
    if depth == 0 {
        return None;
    }
    ts.depth.set(depth - 1);
    Some(depth - 1)
}

/// Region nesting depth of the calling thread (0 outside regions).
pub fn region_depth() -> u32 {
    state().depth.get()
}

/// Runs `f` inside a region. The region ends when `f` returns or unwinds.
pub fn region<R>(f: impl FnOnce() -> R) -> R {
    let _guard = RegionGuard::enter();
    f()
}

/// Ends the region it began when dropped. Not `Send`: a region belongs to one thread.
#[must_use = "the region ends when the guard is dropped"]
pub struct RegionGuard {
    _not_send: PhantomData<*const ()>,
}

impl RegionGuard {
    /// Begins a region that ends when the guard is dropped.
    pub fn enter() -> Self {
        region_begin();
        RegionGuard {
            _not_send: PhantomData,
        }
    }
}

impl Drop for RegionGuard {
    fn drop(&mut self) {
        // The guard's own begin makes the depth at least 1 here unless the user ended it by
        // hand; then there is nothing left to end and the error is the right answer to ignore.
        let _ = region_end();
    }
}

/// Runs `f` with the calling thread's allocations going to the next allocator, whatever its
/// region state; frees are unaffected. The state is restored when `f` returns or unwinds.
///
/// For what a region makes and the program keeps: an entry inserted into a long-lived cache,
/// a result handed to another thread. Such blocks stay valid in the arena too, but each pins
/// its granule and is counted when freed; made here they cost what the next allocator charges,
/// and the region's temporaries around them stay in the arena. Also for bookkeeping that must
/// not live in a region arena (the device pools' own maps).
///
/// ```
/// use std::collections::HashMap;
/// let mut cache: HashMap<String, Vec<u8>> = HashMap::new();
/// resizealloc::region(|| {
///     let key = format!("/items/{}", 7); // a temporary: the arena
///     let value = vec![7u8; 100];
///     // The entry outlives the request: the next allocator.
///     resizealloc::outside_regions(|| cache.insert(key.clone(), value.clone()));
/// });
/// assert_eq!(cache["/items/7"].len(), 100);
/// ```
pub fn outside_regions<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(*const Arena);
    impl Drop for Restore {
        fn drop(&mut self) {
            state().active.set(self.0);
        }
    }
    let ts = state();
    let _restore = Restore(ts.active.get());
    // SETTLED routes straight to the next allocator without looking at the mode.
    ts.active.set(SETTLED);
    f()
}

/// Gives memory the calling thread's arena does not need back to the kernel, and the warm
/// memory kept by arenas of exited threads and by the small-block heap's page pool.
pub fn trim() {
    crate::fork::register_handlers(); // as in `region_begin`: this takes the slot table's lock
    reservation::trim_unowned();
    slab::trim_warm();
    let a = state().arena.get();
    if !a.is_null() {
        // SAFETY: our own arena.
        unsafe { (*a).trim() };
    }
}
