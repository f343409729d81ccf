//! Give-back and trim: granules with nothing live go back to the kernel (`madvise`), all of
//! them or all but those the next region will use.

use super::Arena;
use crate::layout::{align_up, GRANULE, GRANULE_SHIFT};
use crate::os;

impl Arena {
    /// Walks the granules of `[data_start, end)` and calls `f(g, units, covered)` for each:
    /// `units` is `units(g)`, and `covered` is true when `g` lies past the first granule of a
    /// block that spans granules (one `crossing(first)` names), up to its last. Granules inside
    /// such a block count zero: the walk starts at the beginning, so that it sees the first
    /// granule of every block that covers one, and remembers how far the blocks it saw reach.
    pub(super) fn walk_granules(
        &self,
        end: usize,
        units: impl Fn(usize) -> u64,
        crossing: impl Fn(usize) -> Option<usize>,
        mut f: impl FnMut(usize, u64, bool),
    ) {
        let mut covered_to = 0; // (granule 0 holds the metadata: no block covers it)
        for g in self.granule(self.data_start)..self.granule(end) {
            let n = units(g);
            f(g, n, g <= covered_to);
            if n != 0 {
                if let Some(last) = crossing(g) {
                    covered_to = covered_to.max(last);
                }
            }
        }
    }

    /// The part of the current run past its bump pointer, granule aligned: it holds no block
    /// (a run's blocks lie below its top) and lies inside none (a run never enters a granule
    /// strictly inside a live block).
    pub(super) fn run_tail(&self) -> (usize, usize) {
        let run_end = self.run_end.get();
        (align_up(self.top.get(), GRANULE).min(run_end), run_end)
    }

    /// Gives back to the kernel every resident granule in `[from, committed_end)` that holds no
    /// live block, except those in `[keep_lo, keep_hi)`, and decommits the free tail past the
    /// last granule kept (never below the current run or the capacity).
    pub(super) fn give_back(&self, from: usize, keep_lo: usize, keep_hi: usize) {
        self.give_back_around(from, keep_lo, keep_hi, self.run_tail());
    }

    /// [`Arena::give_back`], told that the granules of `empty` (addresses, granule aligned) hold
    /// no block and lie inside none.
    pub(super) fn give_back_around(
        &self,
        from: usize,
        keep_lo: usize,
        keep_hi: usize,
        empty: (usize, usize),
    ) {
        self.flush_uncounted();
        let committed_end = self.committed_end.get();
        // No block lies in `empty`, and none ever started past `used_end`: their counts are not
        // read (the table pages under a large freed block were never written, and each read of
        // one costs a page fault).
        let (empty_lo, empty_hi) = (
            self.granule(empty.0.max(self.slot_base)),
            self.granule(empty.1.max(self.slot_base)),
        );
        let counted_end = self.granule(align_up(self.used_end.get(), GRANULE));
        let live = |g: usize| {
            if g >= counted_end || (empty_lo..empty_hi).contains(&g) {
                debug_assert_eq!(self.live(g), 0, "a block in a granule known empty");
                0
            } else {
                self.live_when_counted(g)
            }
        };
        let crossing = |g| self.crossing_last(g);
        let mut last_kept_end = from;
        let mut batch_from: Option<usize> = None;
        self.walk_granules(committed_end, live, crossing, |g, units, covered| {
            let addr = self.slot_base + (g << GRANULE_SHIFT);
            if addr < from {
                return;
            }
            let keep = (keep_lo <= addr && addr < keep_hi) || units != 0 || covered;
            // SAFETY: granule of this slot; the touched table is owner-only, and we are the owner
            // (or the exiting owner).
            let resident = unsafe { *self.touched.add(g) } != 0;
            if !keep && resident {
                batch_from.get_or_insert(addr);
            } else if let Some(start) = batch_from.take() {
                self.discard_granules(start, addr);
            }
            if keep {
                last_kept_end = addr + GRANULE;
            }
        });
        if let Some(start) = batch_from {
            self.discard_granules(start, committed_end);
        }
        let tail = last_kept_end
            .max(self.run_end.get())
            .max(self.data_start + self.planned_bytes())
            .max(align_up(self.top.get(), GRANULE));
        // Only granules that are not resident (given back just now, or never entered) may be
        // decommitted: a resident one still holds its pages.
        let mut tail_ok = tail;
        while tail_ok < committed_end
            // SAFETY: granule of this slot; owner thread.
            && unsafe { *self.touched.add(self.granule(tail_ok)) } == 0
        {
            tail_ok += GRANULE;
        }
        if tail < committed_end && tail_ok == committed_end {
            // SAFETY: `[tail, committed_end)` holds no live block, lies past the run, and its
            // granules are not resident.
            if unsafe { os::decommit(tail, committed_end - tail) } {
                self.set_committed_end(tail);
                if self.cap_end.get() > tail {
                    // Process mode, whose capacity follows what is committed.
                    self.set_capacity_end(tail);
                }
            }
        }
    }

    /// Gives the free granules `[start, end)` back to the kernel and counts them as no longer
    /// resident, unless the kernel refused (locked memory): then they stay resident, with their
    /// contents, and are not treated as fresh.
    fn discard_granules(&self, start: usize, end: usize) {
        // SAFETY: the caller found `[start, end)` free granules of our slot.
        if !unsafe { os::discard(start, end - start) } {
            return;
        }
        let mut addr = start;
        while addr < end {
            // SAFETY: granule of this slot; owner thread.
            unsafe { *self.touched.add(self.granule(addr)) = 0 };
            addr += GRANULE;
        }
        let n = ((end - start) / GRANULE) as u64;
        self.resident_granules.sub(n);
        self.given_back_granules.add(n);
    }

    /// Gives back every free granule outside the current run. Called by the user's trim
    /// (`malloc_trim`, `resizealloc::trim`).
    pub fn trim(&self) {
        self.flush_uncounted();
        let keep_lo = self.run_start.get() & !(GRANULE - 1);
        self.give_back(self.data_start, keep_lo, self.run_end.get());
        self.debug_check();
    }
}
