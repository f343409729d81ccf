//! Arena routing: which arena, if any, serves the calling thread's allocations right now (its
//! region's, process mode's, or none), the global mode read lazily, and the thread's small-block
//! heap and its count of frees to the next allocator.

use core::ptr;
use core::sync::atomic::Ordering;

use super::exit_hook;
use super::thread_state::{ThreadState, BUSY, DEAD, DENIED, JOINED};
use super::tls::state;
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
use super::{thread_state::OWN_OFFSET, tls::load_state_word};
use crate::arena::{Arena, ArenaConfig};
use crate::mode::{MODE, MODE_MARKERS, MODE_UNINIT};
use crate::options::{self, RegionMode};
use crate::reservation;
use crate::slab;

/// One free to the next allocator in this many is sampled (see `router::note_next_free`).
pub const NEXT_FREE_SAMPLE: u16 = 16;
/// A thread adds its estimate of bytes freed to the next allocator to the front end's count in
/// batches of this many.
pub const NEXT_FREED_BATCH: u64 = 4 << 20;

/// Counts one free to the next allocator; true for one in [`NEXT_FREE_SAMPLE`].
#[inline(always)]
pub(crate) fn count_next_free() -> bool {
    let ts = state();
    let left = ts.next_frees_left.get();
    if left > 1 {
        ts.next_frees_left.set(left - 1);
        return false;
    }
    ts.next_frees_left.set(NEXT_FREE_SAMPLE);
    true
}

/// Adds `bytes` to the calling thread's estimate of bytes freed to the next allocator; returns
/// a batch of at least [`NEXT_FREED_BATCH`] bytes (and starts over) when there is one.
pub fn add_next_freed(bytes: u64) -> Option<u64> {
    let ts = state();
    let sum = ts.next_freed_bytes.get() + bytes;
    if sum < NEXT_FREED_BATCH {
        ts.next_freed_bytes.set(sum);
        return None;
    }
    ts.next_freed_bytes.set(0);
    Some(sum)
}

extern "C" {
    /// glibc's environment pointer: null until libc has initialised itself.
    static environ: *const *const libc::c_char;
}

/// The mode, reading the environment first if nobody has yet. While libc is still starting
/// (no `environ` yet) it answers "markers" without deciding, and asks again next time.
#[inline]
pub(crate) fn mode() -> u8 {
    let m = MODE.load(Ordering::Relaxed);
    if m == MODE_UNINIT {
        return mode_first_look();
    }
    m
}

/// [`mode`] before anyone read the options: out of line, so that callers need no stack frame
/// for it.
#[cold]
#[inline(never)]
fn mode_first_look() -> u8 {
    // SAFETY: reading a pointer-sized libc global; a torn read is impossible on our targets.
    if unsafe { environ.is_null() } {
        return MODE_MARKERS;
    }
    options::init_from_env();
    MODE.load(Ordering::Relaxed)
}

/// True once the options were read (lazily or by [`options::init_from_env`]).
pub fn options_ready() -> bool {
    MODE.load(Ordering::Relaxed) != MODE_UNINIT
}

/// `ThreadState::active` of a thread outside regions whose mode is known: allocations go straight
/// to the next allocator, without looking at the global mode.
pub const SETTLED: *const Arena = SETTLED_BITS as *const Arena;
/// [`SETTLED`] as an integer, for assembly that tests `ThreadState::active` (the preload
/// library's `malloc` entry point).
pub const SETTLED_BITS: usize = 1;

/// `ThreadState::active` of a thread whose allocations go through the lifetime predictor to its
/// arena (`ThreadState::arena`): process mode, and regions of an arena whose regions leave blocks
/// behind (see lifetime.rs).
pub const PREDICT: *const Arena = PREDICT_BITS as *const Arena;
/// [`PREDICT`] as an integer.
pub const PREDICT_BITS: usize = 2;

/// `ThreadState::active` of a thread outside regions while the allocation profiler runs in
/// markers or off mode: its allocations go to the next allocator once counted down
/// (`profile::count_down`), which the preload library's `malloc` does in assembly.
pub const COUNTDOWN: *const Arena = COUNTDOWN_BITS as *const Arena;
/// [`COUNTDOWN`] as an integer.
pub const COUNTDOWN_BITS: usize = 3;
/// The largest `active` value that is a route, not an arena: every larger one is an arena
/// (see [`is_arena`]).
pub const ROUTE_BITS_MAX: usize = COUNTDOWN_BITS;

/// True when an `active` value is an arena (not null, not [`SETTLED`], [`PREDICT`] or
/// [`COUNTDOWN`]).
#[inline(always)]
pub fn is_arena(a: *const Arena) -> bool {
    a as usize > ROUTE_BITS_MAX
}

/// True when an `active` value sends allocations through the profiler's unrouted path when
/// it runs: null, or [`COUNTDOWN`].
#[inline(always)]
pub fn is_unrouted(a: *const Arena) -> bool {
    a.is_null() || a == COUNTDOWN
}

/// The arena allocations should go to through the predictor now, or null.
#[inline(always)]
pub(crate) fn predicted_arena(ts: &ThreadState) -> *const Arena {
    if ts.active.get() == PREDICT {
        ts.arena.get()
    } else {
        ptr::null()
    }
}

/// True while the thread is inside a region (explicit, or process mode) with an arena, whether
/// or not its allocations go through the predictor.
#[inline(always)]
pub(crate) fn in_arena_region(ts: &ThreadState) -> bool {
    is_arena(ts.active.get()) || ts.active.get() == PREDICT
}

/// The arena allocations should go to now, or null.
#[inline(always)]
pub(crate) fn active_arena(ts: &ThreadState) -> *const Arena {
    let a = ts.active.get();
    if is_arena(a) {
        a
    } else {
        ptr::null()
    }
}

/// What `active` becomes when the thread leaves its regions: once the mode is known (markers or
/// off), [`SETTLED`], or [`COUNTDOWN`] while the profiler runs; else null so that the next
/// allocation looks at the mode again.
pub(super) fn outside_value() -> *const Arena {
    if !crate::mode::passes_through() {
        ptr::null()
    } else if crate::mode::PROFILE.load(Ordering::Relaxed) {
        COUNTDOWN
    } else {
        SETTLED
    }
}

/// Marks the calling thread as routed to the next allocator while outside regions (called by
/// the router once it has looked at the mode).
pub(crate) fn settle_outside() {
    let ts = state();
    if ts.active.get().is_null() {
        ts.active.set(outside_value());
    }
}

/// The calling thread's arena (in a region or not), or null.
#[inline(always)]
pub(crate) fn own_arena(ts: &ThreadState) -> *const Arena {
    ts.arena.get()
}

/// The raw `active` value (null, [`SETTLED`] or an arena) in one fs-relative load (x86-64
/// Linux), else through `state()`.
#[inline(always)]
pub(crate) fn load_active() -> *const Arena {
    #[cfg(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    ))]
    return load_state_word::<0>();
    #[cfg(not(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    )))]
    return state().active.get();
}

/// `own_arena(state())` in one fs-relative load (x86-64 Linux), else through `state()`.
#[inline(always)]
pub(crate) fn load_own() -> *const Arena {
    #[cfg(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    ))]
    return load_state_word::<OWN_OFFSET>();
    #[cfg(not(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    )))]
    return own_arena(state());
}

/// The calling thread's small-block heap, or null when it has none yet.
#[inline(always)]
pub(crate) fn slab_heap() -> *mut slab::Heap {
    slab_heap_of(state())
}

/// The small-block heap of the thread whose state is `ts`, or null when it has none yet.
#[inline(always)]
pub(crate) fn slab_heap_of(ts: &ThreadState) -> *mut slab::Heap {
    ts.heap.get()
}

/// Gives the calling thread a small-block heap (null when it cannot have one: exiting, or no
/// heap left), and makes sure its exit hook will abandon it.
#[cold]
#[inline(never)]
pub(crate) fn acquire_slab_heap() -> *mut slab::Heap {
    let ts = state();
    let h = ts.heap.get();
    if !h.is_null() || ts.flags.get() & (BUSY | DEAD) != 0 || !exit_hook::install() {
        return h;
    }
    let h = slab::acquire_heap();
    if !h.is_null() {
        if ts.arena.get().is_null() {
            exit_hook::arm_without_arena();
        }
        ts.heap.set(h);
    }
    h
}

/// Process mode: make the thread's allocations go to its arena from now on. Returns the arena
/// or null when none can be had (busy, exiting, or no slot).
#[cold]
#[inline(never)]
pub(crate) fn join_process(ts: &ThreadState) -> *const Arena {
    if ts.flags.get() & JOINED != 0 {
        // Null while `outside_regions` sends the thread to the next allocator.
        return predicted_arena(ts);
    }
    let a = ensure_arena(ts);
    if !a.is_null() {
        ts.flags.set(ts.flags.get() | JOINED);
        // Under the profiler a joined thread stays unrouted: its allocations pass the
        // profiler's countdown, which then takes the predictor's path (`router::malloc`).
        if !crate::mode::PROFILE.load(Ordering::Relaxed) {
            ts.active.set(PREDICT);
        }
    }
    a
}

/// Runs `f` (an allocation) with a joined thread routed through the predictor: under the
/// profiler a joined thread's `active` stays null between allocations, so that each passes the
/// profiler's countdown (see `join_process`), and the predictor's paths read `PREDICT` there.
pub(crate) fn as_predicted<R>(ts: &ThreadState, f: impl FnOnce() -> R) -> R {
    if !ts.active.get().is_null() {
        return f();
    }
    ts.active.set(PREDICT);
    let r = f();
    if ts.active.get() == PREDICT {
        ts.active.set(ptr::null());
    }
    r
}

#[cold]
#[inline(never)]
pub(super) fn ensure_arena(ts: &ThreadState) -> *const Arena {
    let a = ts.arena.get();
    if !a.is_null() {
        return a;
    }
    if ts.flags.get() & (BUSY | DEAD | DENIED) != 0 {
        return ptr::null();
    }
    ts.flags.set(ts.flags.get() | BUSY);
    let o = options::get();
    let cfg = ArenaConfig {
        initial_capacity: o.initial_arena,
        min_alloc: o.min_size,
        max_alloc: o.max_size,
        recycle: o.region == RegionMode::Process,
    };
    let got = if exit_hook::install() {
        reservation::acquire_arena(o.max_arena, o.reserve, cfg)
    } else {
        None
    };
    let mut flags = ts.flags.get() & !BUSY;
    match got {
        Some(arena) => {
            ts.set_arena(arena);
            exit_hook::arm(arena);
        }
        None => flags |= DENIED,
    }
    ts.flags.set(flags);
    ts.arena.get()
}
