//! Runs and commits: the stretch of free granules `[run_start, run_end)` the bump pointer hands
//! out, how it is extended past granules that hold nothing live, and where the fast paths'
//! `limit` comes from.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::Arena;

/// The highest address any arena may commit up to: no limit until a falling `RLIMIT_AS` makes
/// the reservation give back the top slot's tail (`reservation::fit_address_limit`), which
/// stores the slot's start here first and then keeps what the slot's arena `reach`es.
pub(crate) static GROW_LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
use crate::footprint;
use crate::layout::{align_up, GRANULE, HEADER, MIN_ALIGN};
use crate::os;

/// Granules a run takes beyond what the request needs, when they are resident, free and within
/// the capacity (see `Arena::extend_ahead`).
const RUN_AHEAD: usize = 3;

/// How far past its capacity a region's run goes on without counting (see
/// `Arena::extend_past_plan`).
const NEAR_MISS: usize = GRANULE;

/// The fields of `Arena::capacity_laps`.
const LAPS_NOW: u8 = 0b11;
const LAPS_BEFORE: u8 = 0b1100;
const GREW_NOW: u8 = 0b1_0000;

/// Why the current run could not be extended.
pub(super) enum Stop {
    /// The granule starting at this address still holds live blocks.
    Pinned(usize),
    /// The run reached the end of committed memory.
    Uncommitted,
    /// The next granule is not resident and the memory bound does not allow one more.
    Bound,
}

impl Arena {
    /// Grows the current run granule by granule up to `need_end`, as long as each granule is
    /// committed and free.
    pub(super) fn extend_run(&self, need_end: usize) -> Result<(), Stop> {
        let mut run_end = self.run_end.get();
        let mut dirty_end = 0;
        if run_end >= self.used_end.get() && need_end > run_end + GRANULE {
            // A large block at the frontier: its granules were never used, so they are entered
            // at once instead of one by one (which read and wrote three tables per granule: 512
            // MiB touched 170 pages of them).
            let fresh_end = align_up(need_end, GRANULE).min(self.committed_end.get());
            if let Some(already_resident_end) = self.enter_fresh(run_end, fresh_end) {
                dirty_end = already_resident_end;
                run_end = fresh_end;
            }
        }
        let result = loop {
            if run_end >= need_end {
                break Ok(());
            }
            if run_end >= self.committed_end.get() {
                break Err(Stop::Uncommitted);
            }
            let g = self.granule(run_end);
            if self.live(g) != 0 {
                break Err(Stop::Pinned(run_end));
            }
            // No live block starts here, so no crossing one: forget a stale entry before the
            // memory under it is reused. (A run never reaches a granule strictly inside a live
            // block: it starts past such blocks, see `past_pin` and `resume_point`.)
            // SAFETY: granule of this slot; owner thread only.
            unsafe { *self.cross.add(g) = 0 };
            match self.enter_granule(g) {
                None => break Err(Stop::Bound),
                Some(true) => dirty_end = run_end + GRANULE,
                Some(false) => {}
            }
            run_end += GRANULE;
        };
        if result.is_ok() {
            (run_end, dirty_end) = self.extend_ahead(run_end, dirty_end);
        }
        self.set_run_end(run_end, dirty_end);
        result
    }

    /// The run now ends at `run_end`, and the granules it entered that were resident already
    /// (which may hold old contents, so are not known to be zero) end at `dirty_end`.
    fn set_run_end(&self, run_end: usize, dirty_end: usize) {
        if dirty_end > self.zero_from.get() {
            self.zero_from.set(dirty_end);
        }
        self.run_end.set(run_end);
        if run_end > self.used_end.get() {
            self.used_end.set(run_end);
        }
        self.update_limit();
    }

    /// [`Arena::extend_run`] where it needs no exact counts, so that the slow path need not
    /// count the uncounted range first: in markers mode, when every granule from the run's end
    /// to `need_end` is resident, free and within the capacity (a region walking over memory
    /// an earlier one used). The blocks of the uncounted range all lie below the run's end,
    /// so no granule this looks at holds one of them, and a resident granule costs the bound
    /// nothing. False, having changed nothing, otherwise (the caller then counts and takes
    /// [`Arena::extend_run`]).
    ///
    /// Counting the range at every extension counted every block a region kept live while it
    /// allocated more (frees in allocation order, in random order, after the region end), and
    /// each free of a counted block then paid to uncount it: about 90 instructions per block
    /// of 10,000 (`none`, `random` and `fifo` cells of `scripts/matrix.sh`), where a tag flip
    /// frees an uncounted one.
    #[inline]
    pub(super) fn extend_over_resident(&self, need_end: usize) -> bool {
        let run_end = self.run_end.get();
        if self.recycle || need_end <= run_end {
            return false;
        }
        if need_end > self.cap_end.get() {
            return self.extend_past_plan(need_end);
        }
        if need_end > self.committed_end.get() {
            return false;
        }
        // `committed_end` is granule aligned, so this end is committed too.
        let end = align_up(need_end, GRANULE);
        let mut at = run_end;
        while at < end {
            let g = self.granule(at);
            // SAFETY: granule of this slot (below `committed_end`); owner thread only.
            if unsafe { *self.touched.add(g) } == 0 || self.live(g) != 0 {
                return false;
            }
            at += GRANULE;
        }
        let mut at = run_end;
        while at < end {
            // As in `extend_run`: no live block starts here, so no crossing one.
            // SAFETY: granule of this slot; owner thread only.
            unsafe { *self.cross.add(self.granule(at)) = 0 };
            at += GRANULE;
        }
        // Every granule entered was resident: dirty up to its end.
        let (run_end, dirty_end) = self.extend_ahead(end, end);
        self.set_run_end(run_end, dirty_end);
        true
    }

    /// [`Arena::extend_over_resident`] for a region that misses its plan by a little: the run
    /// ends at the capacity's end and the request reaches at most [`NEAR_MISS`] past it. The
    /// run goes on over free granules, committed and made resident as the bound allows, still
    /// without counting, and the plan grows to the run's new end. Were the slow path to lap
    /// first, it would count the range, and a region that fitted its plan by that lap would
    /// never learn what it needs: typed `serde` orders 1.2 KB over their capacity would count
    /// their range twice a request and pay a counted free for every later block (6.5 % more
    /// instructions than mimalloc). Once a region; further past the plan, or where the laps say
    /// the region's temporaries die as it goes ([`Arena::near_miss_allowed`]), the lap comes
    /// first: such a region reuses their granules, and its capacity does not creep.
    fn extend_past_plan(&self, need_end: usize) -> bool {
        let (run_end, cap_end) = (self.run_end.get(), self.cap_end.get());
        if run_end < cap_end
            || need_end > cap_end + NEAR_MISS
            || self.closed.get()
            || self.overflowing.load(Ordering::Relaxed)
            || !self.near_miss_allowed()
        {
            return false;
        }
        let end = align_up(need_end, GRANULE);
        // Granules that may become resident: those not resident now, and those not committed
        // yet (committed below, they read as zero).
        let mut at_most_newly = 0;
        let mut at = run_end;
        while at < end {
            if at < self.committed_end.get() {
                let g = self.granule(at);
                if self.live(g) != 0 {
                    return false;
                }
                // SAFETY: granule of this slot (below `committed_end`); owner thread only.
                at_most_newly += (unsafe { *self.touched.add(g) } == 0) as usize;
            } else {
                at_most_newly += 1;
            }
            at += GRANULE;
        }
        if !footprint::may_enter_many(
            self.resident(),
            at_most_newly,
            self.allowance(self.pending_bytes.get()),
        ) || !self.grow_commit(end)
        {
            return false;
        }
        let (mut newly, mut dirty_end) = (0u64, 0);
        let mut at = run_end;
        while at < end {
            let g = self.granule(at);
            // As in `extend_run`: no live block starts here, so no crossing one.
            // SAFETY: granules of this slot, committed above; owner thread only.
            unsafe {
                *self.cross.add(g) = 0;
                let touched = &mut *self.touched.add(g);
                if *touched != 0 {
                    dirty_end = at + GRANULE;
                } else {
                    *touched = 1;
                    newly += 1;
                }
            }
            at += GRANULE;
        }
        self.resident_granules.add(newly);
        self.set_run_end(end, dirty_end);
        // The plan grows now, not by an overflow: the region's later requests past it still
        // lap first, and its end plans for what it used.
        self.set_capacity_end(end);
        self.capacity_laps.set(self.capacity_laps.get() | GREW_NOW);
        true
    }

    /// Whether [`Arena::extend_past_plan`] may grow the plan: not yet in this region, no lap at
    /// the capacity in it yet, and at most one in the last region (a region that missed its
    /// plan by a little laps once near its end; one whose temporaries die as it goes laps
    /// again and again, and growing its plan a granule at a time would creep towards its
    /// volume).
    fn near_miss_allowed(&self) -> bool {
        let v = self.capacity_laps.get();
        v & (GREW_NOW | LAPS_NOW) == 0 && (v & LAPS_BEFORE) >> 2 <= 1
    }

    /// The slow path lapped because a request would outgrow the capacity.
    pub(super) fn note_capacity_lap(&self) {
        let v = self.capacity_laps.get();
        if v & LAPS_NOW != LAPS_NOW {
            self.capacity_laps.set(v + 1);
        }
    }

    /// An outermost region end: this region's laps become the last one's.
    pub(super) fn end_capacity_laps(&self) {
        self.capacity_laps
            .set((self.capacity_laps.get() & LAPS_NOW) << 2);
    }

    /// A run that reached what it needs goes on over up to [`RUN_AHEAD`] more granules that
    /// are resident and free, within the capacity: the slow path then runs once per few
    /// granules instead of once per granule, and its walk of the uncounted range finds more of
    /// the blocks freed already (a tag flip each, never counted). Resident granules cost the
    /// bound nothing; one that is pinned, not resident or past the capacity ends it. Returns
    /// the new run end and dirty end.
    #[inline]
    fn extend_ahead(&self, mut run_end: usize, mut dirty_end: usize) -> (usize, usize) {
        let ahead_end = (run_end + RUN_AHEAD * GRANULE)
            .min(self.cap_end.get() & !(GRANULE - 1))
            .min(self.committed_end.get());
        while run_end < ahead_end {
            let g = self.granule(run_end);
            // SAFETY: granule of this slot (below `committed_end`); owner thread only.
            if unsafe { *self.touched.add(g) } == 0 || self.live(g) != 0 {
                break;
            }
            // As in `extend_run`: no live block starts here, so no crossing one.
            // SAFETY: granule of this slot; owner thread only.
            unsafe { *self.cross.add(g) = 0 };
            run_end += GRANULE;
            dirty_end = run_end;
        }
        (run_end, dirty_end)
    }

    /// Abandons the current run and starts an empty one at `at` (granule aligned).
    pub(super) fn start_run(&self, at: usize) {
        self.note_peak();
        self.forget_hint_above(at);
        // Only a jump past the highest top of the region is skipped memory: below it lies what
        // the region covered already (a lap going round its own live blocks), which its peak
        // counts once and must not discount.
        self.skipped
            .set(self.skipped.get() + at.saturating_sub(self.peak_top.get()));
        self.lap_progress
            .set(self.lap_progress.get() + (self.run_end.get() - self.run_start.get()));
        self.run_id.set(self.run_id.get() + 1);
        self.run_start.set(at);
        self.run_end.set(at);
        self.top.set(at);
        self.forget_below_top();
        self.uncounted.set(at);
        self.allocs_at_count.set(self.region_allocs.get());
        self.lap_check.set(usize::MAX);
        self.zero_from.set(at);
        self.update_limit();
    }

    /// A run starts at `at`: a lap hint above it no longer holds, as blocks of the new run may
    /// reach into or past the hint's granule (a lap starting there would start inside them).
    #[inline]
    pub(super) fn forget_hint_above(&self, at: usize) {
        if at < self.lap_hint.get() {
            self.lap_hint.set(0);
        }
    }

    /// Commits memory so that at least `need_end` is accessible. Returns false when the slot is
    /// exhausted or the kernel refuses.
    pub(super) fn grow_commit(&self, need_end: usize) -> bool {
        let committed_end = self.committed_end.get();
        if need_end <= committed_end {
            return true;
        }
        if need_end > self.slot_end {
            return false;
        }
        let committed = committed_end - self.data_start;
        // Process mode grows geometrically (half of what is committed, 64 KiB..64 MiB) so laps
        // stay rare. Region mode commits what the overflow needs plus at most 1/16 (fewer
        // mprotect calls in a first region full of small blocks) and resizes at the end.
        let step = if self.recycle {
            (committed / 2).clamp(GRANULE * 4, 64 << 20)
        } else {
            (committed / 16).clamp(GRANULE, 1 << 20)
        };
        let want = align_up(need_end.max(committed_end + step), GRANULE).min(self.slot_end);
        let exact = align_up(need_end, GRANULE);
        for target in [want, exact] {
            // The reach first, then the limit (both sequentially consistent, as the trim's
            // stores and loads in the other order): either the trim sees this reach and keeps
            // the range, or this sees its limit and does not commit past it.
            self.reach.store(target, Ordering::SeqCst);
            if target > GROW_LIMIT.load(Ordering::SeqCst) {
                continue;
            }
            // SAFETY: `[committed_end, target)` is granule aligned and inside our slot.
            if unsafe { os::commit(committed_end, target - committed_end) } {
                self.set_committed_end(target);
                return true;
            }
        }
        self.reach.store(committed_end, Ordering::SeqCst);
        false
    }

    /// The fast path serves `[top, limit)`: the checked run up to the capacity, or nothing when
    /// the user set size bounds.
    #[inline]
    pub(super) fn update_limit(&self) {
        self.limit.set(self.fast_limit());
    }

    /// What `limit` must be: the run up to the capacity (or the whole run while the region
    /// overflows) and up to `lap_check`, or 0 when the user set size bounds or a walk down over
    /// freed blocks paused (the slow path takes it on first).
    pub(super) fn fast_limit(&self) -> usize {
        if self.bounded || self.paused_at.get() != 0 {
            0
        } else if self.overflowing.load(Ordering::Relaxed) {
            self.run_end.get().min(self.lap_check.get())
        } else {
            self.run_end
                .get()
                .min(self.cap_end.get())
                .min(self.lap_check.get())
        }
    }

    pub(super) fn set_capacity_end(&self, cap_end: usize) {
        if cap_end != self.cap_end.get() {
            self.resizes.add(1);
        }
        self.cap_end.set(cap_end);
        self.capacity_bytes.set((cap_end - self.data_start) as u64);
        self.update_limit();
    }

    /// Keeps `committed_end`, the `committed_bytes` figure and `plausible_slots` in step.
    pub(super) fn set_committed_end(&self, end: usize) {
        self.committed_end.set(end);
        let bytes = end - self.data_start;
        self.committed_bytes.set(bytes as u64);
        self.plausible_slots.store(
            bytes.saturating_sub(HEADER) >> MIN_ALIGN.trailing_zeros(),
            Ordering::Relaxed,
        );
    }
}
