//! The end of the outermost region: the bump pointer goes back to the lowest point nothing live
//! lies above, the peak is recorded, and the resize policy sets the next region's capacity.

use core::sync::atomic::Ordering;

use super::create::HUGE_PAGE_CAPACITY;
use super::{Arena, LAP_EARLY_SPAN, WALK_STEPS_SHORT};
use crate::footprint;
use crate::layout::{align_up, GRANULE, GRANULE_SHIFT};
use crate::os;

/// Number of region peaks the shrink policy looks back over.
pub const PEAK_HISTORY: usize = 8;

/// The resize policy, kept free of state so it can be tested on its own.
///
/// * **Grow to the peak at once**: a region that needed more than the capacity gets exactly its
///   peak (granule rounded), so the same work runs with zero overflow next time.
/// * **Shrink with hysteresis**: once `PEAK_HISTORY` (8) regions in a row peaked under a quarter
///   of the capacity, shrink to 1.25 × the largest of them (never below the initial capacity).
pub fn resize_policy(
    capacity: usize,
    peak: usize,
    recent_max: usize,
    seen: usize,
    min_capacity: usize,
) -> usize {
    if peak > capacity {
        return align_up(peak, GRANULE);
    }
    if seen >= PEAK_HISTORY && recent_max < capacity / 4 {
        let target = align_up(recent_max + recent_max / 4, GRANULE).max(min_capacity);
        if target < capacity {
            return target;
        }
    }
    capacity
}

impl Arena {
    /// Bytes this outermost region has needed so far, spills not included.
    pub(super) fn peak_bytes(&self) -> usize {
        self.note_peak();
        self.peak_top.get().saturating_sub(self.origin.get())
    }

    /// The region ends: its overflow allocations join the count, and the fast path stops at
    /// the capacity again.
    fn settle_overflow(&self) {
        if self.overflowing.load(Ordering::Relaxed) {
            self.overflow_allocs.add(self.overflow_in_region());
            self.overflowing.store(false, Ordering::Relaxed);
            self.update_limit();
        }
    }

    /// The outermost region ended: record the peak, resize to it (growing at once, shrinking with
    /// hysteresis), and choose where the next region starts:
    ///
    /// * nothing from the last region is live: back to the start of the arena (hot memory);
    /// * something escaped: right after the last live granule, so escapes from many regions
    ///   pack together instead of each pinning a granule in the middle of the working space;
    /// * unless the room left before the capacity end is smaller than the last peak: then back
    ///   to the start, skipping pinned granules (a lap, as in a ring buffer).
    ///
    /// A region whose own blocks are still live when it ends, and not counted yet (the program
    /// frees them after the end), may leave them uncounted: see [`Arena::carry_reset`].
    #[inline]
    pub fn reset(&self) {
        // The next region shows again whether it allocates after its walks.
        self.walk_steps.set(WALK_STEPS_SHORT);
        self.end_capacity_laps();
        if self.live_uncounted.get() != 0 && self.carry_reset() {
            return;
        }
        self.flush_uncounted();
        // Each quiet path asks for its own side of `predicting` first: one test picks the one
        // that may apply (a predicting region's end skipped a dozen failing checks before).
        let quiet = if self.predicting.get() {
            self.quiet_predicting_reset()
        } else {
            self.quiet_reset()
        };
        if !quiet {
            self.reset_general();
        }
    }

    /// [`Arena::reset`] when [`Arena::quiet_reset`] declined: out of line, so that a region
    /// end that takes the quiet path needs no stack frame for it.
    #[inline(never)]
    fn reset_general(&self) {
        self.settle_overflow();
        self.dry.set(false);
        // What the region needed: the span its bump pointer covered, less the granules it had to
        // jump over (pinned by escapes), plus what spilled. Planning for the jumps would let
        // escapes raise the capacity, and with it the memory bound, region after region; only
        // the jumps over what an earlier owner left, a bounded amount known at adoption, are
        // planned for.
        let peak = self
            .peak_bytes()
            .saturating_sub(self.skipped.get().saturating_sub(self.inherited_pins.get()))
            .saturating_add(self.spill_bytes.get());
        self.record_peak(peak);

        let free_from = self.resume_point();

        let capacity = self.cap_end.get() - self.data_start;
        let room = self.slot_end - self.data_start;
        let recent_max = self.recent_peak_max().min(room);
        let wanted = resize_policy(
            capacity,
            peak.min(room),
            recent_max,
            self.peaks_seen.get(),
            self.min_capacity.get(),
        );
        let wanted = wanted.min(room);
        if wanted > capacity {
            let need_end = self.data_start + wanted;
            if wanted >= HUGE_PAGE_CAPACITY && !self.recycle && self.region_was_dense() {
                // A large planned capacity that the region touched all over: transparent huge
                // pages (where the kernel has them in `madvise` mode) save TLB misses and faults.
                // Only then: for a small or sparsely used arena a huge page makes one touched
                // byte cost 2 MiB of RSS, and an exited thread's one pinned granule kept its
                // whole huge page resident (threads test: 21 MiB peak, 9 MiB without); regions
                // of large blocks touched a byte every 4 MiB held 381 MiB (glibc 3 MiB).
                // SAFETY: `[data_start, need_end)` lies in our slot; the advice changes no
                // contents.
                unsafe { os::advise_huge_pages(self.data_start, wanted) };
            }
            if self.grow_commit(need_end) || self.committed_end.get() >= need_end {
                self.set_capacity_end(need_end);
            } else {
                self.set_capacity_end(self.committed_end.get());
            }
        }
        // Shrinking lowers the capacity now and gives the memory past it back once the next run
        // is settled (below), so that a run kept across the region end is cut at the capacity.
        let shrunk = wanted < capacity;
        if shrunk {
            self.set_capacity_end(self.data_start + wanted);
            self.peaks_seen.set(0);
        }

        // The room check uses what the region consumed, not what it jumped over: a region that
        // had to skip pinned granules after a lap would otherwise lap again every time.
        let consumed = peak;
        let room = self.cap_end.get().saturating_sub(free_from);
        let resume = if room < consumed {
            self.lap_start()
        } else {
            free_from
        };
        self.resume_at(resume, resume == free_from, shrunk);
        if shrunk {
            let keep_lo = self.run_start.get() & !(GRANULE - 1);
            self.give_back(self.cap_end.get(), keep_lo, self.run_end.get());
        }
        self.skipped.set(0);
        self.spill_bytes.set(0);
        // The allocation clock also paces purges: regions that do not predict move it by what
        // they consumed.
        self.alloc_clock.add(peak as u64);
        self.predictor_region_end();
        // Escapes may have left more resident memory than the bound allows.
        self.look_at_bound(true);
        self.debug_check();
    }

    /// Raises the least capacity the resize policy plans to `bytes` (rounded up to a granule,
    /// at most the slot), and the capacity now if it is lower. For an arena whose regions are
    /// the polls of many interleaved tasks (`InRegion`): each poll's peak is a few KiB, but the
    /// blocks the tasks keep across their `.await`s die only many polls later, and a capacity
    /// planned from one poll's peak makes the regions lap over them until the memory bound
    /// closes the arena. Markers mode, between regions (owner thread, depth 0): the arena is
    /// then as a region end leaves it, which may change the capacity too.
    pub fn plan_at_least(&self, bytes: usize) {
        if self.recycle {
            return;
        }
        let want = align_up(bytes, GRANULE).min(self.slot_end - self.data_start);
        if self.min_capacity.get() >= want {
            return;
        }
        self.min_capacity.set(want);
        if self.cap_end.get() - self.data_start < want {
            let need_end = self.data_start + want;
            if self.grow_commit(need_end) || self.committed_end.get() >= need_end {
                self.set_capacity_end(need_end);
            } else {
                self.set_capacity_end(self.committed_end.get().max(self.cap_end.get()));
            }
        }
        self.debug_check();
    }

    /// The least capacity the resize policy plans (see [`Arena::plan_at_least`]).
    pub fn min_capacity(&self) -> usize {
        self.min_capacity.get()
    }

    /// The next region starts at `resume`. `nothing_live_past` says that no block in
    /// `[resume, top)` is live; `shrunk`, that the capacity was just lowered.
    #[inline]
    fn resume_at(&self, resume: usize, nothing_live_past: bool, shrunk: bool) {
        if nothing_live_past && self.run_start.get() <= resume && resume <= self.top.get() {
            // Keep the current run from `resume` on: nothing in `[resume, top)` is live and
            // `[top, run_end)` is unused, so the next region bumps through granules already
            // entered instead of entering each one again (shrinking may have cut the run's
            // committed tail, never below a live granule, so never below resume's granule).
            self.top.set(resume);
            self.uncounted.set(resume); // the caller flushed
            let mut run_end = self.run_end.get().min(self.committed_end.get());
            if shrunk {
                run_end = run_end.min(self.cap_end.get());
            }
            let run_end = run_end.max(align_up(resume, GRANULE));
            self.run_end.set(run_end);
            // A run this long is walked without a slow path: the fast paths stop once on the
            // way, so that a region that churns through it can lap (`look_at_churn`), a
            // granule past where the range it makes spans `LAP_EARLY_SPAN` (the block that
            // stops there starts below the stop).
            let check = resume + LAP_EARLY_SPAN + GRANULE;
            self.lap_check
                .set(if run_end > check { check } else { usize::MAX });
            self.update_limit();
            // The highest top of the run is forgotten below: what lies under it may have been
            // written, so it is not known to be zero any more.
            self.zero_from
                .set(self.zero_from.get().max(self.peak_top.get()));
        } else {
            self.forget_hint_above(resume);
            self.run_id.set(self.run_id.get() + 1);
            self.run_start.set(resume);
            self.run_end.set(resume);
            self.top.set(resume);
            self.uncounted.set(resume);
            self.lap_check.set(usize::MAX);
            self.zero_from.set(resume);
            self.update_limit();
        }
        self.allocs_at_count.set(self.region_allocs.get());
        self.forget_below_top();
        self.origin.set(resume);
        self.peak_top.set(resume);
        self.checkpoint_depth.set(0);
    }

    /// The common end of a repeated region, in a few dozen instructions instead of the general
    /// [`Arena::reset`]: nothing escaped (no block of this arena is live, none was routed
    /// elsewhere), nothing overflowed, spilled or was skipped, the arena is open and not
    /// predicting, and the peak neither outgrew the capacity nor is small enough for the resize
    /// policy to consider shrinking (below a quarter of a capacity above the minimum). Then the general path would record the peak, keep the
    /// capacity, start the next region at `data_start` and find the bound respected: this does
    /// the same. False, having changed nothing, otherwise. The uncounted range is flushed.
    #[inline]
    fn quiet_reset(&self) -> bool {
        let peak = self.peak_bytes();
        if !self.ends_quietly(peak)
            || self.live_at_reset.get() != 0
            || self.bytes_routed_away.get() != self.routed_at_reset.get()
        {
            return false;
        }
        // What `reset` does in this case, step by step (`resize_policy` returns `capacity`:
        // the peak fits, and either is not below a quarter of it or the capacity is at the
        // minimum a shrink could reach).
        self.record_peak(peak);
        self.resume_at(self.data_start, true, false);
        self.alloc_clock.add(peak as u64);
        // What `predictor_region_end` does for a clean region when not predicting.
        self.note_clean_region();
        self.debug_check();
        true
    }

    /// What both quiet region ends ([`Arena::quiet_reset`], [`Arena::carry_reset`]) need of a
    /// region that needed `peak` bytes: the resize policy keeps the capacity (the peak fits,
    /// and either is not below a quarter of it or the capacity is at the minimum a shrink could
    /// reach), nothing spilled, was skipped or overflowed, no counted block is live, and the
    /// arena is open, not predicting and within its bound.
    #[inline(always)]
    fn ends_quietly(&self, peak: usize) -> bool {
        let capacity = self.cap_end.get() - self.data_start;
        !(peak > capacity
            || (peak < capacity / 4 && capacity > self.min_capacity.get())
            || self.spill_bytes.get() != 0
            || self.skipped.get() != 0
            || self.closed.get()
            || self.predicting.get()
            || self.overflowing.load(Ordering::Relaxed)
            || self.live_bytes() != 0
            || self.resident() * GRANULE > footprint::allowance(self.planned_bytes(), 0))
    }

    /// The end of a region that leaves blocks live that it allocated on the fast paths: what a
    /// program that frees its temporaries after the region's end leaves behind (a request's
    /// reply freed once sent, a step's results freed by the caller). Counting them now, and
    /// freeing them as counted blocks after the end, cost that program 2.5x the ideal's time
    /// (`none` cells of `scripts/matrix.sh`). They stay uncounted instead: the next region
    /// starts after them, their owner's frees are tag flips, and the one that frees the last
    /// of them takes the bump pointer back to where they began (see
    /// [`Arena::release_uncounted`]), as if the region had ended with them freed.
    ///
    /// Only for one region at a time (`carried`): blocks still live when the next region ends
    /// (true escapes) are counted then, so that the uncounted range spans at most two regions.
    /// The other conditions are [`Arena::quiet_reset`]'s: the peak fits the capacity and is not
    /// small enough to shrink it, nothing spilled, was skipped or overflowed, no counted block
    /// is live (the range's rewind would leave the memory of those freed meanwhile behind the
    /// bump pointer: 10,000 blocks a region, most of them counted by slow paths, ran at 1.7x
    /// the general end's time), the arena is open, not predicting, in markers mode and within
    /// its bound. False, having changed nothing, otherwise.
    #[inline]
    fn carry_reset(&self) -> bool {
        if self.recycle || self.carried.get() {
            return false;
        }
        let peak = self.peak_bytes();
        if !self.ends_quietly(peak) {
            return false;
        }
        self.record_peak(peak);
        // The next region starts at the bump pointer, past the blocks left live. The highest
        // top is forgotten, so what lies under it joins what may have been written (as in
        // `resume_at`).
        self.zero_from
            .set(self.zero_from.get().max(self.peak_top.get()));
        self.origin.set(self.top.get());
        self.peak_top.set(self.top.get());
        self.checkpoint_depth.set(0);
        self.carried.set(true);
        self.alloc_clock.add(peak as u64);
        // The predictor learns nothing from this end: the blocks left live are not in
        // `live_bytes`, so a region that keeps its last results until the next one replaces
        // them (a Python loop's variables) would read as clean here and as escaping at the next
        // end, and make the arena predict and route their sites away. The next general end
        // compares its live bytes with those of the last general one.
        self.debug_check();
        true
    }

    /// The end of a region that predicts and used nothing of the arena (every allocation went
    /// to the next allocator, as the predictor said): a region that keeps one block each time
    /// (a cache fed per request). Nothing to resize or move: the peak is zero, the capacity is
    /// at its minimum (so the resize policy keeps it), nothing overflowed, spilled or was
    /// skipped, and the arena is open and within its bound; only the predictor learns. What
    /// [`Arena::reset_general`] would do then, in a fraction of its instructions (`escape`
    /// pattern of `scripts/callgrind.sh`). False, having changed nothing, otherwise.
    #[inline]
    fn quiet_predicting_reset(&self) -> bool {
        if !self.predicting.get()
            || self.peak_bytes() != 0
            || self.cap_end.get() - self.data_start > self.min_capacity.get()
            || self.spill_bytes.get() != 0
            || self.skipped.get() != 0
            || self.closed.get()
            || self.overflowing.load(Ordering::Relaxed)
            || self.resident() * GRANULE > self.allowance(0)
        {
            return false;
        }
        self.record_peak(0);
        // The bump pointer did not move up: the next region starts where it is (a LIFO free of
        // an older block may have taken it below the origin). The highest top is forgotten, so
        // what lies under it joins what may have been written, as in `resume_at`: a region that
        // lapped wrote blocks in a new run below the old one's peak, and that peak alone says
        // so (without this, a `calloc` of the next region would read their bytes).
        self.zero_from
            .set(self.zero_from.get().max(self.peak_top.get()));
        self.origin.set(self.top.get());
        self.peak_top.set(self.top.get());
        self.checkpoint_depth.set(0);
        self.predictor_region_end();
        self.debug_check();
        true
    }

    /// The outermost region needed `peak` bytes: the high-water figure and the resize policy's
    /// history.
    #[inline]
    fn record_peak(&self, peak: usize) {
        self.high_water.set(peak as u64);
        let slot = self.peaks_seen.get() % PEAK_HISTORY;
        self.peaks[slot].set(peak);
        self.peaks_seen.set(self.peaks_seen.get() + 1);
    }

    /// Where the next region may start: `data_start` when no block up to `top` is live,
    /// `top` when top's own granule is pinned, else the granule after the highest pinned one.
    fn resume_point(&self) -> usize {
        self.flush_uncounted();
        let top = self.top.get();
        if top == self.data_start || self.live_bytes() == 0 {
            return self.data_start; // nothing live anywhere: no need to look
        }
        let top_granule = self.granule(top - 1);
        let mut g = top_granule;
        loop {
            if self.live(g) != 0 {
                // The highest granule a live block uses (a block that crosses out of `g` ends
                // in a counted granule below top's, so `past_pin` is the next granule).
                return if g == top_granule {
                    top
                } else {
                    self.past_pin(self.slot_base + (g << GRANULE_SHIFT))
                };
            }
            if g == self.granule(self.data_start) {
                return self.data_start;
            }
            g -= 1;
        }
    }

    /// The largest of the last `PEAK_HISTORY` peaks, once there are that many (the resize
    /// policy looks at it only then; 0 before). A fixed-size loop: no branch per entry.
    fn recent_peak_max(&self) -> usize {
        if self.peaks_seen.get() < PEAK_HISTORY {
            return 0;
        }
        self.peaks.iter().fold(0, |m, p| m.max(p.get()))
    }
}
