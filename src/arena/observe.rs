//! Observation: per-arena figures for `stats`, `mallinfo2` and the tests, readable by any thread.

use core::sync::atomic::Ordering;

use super::orphan::{ORPHANED, ORPHANED_SEEN};
use super::Arena;
use crate::layout::{GRANULE, GRANULE_SHIFT};

/// Per-arena figures. See [`crate::stats`](mod@crate::stats) for what each one means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ArenaStats {
    pub arena_capacity: u64,
    pub arena_committed: u64,
    pub high_water: u64,
    pub region_allocs: u64,
    pub overflow_allocs: u64,
    pub spilled_allocs: u64,
    pub resizes: u64,
    /// Bytes of memory the arena holds resident (granules entered and not given back).
    pub resident_bytes: u64,
    /// Bytes of the arena's live blocks, headers included.
    pub live_bytes: u64,
    /// Granules given back to the kernel (`madvise`) while the arena lived.
    pub given_back_granules: u64,
    /// Times the arena closed because it reached its memory bound.
    pub bound_closures: u64,
    /// Bytes of requests sent to the next allocator because the arena was at its bound.
    pub bytes_turned_away: u64,
    /// Bytes of requests the lifetime predictor sent to the next allocator.
    pub bytes_routed_away: u64,
}

impl ArenaStats {
    pub const ZERO: ArenaStats = ArenaStats {
        arena_capacity: 0,
        arena_committed: 0,
        high_water: 0,
        region_allocs: 0,
        overflow_allocs: 0,
        spilled_allocs: 0,
        resizes: 0,
        resident_bytes: 0,
        live_bytes: 0,
        given_back_granules: 0,
        bound_closures: 0,
        bytes_turned_away: 0,
        bytes_routed_away: 0,
    };
}

impl Arena {
    /// Bytes of this arena's live blocks, headers included (any thread). Exact on the owner
    /// thread once the uncounted range is counted (every slow path and region end does that
    /// first); in between it leaves out the blocks the fast path handed out since.
    pub fn live_bytes(&self) -> u64 {
        let balance = self.remote_balance.load(Ordering::Acquire);
        if balance >= ORPHANED_SEEN {
            // The owner has exited: what it left minus what was freed since.
            return ORPHANED.saturating_sub(balance);
        }
        // On the owner thread `local >= remote` always holds. Another thread may read `local`,
        // then see remote frees of blocks allocated after that read: saturate instead of wrap.
        self.live_local_bytes.get().saturating_sub(balance)
    }

    /// The figures of this arena; any thread may call it.
    /// Counts the blocks the fast paths handed out since the counts were last looked at (the
    /// uncounted range), so that [`Arena::stats`] read right after, on the owner thread,
    /// includes them: until something counts them, `live_bytes` leaves them out. Owner thread.
    pub fn count_pending(&self) {
        self.flush_uncounted();
    }

    pub fn stats(&self) -> ArenaStats {
        ArenaStats {
            arena_capacity: self.capacity_bytes.get(),
            arena_committed: self.committed_bytes.get(),
            high_water: self.high_water.get(),
            region_allocs: self.region_allocs.get(),
            overflow_allocs: self.overflow_allocs.get() + self.overflow_in_region(),
            spilled_allocs: self.spilled_allocs.get(),
            resizes: self.resizes.get(),
            resident_bytes: self.resident_granules.get() * GRANULE as u64,
            live_bytes: self.live_bytes(),
            given_back_granules: self.given_back_granules.get(),
            bound_closures: self.closures.get(),
            bytes_turned_away: self.bytes_turned_away.get(),
            bytes_routed_away: self.bytes_routed_away.get(),
        }
    }

    /// Units on the granule holding `addr`, the uncounted blocks' included (tests and
    /// invariant checks).
    pub fn live_at(&self, addr: usize) -> u64 {
        self.units(self.granule(addr))
    }

    /// Calls `f(granule_start, blocks)` for every granule that was ever in a run, where
    /// `blocks` is the number of live blocks that touch the granule: its count, plus one when it
    /// lies strictly inside a block that spans granules (tests and invariant checks).
    pub fn for_each_granule(&self, mut f: impl FnMut(usize, u64)) {
        let units = |g| self.units(g);
        let crossing = |g| self.crossing_last_or_uncounted(g);
        self.walk_granules(self.used_end.get(), units, crossing, |g, units, covered| {
            // A block's last granule is counted, not "inside".
            let blocks = if units != 0 { units } else { covered as u64 };
            f(self.slot_base + (g << GRANULE_SHIFT), blocks);
        });
    }

    /// Whether a walk down over freed blocks paused and waits for the next allocation (owner
    /// thread; tests and invariant checks).
    pub fn walk_paused(&self) -> bool {
        self.paused_at.get() != 0
    }

    /// Bytes the current outermost region has used so far (the running high-water mark).
    pub fn current_peak(&self) -> usize {
        self.peak_bytes().saturating_add(self.spill_bytes.get())
    }
}
