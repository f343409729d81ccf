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
//! The memory figures ([`MemoryStats`]) say how the bound of `footprint.rs` and the lifetime
//! predictor of `lifetime.rs` are doing: resident and live bytes, the arenas' efficiency (live
//! over resident), granules given back, bytes the bound and the predictor sent elsewhere, and
//! sites learned.
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

/// The memory bound and the lifetime predictor (see `footprint.rs`, `lifetime.rs`). Appended
/// after the first two views so that the C struct stays a compatible prefix for older callers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct MemoryStats {
    /// Bytes the calling thread's arena holds resident.
    pub thread_resident: u64,
    /// Bytes of the calling thread's arena's live blocks (headers included), whatever path
    /// served them.
    pub thread_live: u64,
    /// Bytes all arenas hold resident.
    pub process_resident: u64,
    /// Bytes of all arenas' live blocks (another thread's blocks from its fast paths count
    /// from its next slow path or region end on: see [`stats`]).
    pub process_live: u64,
    /// `process_live * 1000 / process_resident` (1000 when nothing is resident).
    pub efficiency_permille: u64,
    /// 16 KiB granules given back to the kernel (`madvise`), all arenas, released ones included.
    pub granules_given_back: u64,
    /// Times an arena reached its bound and closed.
    pub bound_closures: u64,
    /// Bytes of requests the bound sent to the next allocator.
    pub bytes_turned_away: u64,
    /// Bytes of requests the lifetime predictor sent to the next allocator.
    pub bytes_routed_away: u64,
    /// Times an allocation site was learned long-lived.
    pub sites_learned_long: u64,
    /// Times a long-lived site was learned short-lived again.
    pub sites_learned_short: u64,
    /// Sites routed to the next allocator now.
    pub sites_long_now: u64,
}

/// The small-block heap (see `slab/`), where process mode sends every small block.
/// Appended last, like [`MemoryStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SmallStats {
    /// 64 KiB pages in use (holding blocks, or cached empty by a heap or warm in the pool).
    pub pages_in_use: u64,
    /// Their bytes (address space; only the 4 KiB pieces blocks were carved from are resident).
    pub bytes_in_pages: u64,
    /// Pages given back to the kernel (`madvise`) once empty.
    pub pages_given_back: u64,
    /// Pages another thread's heap took over (left by an exited thread, or detached from a
    /// full page by another thread's free).
    pub pages_adopted: u64,
}

/// All views at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Stats {
    pub thread: ThreadStats,
    pub process: ProcessStats,
    pub memory: MemoryStats,
    pub small: SmallStats,
}

/// Reads the calling thread's and the process's figures. Takes the slot-table lock briefly;
/// does not allocate. The calling thread's arena counts the blocks its fast paths handed out
/// first, so its figures are exact; another thread's arena includes such blocks from its next
/// slow path or region end on (its owner alone may count them).
pub fn stats() -> Stats {
    crate::fork::register_handlers(); // as in `region_begin`: this takes the slot table's lock
    let ts = region::state();
    let a = region::own_arena(ts);
    let mine = if a.is_null() {
        ArenaStats::default()
    } else {
        // SAFETY: our own arena, alive while we run; we are its owner. Its blocks the fast
        // paths handed out are counted first, so that its figures (and the process's, read
        // below) include them.
        unsafe {
            (*a).count_pending();
            (*a).stats()
        }
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
    let (learned_long, learned_short, long_now) = crate::lifetime::counts();
    let resident = live.resident_bytes;
    let memory = MemoryStats {
        thread_resident: mine.resident_bytes,
        thread_live: mine.live_bytes,
        process_resident: resident,
        process_live: live.live_bytes,
        efficiency_permille: match resident {
            0 => 1000,
            r => live.live_bytes.min(r) * 1000 / r,
        },
        granules_given_back: live.given_back_granules + retired.given_back_granules,
        bound_closures: live.bound_closures + retired.bound_closures,
        bytes_turned_away: live.bytes_turned_away + retired.bytes_turned_away,
        bytes_routed_away: live.bytes_routed_away + retired.bytes_routed_away,
        sites_learned_long: learned_long,
        sites_learned_short: learned_short,
        sites_long_now: long_now,
    };
    let (pages, given_back, adopted) = crate::slab::counts();
    let small = SmallStats {
        pages_in_use: pages,
        bytes_in_pages: pages * crate::slab::PAGE_SIZE as u64,
        pages_given_back: given_back,
        pages_adopted: adopted,
    };
    Stats {
        thread,
        process,
        memory,
        small,
    }
}
