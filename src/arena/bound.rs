//! The memory bound (see `footprint.rs`): resident memory checked where it grows, the arena
//! closed when it reaches its allowance, and the delayed purge that gives back what is over it.

use super::Arena;
use crate::footprint;
use crate::layout::{align_up, GRANULE, GRANULE_SHIFT};
use crate::os;

/// Allocations through the predictor between two [`Arena::periodic_look`]s, at most.
pub(super) const LOOK_EVERY: u32 = 4096;

/// How far apart in time the periodic looks should be, at most, where allocation is too slow
/// for [`LOOK_EVERY`] allocations to come that often: the allocations between two looks are
/// scaled to the rate of the last interval (a thread that allocates a few thousand times a
/// second between sleeps still gives back a freed phase within the purge delay and this).
const LOOK_INTERVAL_MS: u64 = 50;

/// Allocations between two looks, at least; and while a give-back waits (or a large part of
/// the run was just released), at most: each look then reads the clock.
const LOOK_SOON: u32 = 16;

/// Bytes the bump pointer must go back in one release, in process mode, for the next look to
/// come within [`LOOK_SOON`] allocations: the end of a phase whose memory may now be over the
/// bound while the thread goes on with small blocks only (the small-block heap's, which the
/// arena sees only through its predictor's count).
pub(super) const LOOK_SOON_BYTES: usize = 64 * GRANULE;

/// Granules owner frees empty between two looks at the bound, at least.
pub(super) const EMPTIED_MIN: usize = 64;

impl Arena {
    /// Capacity the bound does not count against live memory: what the resize policy planned
    /// (markers mode), or the initial capacity (process mode, where there is no plan).
    pub(super) fn planned_bytes(&self) -> usize {
        if self.recycle {
            self.min_capacity.get()
        } else {
            self.cap_end.get() - self.data_start
        }
    }

    /// Resident bytes allowed with `extra` more live bytes (see footprint.rs).
    pub(super) fn allowance(&self, extra: usize) -> usize {
        let live = (self.live_bytes() as usize).saturating_add(extra);
        let allowance = footprint::allowance(self.planned_bytes(), live);
        match self.largest_large.get() {
            0 => allowance, // markers mode, and process mode before its first large block
            largest => allowance.saturating_add(footprint::holes_allowance(largest, live)),
        }
    }

    pub(super) fn resident(&self) -> usize {
        self.resident_granules.get() as usize
    }

    /// The run is about to enter granule `g`, which holds no live block. Counts it resident if
    /// it was not, when the bound allows: `Some(true)` when it was resident already (it may
    /// hold old contents), `Some(false)` when it is newly resident (it reads as zero), `None`
    /// when the bound does not allow it.
    #[inline]
    pub(super) fn enter_granule(&self, g: usize) -> Option<bool> {
        // SAFETY: granule of this slot; owner thread only.
        let touched = unsafe { &mut *self.touched.add(g) };
        if *touched != 0 {
            return Some(true);
        }
        if self.closed.get()
            || !footprint::may_enter(self.resident(), self.allowance(self.pending_bytes.get()))
        {
            return None;
        }
        *touched = 1;
        self.resident_granules.add(1);
        Some(false)
    }

    /// Whether the region that just ended touched most of the memory it used (a `mincore`
    /// sample of its committed part): what earns its capacity transparent huge pages.
    pub(super) fn region_was_dense(&self) -> bool {
        let start = align_up(self.data_start, os::PAGE);
        let end = self.committed_end.get().min(self.used_end.get()) & !(os::PAGE - 1);
        // SAFETY: page aligned, inside our slot of the reservation.
        end > start
            && unsafe { os::resident_sixteenths(start, end - start) }.is_some_and(|r| r >= 8)
    }

    /// The run is about to enter the granules of `[from, to)`, all past `used_end`: no block
    /// ever started in them, so their counts and crossing entries are zero and only `touched`
    /// needs a look. Counts them resident at once when the bound allows all of them, and
    /// returns the end of the last one that was resident already (0 for none: the rest read as
    /// zero). `None` (nothing changed) when the bound or a closed arena refuses: the caller then
    /// enters them one by one, as far as the bound allows.
    pub(super) fn enter_fresh(&self, from: usize, to: usize) -> Option<usize> {
        if to <= from || self.closed.get() {
            return None;
        }
        let (first, n) = (self.granule(from), (to - from) >> GRANULE_SHIFT);
        // SAFETY: `[first, first + n)` are granules of this slot (`to <= committed_end`); the
        // touched table is owner-only and we are the owner.
        let touched = unsafe { core::slice::from_raw_parts_mut(self.touched.add(first), n) };
        let resident_already = touched.iter().filter(|&&t| t != 0).count();
        let newly = n - resident_already;
        if !footprint::may_enter_many(
            self.resident(),
            newly,
            self.allowance(self.pending_bytes.get()),
        ) {
            return None;
        }
        let last_resident = touched.iter().rposition(|&t| t != 0);
        touched.fill(1);
        self.resident_granules.add(newly as u64);
        Some(last_resident.map_or(0, |i| from + ((i + 1) << GRANULE_SHIFT)))
    }

    /// The bound stopped the run: gives back every free granule, and closes the arena when that
    /// leaves too little headroom. True when the arena may grow again.
    #[cold]
    #[inline(never)]
    pub(super) fn make_room(&self) -> bool {
        if self.closed.get() {
            return false;
        }
        // A purge costs a scan, and page faults when the memory it gives back is used again:
        // at most one per `PURGE_SPACING` allowances of allocation, closing in between.
        if self.purge_due() {
            self.purge();
            if footprint::stays_open(self.resident(), self.allowance(self.pending_bytes.get())) {
                return true;
            }
        }
        self.closed.set(true);
        self.turned_away.set(0);
        self.closures.add(1);
        false
    }

    /// True (and the purge clock restarted) when a purge to make room is not too soon after the
    /// last one: a purge costs a scan, and page faults when the memory it gives back is used
    /// again, so there is at most one per `PURGE_SPACING` allowances of allocation.
    fn purge_due(&self) -> bool {
        let clock = self.alloc_clock.get();
        let spacing = (self.allowance(0) as u64).saturating_mul(footprint::PURGE_SPACING);
        if self.purged_once.get() && clock.saturating_sub(self.last_purge_clock.get()) < spacing {
            return false;
        }
        self.purged_once.set(true);
        self.last_purge_clock.set(clock);
        true
    }

    /// Ends the current run and gives back every free granule of the arena. Process mode goes
    /// back to the start of the arena as well, so that the memory it then keeps resident packs
    /// at the low end, where its laps begin.
    fn purge(&self) {
        self.purge_at_ms.set(0);
        self.dry.set(false);
        self.note_peak();
        // The run's tail stays empty: the new run below starts empty (in it, or elsewhere).
        let empty = self.run_tail();
        if self.recycle {
            self.wrap();
        } else {
            self.start_run(align_up(self.top.get(), GRANULE));
        }
        self.give_back_around(self.data_start, 0, 0, empty);
        self.live_after_purge.set(self.live_bytes());
        self.resident_after_purge.set(self.resident());
        self.reset_emptied_left();
    }

    /// The frees' budget to the next look at the bound: a quarter of what is resident now
    /// (counted before a purge, a purge of 200 MiB left the next 8 MiB of frees short of the
    /// next look).
    fn reset_emptied_left(&self) {
        self.emptied_left
            .set((self.resident() / 4).max(EMPTIED_MIN));
    }

    /// Whether a purge may find something the last one did not: the program freed memory since,
    /// or the arena entered more granules. A bound that long-lived blocks pinned over its limit
    /// otherwise purged at every look (each a walk over every granule): one region that kept
    /// every other block of a million and then allocated on spent 65 % of its time there.
    fn purge_may_find_more(&self) -> bool {
        self.live_bytes() < self.live_after_purge.get()
            || self.resident() > self.resident_after_purge.get()
    }

    /// A request the bound kept out of the arena: the next allocator serves it.
    #[cold]
    pub(super) fn turn_away(&self, size: usize) -> *mut u8 {
        if self.closed.get() && !self.dry.get() {
            self.dry.set(true);
            self.dry_remote.set(self.remote_bytes());
        }
        self.bytes_turned_away.add(size as u64);
        self.note_sent_to_next(size);
        let n = self.turned_away.get() + 1;
        self.turned_away.set(n);
        if n >= footprint::RECHECK_EVERY {
            self.look_at_bound(true);
        }
        self.spill(size)
    }

    /// Owner frees emptied `n` granules (not by LIFO, but in process mode, where the bump
    /// pointer going back over a large block is no region end that resizes): after a quarter of
    /// the resident granules (at least 64), frees may have left more resident memory than the
    /// bound allows (a phase ended).
    #[inline(always)]
    pub(super) fn granules_emptied(&self, n: usize, at: usize) {
        self.dry.set(false);
        if at < self.lap_hint.get() {
            self.lap_hint.set(0); // a granule below the hint may be free now
        }
        let left = self.emptied_left.get();
        if left > n {
            self.emptied_left.set(left - n);
        } else {
            self.look_at_bound(false);
        }
    }

    /// The same for frees by other threads, looked at from the owner's slow path.
    #[inline]
    pub(super) fn look_at_remote_frees(&self) {
        let freed = self.remote_bytes() - self.remote_seen.get();
        if freed != 0 && freed as usize >= (self.resident() * GRANULE / 4).max(1 << 20) {
            self.look_at_bound(false);
        }
    }

    /// Gives back free granules when the arena holds more than its bound allows, and reopens a
    /// closed arena once it is well within it. In process mode the give-back waits
    /// (`defer_purge`), unless `at_once` (a closed arena's look, a region end).
    #[cold]
    #[inline(never)]
    pub(super) fn look_at_bound(&self, at_once: bool) {
        self.flush_uncounted();
        self.dry.set(false);
        self.turned_away.set(0);
        self.remote_seen.set(self.remote_bytes());
        if self.resident() * GRANULE > self.allowance(0) && self.purge_may_find_more() {
            if at_once || !self.recycle || self.closed.get() {
                self.purge();
            } else {
                self.defer_purge();
            }
        } else if self.closed.get() && self.purge_due() {
            // Free granules count against a closed arena until they are given back.
            self.purge();
        }
        if self.closed.get() && footprint::may_reopen(self.resident(), self.allowance(0)) {
            self.closed.set(false);
        }
        self.reset_emptied_left();
    }

    /// Process mode: frees left more resident memory than the bound allows. The free granules
    /// go back once they have stayed free `RESIZEALLOC_PURGE_DELAY_MS` (checked by
    /// [`Arena::periodic_look`]), not at once: work that frees a large buffer and allocates it
    /// again a few milliseconds later (a 24 MiB block per request between small temporaries)
    /// then reuses its pages instead of faulting all of them in each time (4x glibc's time).
    /// Growth never waits for it: the bound still stops the bump pointer before a granule that
    /// is not resident, and gives back what is free there and then (`make_room`), so the peak
    /// is what it was; what waits is only memory the program may want again. Large blocks wait
    /// too: given back when freed (as glibc unmaps a block of 32 MiB or more), a 64 MiB buffer
    /// `calloc`ed and filled in a loop ran at glibc's 18 calls/s instead of 121, and a 256 MiB
    /// `calloc` with two bytes written at 3,000 calls/s instead of 45,000 (glibc 49,000).
    #[cold]
    pub(super) fn defer_purge(&self) {
        if self.purge_at_ms.get() != 0 {
            return; // the earliest time stands
        }
        let delay = crate::options::purge_delay_ms() as u64;
        let now = os::monotonic_ms();
        if delay == 0 || now == 0 {
            // No delay asked for, or no clock to wait on: at once.
            self.purge();
        } else {
            self.purge_at_ms.set(now.saturating_add(delay));
            // The periodic look runs it: soon, and then every few allocations until its time
            // (the allocations that follow may be few and small).
            self.look_soon();
        }
    }

    /// Every [`LOOK_EVERY`] allocations through the predictor (small ones included): in process
    /// mode, runs the give-back that [`Arena::defer_purge`] made wait once its time has come, or
    /// forgets it once the memory is in use again; and looks at the bound itself, for memory
    /// that no free reported (blocks that went back to the bump pointer before they were ever
    /// counted). Without it, a 200 MiB block freed at the top of the run would stay resident
    /// while the thread goes on with small blocks (glibc unmaps it). Also gives back what arenas of
    /// exited threads kept for the delay, once it is over (`on_look`, from the router: the slot
    /// table is the reservation's, a layer above the arena).
    #[cold]
    #[inline(never)]
    pub(super) fn periodic_look(&self, on_look: impl FnOnce()) {
        let now = os::monotonic_ms();
        self.look_countdown.set(self.next_look_in(now));
        self.last_look_ms.set(now);
        // Arenas of exited threads wait for the same delay (see `prepare_orphan`).
        on_look();
        if !self.recycle {
            return;
        }
        self.flush_uncounted();
        if self.resident() * GRANULE <= self.allowance(0) || !self.purge_may_find_more() {
            self.purge_at_ms.set(0);
            return;
        }
        let at = self.purge_at_ms.get();
        if at == 0 {
            self.defer_purge();
        } else if now >= at {
            self.purge(); // which ends the wait
        }
        if self.purge_at_ms.get() != 0 {
            // A give-back waits for its time: look again soon, to see it come.
            self.look_countdown.set(LOOK_SOON);
        }
    }

    /// Allocations to the next periodic look, from the rate since the last one (`now`): as
    /// many as came in [`LOOK_INTERVAL_MS`], between [`LOOK_SOON`] and [`LOOK_EVERY`].
    fn next_look_in(&self, now: u64) -> u32 {
        let last = self.last_look_ms.get();
        let elapsed = now.saturating_sub(last);
        if last == 0 || now == 0 || elapsed <= LOOK_INTERVAL_MS {
            return LOOK_EVERY;
        }
        let per_interval = LOOK_EVERY as u64 * LOOK_INTERVAL_MS / elapsed;
        per_interval.clamp(LOOK_SOON as u64, LOOK_EVERY as u64) as u32
    }

    /// Process mode: the bump pointer just went back `released` bytes in one step. A large
    /// step may leave the arena over its bound with nothing else to tell it (the thread may go
    /// on with small blocks only): the next look comes within [`LOOK_SOON`] allocations.
    #[inline(always)]
    pub(super) fn note_release(&self, released: usize) {
        if self.recycle && released >= LOOK_SOON_BYTES {
            self.look_soon();
        }
    }

    #[cold]
    #[inline(never)]
    fn look_soon(&self) {
        if self.look_countdown.get() > LOOK_SOON {
            self.look_countdown.set(LOOK_SOON);
        }
    }
}
