//! Laps (process mode): with no region end to rewind it, the bump pointer wraps around to the
//! start of the arena and reuses the granules freed meanwhile, growing only when a lap finds
//! too little room.

use super::Arena;
use crate::layout::GRANULE;

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
