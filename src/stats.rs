//! Counters: the calling thread's arena, and totals over the whole process.
//!
//! | figure | meaning |
//! |---|---|
//! | `arena_capacity` | bytes the arena plans for the next region (what it resized to) |
//! | `arena_committed` | bytes of the arena that are readable and writable (capacity, plus overflow and pinned granules not yet given back) |
//! | `high_water` | bytes the last completed outermost region needed, overflow and spills included: the peak the arena resizes to |
//! | `region_allocs` | allocations served by the arena |
//! | `overflow_allocs` | allocations that did not fit the capacity planned at region start (served from extra memory, or spilled) |
//! | `spilled_allocs` | overflow allocations that the next allocator had to serve (arena slot full, or the kernel refused) |
//! | `resizes` | capacity changes (growth to a peak, hysteresis shrinks) |
//!
//! Per-thread figures come from the thread's own arena. Process figures add up every arena that
//! is live or orphaned (a thread exited with blocks still live); the counters of arenas already
//! released are kept in the totals, their memory is not.

use crate::arena::ArenaStats;
use crate::region;
use crate::reservation;

/// The calling thread's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ThreadStats {
    pub arena_capacity: u64,
    pub arena_committed: u64,
    pub high_water: u64,
    pub region_allocs: u64,
    pub overflow_allocs: u64,
    pub spilled_allocs: u64,
    pub resizes: u64,
    /// Region nesting depth right now.
    pub region_depth: u64,
}

/// Totals over every thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ProcessStats {
    pub arena_capacity: u64,
    pub arena_committed: u64,
    /// Sum of the arenas' last peaks.
    pub high_water: u64,
    pub region_allocs: u64,
    pub overflow_allocs: u64,
    pub spilled_allocs: u64,
    pub resizes: u64,
    /// Arenas whose thread is alive.
    pub arenas_live: u64,
    /// Arenas whose thread exited while some of their blocks were still live.
    pub arenas_orphaned: u64,
    /// Threads that wanted an arena and got none (all traffic passed through).
    pub arenas_denied: u64,
    /// Address space reserved for arenas (not memory in use).
    pub reserved_bytes: u64,
}

/// Both views at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Stats {
    pub thread: ThreadStats,
    pub process: ProcessStats,
}

/// Reads the calling thread's and the process's figures. Takes the slot-table lock briefly;
/// does not allocate.
pub fn stats() -> Stats {
    let ts = region::state();
    let a = region::own_arena(ts);
    let mine = if a.is_null() {
        ArenaStats::default()
    } else {
        // SAFETY: our own arena, alive while we run.
        unsafe { (*a).stats() }
    };
    let thread = ThreadStats {
        arena_capacity: mine.arena_capacity,
        arena_committed: mine.arena_committed,
        high_water: mine.high_water,
        region_allocs: mine.region_allocs,
        overflow_allocs: mine.overflow_allocs,
        spilled_allocs: mine.spilled_allocs,
        resizes: mine.resizes,
        region_depth: region::region_depth() as u64,
    };
    let (live, retired, n_live, n_orphaned) = reservation::totals();
    let process = ProcessStats {
        arena_capacity: live.arena_capacity,
        arena_committed: live.arena_committed,
        high_water: live.high_water,
        region_allocs: live.region_allocs + retired.region_allocs,
        overflow_allocs: live.overflow_allocs + retired.overflow_allocs,
        spilled_allocs: live.spilled_allocs + retired.spilled_allocs,
        resizes: live.resizes + retired.resizes,
        arenas_live: n_live,
        arenas_orphaned: n_orphaned,
        arenas_denied: reservation::ARENA_DENIED.load(core::sync::atomic::Ordering::Relaxed),
        reserved_bytes: reservation::reserved_bytes() as u64,
    };
    Stats { thread, process }
}
