//! The allocation slow path: what a request does when `[top, limit)` has no room for it (a new
//! run, more committed memory, an overflow past the capacity), and the spill to the next
//! allocator when the slot has none.

use core::ptr;
use core::sync::atomic::Ordering;

use super::run::Stop;
use super::Arena;
use crate::footprint;
use crate::layout::{align_up, block_align, GRANULE, HEADER, MIN_ALIGN};

impl Arena {
    /// Everything the fast path does not do: blocks that span granules, extending or starting
    /// runs, overflow, spills, and the size bounds. `align` is at least `MIN_ALIGN`.
    #[cold]
    #[inline(never)]
    pub fn alloc_slow(&self, size: usize, align: usize) -> *mut u8 {
        if !align.is_power_of_two() {
            return ptr::null_mut();
        }
        let requested_align = align;
        let align = block_align(size, align.max(MIN_ALIGN));
        if size < self.user_min_alloc || size > self.user_max_alloc || size == 0 {
            return ptr::null_mut(); // the user's size bounds send it elsewhere: not an overflow
        }
        if align > self.slot_end - self.data_start || size > self.slot_end - self.data_start {
            // No slot can ever hold it: the next allocator's job, and not a size to plan for.
            self.overflow_allocs.add(1);
            self.spilled_allocs.add(1);
            return ptr::null_mut();
        }
        if self.stays_dry(size, align) {
            // Nothing was freed since the closed arena found no free resident granule, and the
            // run cannot hold the block: the loop below would only count the range and lap
            // over the same pinned granules again before turning it away, some 400
            // instructions a request where escapes keep the arena closed.
            return self.turn_away(size);
        }
        // A walk down over freed blocks that paused goes on first; then the block is the fast
        // path's, uncounted like the ones before it, when the run has room.
        if self.finish_paused_walk() {
            // SAFETY: owner thread (ours is the slow path of the owner's allocation); `size >=
            // 1` and `requested_align` a power of two, checked above.
            let p = unsafe { self.try_alloc_fast(size, requested_align) };
            if !p.is_null() {
                return p;
            }
        }
        if self.look_at_churn() {
            // SAFETY: as above.
            let p = unsafe { self.try_alloc_fast(size, requested_align) };
            if !p.is_null() {
                return p;
            }
        }
        // A run that looks churned through dead blocks is counted first, and may lap (below).
        if !self.churned_behind() {
            let p = self.alloc_past_run_end(size, requested_align, align);
            if !p.is_null() {
                return p;
            }
        }
        self.flush_uncounted();
        self.pending_bytes.set(size + HEADER);
        if self.recycle && size >= footprint::LARGE && size > self.largest_large.get() {
            self.largest_large.set(size);
        }
        self.look_at_remote_frees();
        let mut wrapped = false;
        let mut purged = false;
        loop {
            let p = align_up(self.top.get() + HEADER, align);
            let end = p + size;
            let new_top = align_up(end, MIN_ALIGN);
            if new_top > self.slot_end {
                // Not even the rest of the slot can take it.
                if self.recycle && !wrapped && self.run_start.get() != self.data_start {
                    self.wrap();
                    wrapped = true;
                    continue;
                }
                return self.spill(size);
            }
            if end > self.cap_end.get()
                && !self.recycle
                && !self.overflowing.load(Ordering::Relaxed)
                && self.lap_once(&mut wrapped)
            {
                self.note_capacity_lap();
                // A region about to outgrow its capacity laps first: what its dead temporaries
                // left may hold the block, and then the work fits the capacity it planned.
                continue;
            }
            if !self.overflowing.load(Ordering::Relaxed)
                && self.run_mostly_dead()
                && self.lap_once_if(&mut wrapped, true)
            {
                // The memory behind is mostly dead: reused while it is still in the caches.
                continue;
            }
            if new_top <= self.run_end.get() {
                if end > self.cap_end.get() {
                    self.outgrow_capacity();
                }
                self.top.set(new_top);
                self.update_limit();
                // SAFETY: `[p - HEADER, end)` lies in the checked run `[top, run_end)`, and `top` is
                // past it; the uncounted range was flushed at the start.
                unsafe { self.count_block(p - HEADER, p + size) };
                return p as *mut u8;
            }
            if self.dry.get() && self.dry_remote.get() == self.remote_bytes() {
                // Nothing was freed since the last lap found no room: lapping again would
                // only walk the same pinned granules.
                return self.turn_away(size);
            }
            match self.extend_run(new_top) {
                Ok(()) => {}
                Err(Stop::Pinned(at)) => {
                    let next = self.past_pins(at);
                    if at == self.run_start.get() && at == self.lap_start() {
                        // A lap found nothing free from its start to `next`.
                        self.lap_hint.set(next);
                        self.remote_at_hint.set(self.remote_bytes());
                    }
                    self.start_run(next);
                }
                Err(Stop::Uncommitted) => {
                    // Before committing more, a lap looks for free memory behind the bump
                    // pointer, in a region too (which is then past its planned capacity): a
                    // region whose temporaries die out of order reuses their granules instead
                    // of faulting in its whole volume.
                    if !self.lap_once(&mut wrapped) && !self.grow_commit(new_top) {
                        return self.spill(size);
                    }
                }
                Err(Stop::Bound) => {
                    // Growing is not allowed. The arena first looks for free resident memory
                    // with a lap (in a region too: granule counts keep live blocks safe, and
                    // temporaries freed out of order are then reused instead of new memory being
                    // faulted in); then it gives back what is free and tries once more; if that
                    // is not enough it is closed. The lap is taken even when the last one found
                    // little, if the arena holds free memory enough for the request: the purge
                    // would walk every granule too, and then fault that memory in again (a 200
                    // MiB buffer freed below a live block and allocated again did).
                    let room = self.resident() * GRANULE >= self.live_bytes() as usize + size;
                    if !self.lap_once_if(&mut wrapped, room) {
                        if purged || !self.make_room() {
                            return self.turn_away(size);
                        }
                        purged = true;
                    }
                }
            }
        }
    }

    /// The arena is dry (closed, and its last slow path found no free resident granule), nothing
    /// was freed since (an owner free that empties a granule clears `dry`; another thread's
    /// moves `remote_bytes`), no paused walk may give memory back at the bump pointer, and the
    /// block of `size` at alignment `align` does not fit the run: the request is turned away.
    #[inline]
    fn stays_dry(&self, size: usize, align: usize) -> bool {
        if !self.dry.get()
            || self.paused_at.get() != 0
            || self.dry_remote.get() != self.remote_bytes()
        {
            return false;
        }
        let p = align_up(self.top.get() + HEADER, align);
        align_up(p + size, MIN_ALIGN) > self.run_end.get()
    }

    /// The common slow path of a region: the block does not fit the run, and the run can grow
    /// over resident free granules without the counts ([`Arena::extend_over_resident`]); the
    /// block then comes from the fast path, uncounted like the blocks before it. Null, having
    /// changed nothing but the run, when the general path must decide. `size` and the
    /// `requested_align` passed [`Arena::alloc_slow`]'s checks; `align` is its block alignment.
    #[inline]
    fn alloc_past_run_end(&self, size: usize, requested_align: usize, align: usize) -> *mut u8 {
        if self.bounded {
            return ptr::null_mut();
        }
        let p = align_up(self.top.get() + HEADER, align);
        if !self.extend_over_resident(align_up(p + size, MIN_ALIGN)) {
            return ptr::null_mut();
        }
        // SAFETY: owner thread (ours is the slow path of the owner's allocation); `size >= 1`
        // and `requested_align` a power of two, checked by the caller.
        unsafe { self.try_alloc_fast(size, requested_align) }
    }

    /// Records that `size` bytes had to be served by the next allocator.
    #[cold]
    pub(super) fn spill(&self, size: usize) -> *mut u8 {
        self.overflow_allocs.add(1);
        self.spilled_allocs.add(1);
        self.spill_bytes.set(
            self.spill_bytes
                .get()
                .saturating_add(size.saturating_add(HEADER)),
        );
        ptr::null_mut()
    }

    /// Allocations of this region since it first outgrew its capacity (any thread).
    pub(super) fn overflow_in_region(&self) -> u64 {
        if self.overflowing.load(Ordering::Relaxed) {
            self.region_allocs
                .get()
                .saturating_sub(self.overflow_base.get())
        } else {
            0
        }
    }
}
