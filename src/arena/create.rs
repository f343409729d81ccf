//! Construction: an arena laid out at the start of a fresh slot, or rebuilt in a slot an earlier
//! arena left (see the slot layout in the module docs).

use core::cell::Cell;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use super::bound::{EMPTIED_MIN, LOOK_EVERY};
use super::counts::MAX_SLOT;
use super::sample::{RING, SWEEP_MIN};
use super::{Arena, ArenaConfig, OwnerCounter, WALK_STEPS_SHORT};
use crate::layout::{align_up, GRANULE, GRANULE_SHIFT};
use crate::os;

/// Planned capacities from this size on are advised to use transparent huge pages.
pub(super) const HUGE_PAGE_CAPACITY: usize = 4 << 20;

impl Arena {
    /// Bytes at the start of a slot taken by the arena's own metadata.
    pub const fn metadata_bytes(slot_size: usize) -> usize {
        let granules = slot_size >> GRANULE_SHIFT;
        align_up(align_up(size_of::<Arena>(), 64) + granules * 21, GRANULE)
    }

    /// Builds an arena in the slot `[slot_base, slot_base + slot_size)`.
    ///
    /// Returns `None` if the kernel refuses to commit the metadata.
    ///
    /// # Safety
    /// 1. The slot lies in a [`os::reserve`] mapping, is aligned to `slot_size`, and is otherwise unused.
    /// 2. `slot_size` is a power of two and at least 4 granules larger than the metadata.
    /// 3. The arena is used by one owner thread at a time, as documented on [`Arena`].
    pub unsafe fn create(
        slot_base: usize,
        slot_size: usize,
        cfg: ArenaConfig,
    ) -> Option<&'static Arena> {
        let meta = Self::metadata_bytes(slot_size);
        debug_assert!(slot_size.is_power_of_two() && slot_base.is_multiple_of(slot_size));
        if slot_size > MAX_SLOT {
            return None;
        }
        debug_assert!(
            meta + 4 * GRANULE <= slot_size,
            "slot of {slot_size} bytes too small"
        );
        let data_start = slot_base + meta;
        let capacity = Self::initial_capacity(&cfg, data_start, slot_base + slot_size);
        // SAFETY: obligation 1 says the slot is ours; both ranges are granule (so page) aligned.
        if !unsafe { os::commit(slot_base, meta) } {
            return None;
        }
        // SAFETY: the data range is ours (obligation 1). If committing the first capacity fails, start with none: the first
        // allocation then commits what it needs or spills.
        let committed = if unsafe { os::commit(data_start, capacity) } {
            capacity
        } else {
            0
        };
        // SAFETY: obligations 1-3; the metadata is committed and, in a slot never used or
        // decommitted since, reads as zero; so does the data.
        Some(unsafe { Self::build(slot_base, slot_size, cfg, data_start + committed, 0) })
    }

    /// Builds a new arena in the slot of `old`, for a new owner thread, keeping the memory `old`
    /// still has committed and resident: a thread that replaces one that just exited starts on
    /// warm pages instead of faulting fresh ones and making the system calls again.
    ///
    /// `old`'s granule tables are cleared (nothing is live, so every count is settled); its
    /// `touched` table is kept, as it still says which granules hold pages: the new run treats
    /// those as holding old contents (never as zero), as a lap does.
    ///
    /// # Safety
    /// 1. `old` came from [`Arena::create`] or [`Arena::reuse`], its owner has exited, none of
    ///    its blocks is live, and no other thread reads or writes it any more (the caller won
    ///    the release claim of [`Arena::complete_orphan`] or [`Arena::free_remote`], and holds
    ///    the slot).
    /// 2. The new arena is used by one owner thread at a time, as documented on [`Arena`].
    pub unsafe fn reuse(old: &'static Arena, cfg: ArenaConfig) -> &'static Arena {
        let (slot_base, slot_end, data_start) = (old.slot_base, old.slot_end, old.data_start);
        // Free memory the exited owner kept for the purge delay waits on in the new one.
        let purge_at_ms = old.purge_at_ms.get();
        let slot_size = slot_end - slot_base;
        let mut committed_end = old.committed_end.get();
        // Every count lies below the highest run end and the committed memory.
        let counted =
            (align_up(old.used_end.get().max(committed_end), GRANULE) - slot_base) >> GRANULE_SHIFT;
        let granules = slot_size >> GRANULE_SHIFT;
        // SAFETY: obligation 1: nothing else uses the slot's tables; `counted <= granules`, and
        // each table has `granules` entries in committed metadata (see `metadata_bytes`).
        unsafe {
            ptr::write_bytes(old.local, 0, counted);
            ptr::write_bytes(old.local.add(granules), 0, counted);
            ptr::write_bytes(old.cross, 0, counted);
        }
        let mut resident = 0;
        for g in old.granule(data_start)..old.granule(committed_end) {
            // SAFETY: a granule of the slot; the table is ours (obligation 1).
            resident += unsafe { *old.touched.add(g) } as u64;
        }
        let mut capacity = Self::initial_capacity(&cfg, data_start, slot_end);
        if !cfg.recycle {
            let planned = old
                .cap_end
                .get()
                .min(committed_end)
                .saturating_sub(data_start);
            capacity = capacity.max(align_up(planned, GRANULE).min(slot_end - data_start));
        }
        if committed_end < data_start + capacity
            // SAFETY: `[committed_end, data_start + capacity)` lies in our slot, granule aligned.
            && unsafe { os::commit(committed_end, data_start + capacity - committed_end) }
        {
            committed_end = data_start + capacity;
        }
        // SAFETY: obligations 1 and 2; the tables were cleared above but for `touched`, which
        // matches `resident`; memory of granules not touched reads as zero (given back or never
        // entered).
        let arena = unsafe { Self::build(slot_base, slot_size, cfg, committed_end, resident) };
        if data_start + capacity > arena.cap_end.get() && data_start + capacity <= committed_end {
            arena.set_capacity_end(data_start + capacity);
        }
        arena.purge_at_ms.set(purge_at_ms);
        arena.debug_check();
        arena
    }

    /// The capacity an arena starts with: what the configuration asks for, in whole granules,
    /// at most what the slot holds.
    fn initial_capacity(cfg: &ArenaConfig, data_start: usize, slot_end: usize) -> usize {
        align_up(cfg.initial_capacity.max(GRANULE), GRANULE).min(slot_end - data_start)
    }

    /// Writes a new arena at the start of its slot, with `[data_start, committed_end)` committed
    /// and `resident` granules of it counted resident.
    ///
    /// # Safety
    /// 1. As [`Arena::create`]'s obligations 1 to 3, but the slot's metadata is committed.
    /// 2. The `local`, `remote` and `cross` tables read as zero; `touched` has exactly
    ///    `resident` granules set, all below `committed_end`; the memory of every other granule
    ///    reads as zero.
    unsafe fn build(
        slot_base: usize,
        slot_size: usize,
        cfg: ArenaConfig,
        committed_end: usize,
        resident: u64,
    ) -> &'static Arena {
        let meta = Self::metadata_bytes(slot_size);
        let data_start = slot_base + meta;
        let slot_end = slot_base + slot_size;
        let data_room = slot_end - data_start;
        let capacity = Self::initial_capacity(&cfg, data_start, slot_end);
        // Process mode's capacity follows what is committed; a region's starts at the plan.
        let cap_end = if cfg.recycle {
            committed_end
        } else {
            committed_end.min(data_start + capacity)
        };
        let granules = slot_size >> GRANULE_SHIFT;
        let local = (slot_base + align_up(size_of::<Arena>(), 64)) as *mut u64;
        // SAFETY: `local` and `remote` lie within the metadata just committed (see metadata_bytes).
        let remote = unsafe { local.add(granules) } as *const AtomicU64;
        // SAFETY: as above: the crossing table follows the two count tables, and the byte table
        // follows it.
        let cross = unsafe { local.add(2 * granules) } as *mut u32;
        // SAFETY: as above.
        let touched = unsafe { cross.add(granules) } as *mut u8;
        let min_alloc = cfg.min_alloc.max(1);
        let user_max_alloc = cfg.max_alloc.max(min_alloc);
        // Size bounds the user set turn the fast path off (its limit stays 0): it checks no size.
        let bounded = min_alloc > 1 || user_max_alloc < data_room;
        let arena = Arena {
            top: Cell::new(data_start),
            limit: Cell::new(if bounded { 0 } else { data_start }),
            local_by_addr: local.wrapping_sub(slot_base >> GRANULE_SHIFT),
            cross_by_addr: cross.wrapping_sub(slot_base >> GRANULE_SHIFT),
            run_start: Cell::new(data_start),
            uncounted: Cell::new(data_start),
            below_top: Cell::new(slot_base + core::mem::offset_of!(Arena, limit)),
            peak_top: Cell::new(data_start),
            data_start,
            uncounted_freed: Cell::new(0),
            plausible_slots: AtomicUsize::new(0),
            committed_bytes: OwnerCounter::default(),
            region_allocs: OwnerCounter::default(),
            live_uncounted: Cell::new(0),
            carried: Cell::new(false),
            live_local_bytes: OwnerCounter::default(),
            slot_base,
            local,
            user_min_alloc: min_alloc,
            user_max_alloc,
            run_end: Cell::new(data_start),
            run_id: Cell::new(0),
            paused_at: Cell::new(0),
            paused_link: Cell::new(0),
            walk_steps: Cell::new(WALK_STEPS_SHORT),
            cap_end: Cell::new(cap_end),
            committed_end: Cell::new(committed_end),
            reach: AtomicUsize::new(committed_end),
            used_end: Cell::new(data_start),
            slot_end,
            origin: Cell::new(data_start),
            spill_bytes: Cell::new(0),
            skipped: Cell::new(0),
            inherited_pins: Cell::new(0),
            peaks: Default::default(),
            peaks_seen: Cell::new(0),
            min_capacity: Cell::new(capacity),
            recycle: cfg.recycle,
            bounded,
            lap_progress: Cell::new(0),
            allocs_at_count: Cell::new(0),
            lap_check: Cell::new(usize::MAX),
            lap_hint: Cell::new(0),
            remote_at_hint: Cell::new(0),
            checkpoints: Default::default(),
            checkpoint_depth: Cell::new(0),
            touched,
            cross,
            zero_from: Cell::new(data_start),
            pending_bytes: Cell::new(0),
            closed: Cell::new(false),
            dry: Cell::new(false),
            capacity_laps: Cell::new(0),
            dry_remote: Cell::new(0),
            turned_away: Cell::new(0),
            emptied_left: Cell::new(EMPTIED_MIN),
            look_countdown: Cell::new(LOOK_EVERY),
            last_look_ms: Cell::new(0),
            largest_large: Cell::new(0),
            purge_at_ms: Cell::new(0),
            remote_seen: Cell::new(0),
            last_purge_clock: Cell::new(0),
            purged_once: Cell::new(false),
            live_after_purge: Cell::new(u64::MAX),
            resident_after_purge: Cell::new(0),
            resident_granules: OwnerCounter::default(),
            given_back_granules: OwnerCounter::default(),
            closures: OwnerCounter::default(),
            bytes_turned_away: OwnerCounter::default(),
            alloc_clock: OwnerCounter::default(),
            next_sweep: Cell::new(SWEEP_MIN as u64),
            sample_countdown: Cell::new(1),
            sample_rng: Cell::new((slot_base >> GRANULE_SHIFT) as u32 | 1),
            probe_countdown: Cell::new(1),
            sampled_at: Cell::new(0),
            sampled_link: Cell::new(0),
            ring: [const { AtomicUsize::new(0) }; RING],
            ring_words: [const { Cell::new(0) }; RING],
            ring_next: Cell::new(0),
            ring_used: Cell::new(0),
            predicting: Cell::new(false),
            escaping_regions: Cell::new(0),
            clean_regions: Cell::new(0),
            live_at_reset: Cell::new(0),
            routed_at_reset: Cell::new(0),
            bytes_routed_away: OwnerCounter::default(),
            sent_unpublished: Cell::new(0),
            capacity_bytes: OwnerCounter::default(),
            high_water: OwnerCounter::default(),
            overflow_allocs: OwnerCounter::default(),
            overflowing: AtomicBool::new(false),
            overflow_base: OwnerCounter::default(),
            spilled_allocs: OwnerCounter::default(),
            resizes: OwnerCounter::default(),
            remote,
            remote_balance: AtomicU64::new(0),
            orphaned: AtomicBool::new(false),
            slot_index: AtomicUsize::new(0),
        };
        arena.capacity_bytes.set((cap_end - data_start) as u64);
        arena.set_committed_end(committed_end);
        arena.resident_granules.set(resident);
        let at = slot_base as *mut Arena;
        // SAFETY: the slot start is committed, 64-byte aligned (slot aligned) and unused (obligation 1).
        unsafe { at.write(arena) };
        // SAFETY: just written; lives as long as the slot, which outlives every user by obligation 1.
        unsafe { &*at }
    }
}
