//! The uncounted range `[uncounted, top)`: blocks the fast path handed out without counting them
//! on their granules. The range is walked header to header and counted in one go when something
//! needs exact counts (a slow path, a region end, a free out of order).

use core::sync::atomic::{AtomicUsize, Ordering};

use super::header::{
    line_gap_end, word_size, word_tag, TAG_FREED, TAG_FREED_REMOTE, TAG_GAP, TAG_LIVE, TAG_SAMPLED,
};
use super::Arena;
use crate::layout::{align_up, GRANULE, HEADER, MIN_ALIGN};

impl Arena {
    /// True when `hdr` is the header of the run's last block (`below_top`) and it is not counted
    /// yet: the block the LIFO free releases. Being `below_top` says it is ours, of the current
    /// run, with only padding up to `top`, and neither sampled nor freed by its owner (see
    /// `below_top`), so neither its size, nor the range, nor its tag is needed: the one state
    /// left to tell, freed by another thread (a double free now), shows in its link, which
    /// [`Arena::release_top`] reads anyway (`POISON_LINK`). (`no_link`, the address of
    /// `limit`, lies below `data_start`, so below `uncounted`: it never passes.)
    ///
    /// A tag test here costs 5 % of the Bumper loop's time and 7 % of the LIFO workload's
    /// (`scripts/bench.sh`): a branch on a load from the header just written, where a branch
    /// on a word of the arena's line costs nothing measurable.
    #[inline(always)]
    pub(super) fn is_last_uncounted(&self, hdr: usize) -> bool {
        if hdr != self.below_top.get() {
            return false;
        }
        // Nothing, for the compiler only: without it, it computes both compares with `set`
        // instructions and tests their `or` (five instructions more on every free).
        // SAFETY: an empty assembly block.
        unsafe { core::arch::asm!("", options(nomem, nostack, preserves_flags)) };
        hdr >= self.uncounted.get()
    }

    /// [`Arena::is_last_uncounted`], and the block is live: what `realloc` resizes in place. A
    /// resize does not read the link, so it tests the tag (a `realloc` of a block another
    /// thread freed goes to the general path, which tells).
    #[inline(always)]
    pub(super) fn is_last_live_uncounted(&self, hdr: usize) -> bool {
        self.is_last_uncounted(hdr)
            // SAFETY: read once `hdr == below_top`, whose invariant says it is a block header in
            // our committed run. The tag is the header word's low 16 bits (little endian).
            && unsafe { *(hdr as *const u16) } == TAG_LIVE as u16
    }

    /// Counts the uncounted range (see `uncounted`). Every owner operation but the fast paths
    /// calls it before it looks at or changes the counts or the run.
    #[inline(always)]
    pub(super) fn flush_uncounted(&self) {
        if self.uncounted.get() != self.top.get() {
            self.flush_range();
        }
    }

    /// [`Arena::flush_uncounted`] of a range that is not empty: out of line, so that callers
    /// whose range is usually empty (region begins and ends) need no stack frame for it.
    #[inline(never)]
    fn flush_range(&self) {
        let (unc, top) = (self.uncounted.get(), self.top.get());
        // Closed first: what the walk may trigger (a look at the bound) flushes again.
        self.uncounted.set(top);
        self.live_uncounted.set(0);
        self.allocs_at_count.set(self.region_allocs.get());
        self.carried.set(false);
        let freed = self.uncounted_freed.get() + self.count_range(unc, top);
        if freed >= GRANULE {
            // The owner's frees in the range never touched the counts: they empty granules
            // now, as counted frees would have (see `granules_emptied`), a granule's worth at a
            // time (ranges are often shorter than a granule).
            self.uncounted_freed.set(freed % GRANULE);
            self.granules_emptied(freed / GRANULE, unc);
        } else {
            self.uncounted_freed.set(freed);
        }
    }

    /// True when `addr` lies in the uncounted range `[uncounted, top)`: two compares with the
    /// arena's words in memory (four instructions in the inlined free), where one compare of
    /// offsets (`addr - uncounted < top - uncounted`) took seven.
    #[inline(always)]
    pub(super) fn in_uncounted(&self, addr: usize) -> bool {
        if addr < self.uncounted.get() {
            return false;
        }
        addr < self.top.get()
    }

    /// Walks `[from, to)`, a part of the uncounted range starting at a header (or `to`), header
    /// to header, stepping over gap headers: calls `f(header, end, tag)` for every block, `end`
    /// being the end of its bytes. Returns where the walk stopped: `to`, unless a gap header
    /// ends where it stands (a range that is not well formed; the checks report it).
    #[inline(always)]
    pub(super) fn walk_uncounted(
        &self,
        from: usize,
        to: usize,
        mut f: impl FnMut(usize, usize, usize),
    ) -> usize {
        let mut a = from;
        while a < to {
            // SAFETY: a header in the uncounted range, in committed memory. Atomic: another
            // thread may be freeing that block (it writes the tag atomically, with Release).
            let word = unsafe { (*(a as *const AtomicUsize)).load(Ordering::Acquire) };
            if word_tag(word) == TAG_GAP {
                let end = match word_size(word) {
                    0 => line_gap_end(a),
                    size => a + size,
                };
                if end <= a {
                    break;
                }
                a = end;
                continue;
            }
            let end = a + HEADER + word_size(word);
            f(a, end, word_tag(word));
            a = align_up(end, MIN_ALIGN);
        }
        a
    }

    /// Walks `[from, to)`, the uncounted range, and puts the units of every block in it on the
    /// granules, but those of blocks their owner freed (which were never counted). Returns the
    /// bytes of those.
    #[cold]
    #[inline(never)]
    fn count_range(&self, from: usize, to: usize) -> usize {
        let mut freed = 0;
        let stop = self.walk_uncounted(from, to, |hdr, end, tag| {
            let bytes = align_up(end, MIN_ALIGN) - hdr;
            if tag != TAG_FREED {
                // Live, sampled, or freed by another thread (whose units and bytes cancel these).
                // SAFETY: the block's units were never put on its granules.
                unsafe { self.count_units(hdr, end) };
                self.live_local_bytes.add(bytes as u64);
            } else {
                freed += bytes;
            }
        });
        debug_assert_eq!(stop, to, "the uncounted range does not end at top");
        freed
    }

    /// Calls `f(header, end, live)` for every block of the uncounted range, without counting
    /// anything (tests and invariant checks, which must not change the arena); `live` is false
    /// for blocks freed since by another thread; blocks their owner freed are left out. None
    /// when the range is not well formed.
    pub(super) fn for_each_uncounted(&self, mut f: impl FnMut(usize, usize, bool)) -> Option<()> {
        let mut well_formed = true;
        let top = self.top.get();
        let stop = self.walk_uncounted(self.uncounted.get(), top, |hdr, end, tag| match tag {
            TAG_LIVE | TAG_SAMPLED => f(hdr, end, true),
            TAG_FREED_REMOTE => f(hdr, end, false),
            TAG_FREED => {}
            _ => well_formed = false,
        });
        (well_formed && stop == top).then_some(())
    }
}
