//! Laps (process mode): with no region end to rewind it, the bump pointer wraps around to the
//! start of the arena and reuses the granules freed meanwhile, growing only when a lap finds
//! too little room.

use super::Arena;
use crate::layout::GRANULE;

/// How far a region's run may reach, with most of what it handed out dead, before it laps
/// instead of growing (see `Arena::run_mostly_dead`): about what a core's L2 holds. The
/// `check-invariants` build (the test script's) laps after 64 KiB, so that the tests take such
/// laps all the time.
pub const LAP_EARLY_SPAN: usize = if cfg!(feature = "check-invariants") {
    64 << 10
} else {
    1 << 20
};

/// Such a lap needs at most one live byte (or block, before the range is counted) in this many.
const LAP_EARLY_LIVE: u64 = 8;

impl Arena {
    /// Process mode: go back to the start of the arena and reuse freed granules.
    pub(super) fn wrap(&self) {
        let at = self.lap_start();
        self.start_run(at);
        self.origin.set(at);
        self.peak_top.set(at);
        self.lap_progress.set(0);
    }

    /// Starts a lap: a new run where free memory may be found behind the bump pointer. In
    /// process mode the arena wraps; in a region the run moves, and the region keeps its
    /// origin and peak (the checkpoints of nested regions see a new run and stop vouching).
    fn lap(&self) {
        if self.recycle {
            self.wrap();
        } else {
            self.start_run(self.lap_start());
            self.lap_progress.set(0);
        }
    }

    /// [`Arena::lap`] once per slow path (`wrapped` says whether it lapped already), when a lap
    /// is worth it. True when it lapped.
    pub(super) fn lap_once(&self, wrapped: &mut bool) -> bool {
        self.lap_once_if(wrapped, false)
    }

    /// [`Arena::lap_once`], also when a lap is not worth it but `anyway`.
    pub(super) fn lap_once_if(&self, wrapped: &mut bool, anyway: bool) -> bool {
        if *wrapped || !(anyway || self.lap_is_worth_it()) {
            return false;
        }
        self.lap();
        *wrapped = true;
        true
    }

    /// A region whose blocks die in no order inside it (a window of temporaries churned through
    /// a long region) leaves dead memory behind the bump pointer that only a lap reuses, and
    /// its run would otherwise grow on through the whole capacity before one: a capacity that
    /// an earlier peak or one large block made large then puts every new block on a cache line
    /// the program has not touched for megabytes. The slow path, once it has counted the
    /// range, laps instead of growing the run when this says so: in a region, the run covers
    /// [`LAP_EARLY_SPAN`] or more and the arena's live bytes are at most one in
    /// [`LAP_EARLY_LIVE`] of it. (Live bytes anywhere in the arena count: where the program
    /// keeps much elsewhere, the run grows as it did.)
    pub(super) fn run_mostly_dead(&self) -> bool {
        let covered = self.top.get() - self.run_start.get();
        !self.recycle
            && covered >= LAP_EARLY_SPAN
            && self.live_bytes().saturating_mul(LAP_EARLY_LIVE) <= covered as u64
    }

    /// Before the slow path grows the run without counting the range: whether the range
    /// looks churned, so that the counting path, which may lap ([`Arena::run_mostly_dead`]),
    /// decides instead. In a region, the range spans [`LAP_EARLY_SPAN`] and at most one in
    /// [`LAP_EARLY_LIVE`] of the blocks handed out into it is live (counts, not bytes: a range
    /// of a few large live blocks is counted for nothing once per such span).
    pub(super) fn churned_behind(&self) -> bool {
        let span = self.top.get() - self.uncounted.get();
        let handed = self
            .region_allocs
            .get()
            .wrapping_sub(self.allocs_at_count.get());
        !self.recycle
            && span >= LAP_EARLY_SPAN
            && (self.live_uncounted.get() as u64).saturating_mul(LAP_EARLY_LIVE) <= handed
    }

    /// The slow path met `lap_check` (the fast paths' one stop in a long kept run): the stop is
    /// lifted, and true when the block may now come from the fast path, the range not looking
    /// churned ([`Arena::churned_behind`]); false leaves the decision to the rest of the slow
    /// path, which counts the range and may lap.
    pub(super) fn look_at_churn(&self) -> bool {
        if self.lap_check.get() == usize::MAX {
            return false;
        }
        self.lap_check.set(usize::MAX);
        self.update_limit();
        !self.churned_behind()
    }

    /// Where a lap starts: `data_start`, or the lap hint while it holds.
    pub(super) fn lap_start(&self) -> usize {
        let hint = self.lap_hint.get();
        if hint > self.data_start
            && hint < self.committed_end.get()
            && self.remote_at_hint.get() == self.remote_bytes()
        {
            hint
        } else {
            self.data_start
        }
    }

    /// Process mode: a lap pays off when the last one found a useful share of free memory;
    /// otherwise growing is cheaper than scanning a full arena for crumbs.
    fn lap_is_worth_it(&self) -> bool {
        let committed = self.committed_end.get() - self.data_start;
        let span = committed.min(self.resident() * GRANULE);
        self.lap_progress.get() + (self.run_end.get() - self.run_start.get()) >= span / 4
    }
}
