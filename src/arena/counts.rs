//! Granule counts and the crossing table: the units a block puts on the granules it starts and
//! ends in, and `cross`, which finds the block that covers the granules in between.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::header::{header_word, word_size, word_tag, TAG_LIVE, TAG_SAMPLED};
use super::Arena;
use crate::layout::{align_up, GRANULE_SHIFT, HEADER, MIN_ALIGN};

/// The largest slot: crossing entries keep bits 4..36 of a header's address, and a slot aligned
/// to its size of at most 64 GiB has the bits above in its base.
pub const MAX_SLOT: usize = 1 << 36;
const CROSS_SPAN_MASK: usize = MAX_SLOT - 1;

/// The crossing entry of the header at `hdr` (never 0: the slot's first bytes are metadata).
#[inline(always)]
pub(super) fn cross_entry(hdr: usize) -> u32 {
    (hdr >> 4) as u32
}

impl Arena {
    /// Writes the header of the block `[hdr + HEADER, end)` and counts it: a unit on its first
    /// and on its last granule, its header in its first granule's crossing entry. The same
    /// stores whatever the block's size.
    ///
    /// # Safety
    /// `[hdr, end)` is committed, unused memory of this arena's current run, `top` is past it,
    /// and the uncounted range was flushed (the slow path's block is counted at once).
    #[inline(always)]
    pub(super) unsafe fn count_block(&self, hdr: usize, end: usize) {
        // SAFETY: caller's obligation (the header is 16 bytes: its word and the link).
        unsafe {
            (hdr as *mut usize).write(header_word(end - hdr - HEADER, TAG_LIVE));
            (hdr as *mut usize).add(1).write(self.below_top.get());
        }
        self.below_top.set(hdr);
        // SAFETY: caller's obligation.
        unsafe { self.count_units(hdr, end) };
        // The caller flushed the uncounted range before: this block is counted, so it is not in
        // it (nor is any padding before it).
        self.uncounted.set(self.top.get());
        self.region_allocs.add(1);
        self.live_local_bytes
            .add((align_up(end, MIN_ALIGN) - hdr) as u64);
        self.debug_check();
    }

    /// Puts the units of the block `[hdr + HEADER, end)` on its first and last granule and its
    /// header in its first granule's crossing entry.
    ///
    /// # Safety
    /// The block lies in this arena's slot and its units are not on the granules yet.
    #[inline(always)]
    pub(super) unsafe fn count_units(&self, hdr: usize, end: usize) {
        // SAFETY: `addr >> GRANULE_SHIFT` is the absolute granule number of an address in this
        // slot, which `local_by_addr` and `cross_by_addr` map onto the slot's tables; owner
        // thread only.
        unsafe {
            let (local, cross) = (self.local_by_addr, self.cross_by_addr);
            *local.add(hdr >> GRANULE_SHIFT) += 1;
            *local.add((end - 1) >> GRANULE_SHIFT) += 1;
            *cross.add(hdr >> GRANULE_SHIFT) = cross_entry(hdr);
        }
    }

    /// The last granule of the live block that starts in granule `g` and ends past it, if
    /// there is one. Call only when `live(g) != 0` (so the granule is committed and the entry's
    /// header readable). An entry whose block was freed reads as none: the header's tag says
    /// freed. (A stale entry over memory reused since could only make a granule look covered
    /// when it is not: that keeps it from reuse a while, never hands out live memory.)
    pub(super) fn crossing_last(&self, g: usize) -> Option<usize> {
        // SAFETY: granule of this slot; owner thread only.
        let entry = unsafe { *self.cross.add(g) } as usize;
        if entry == 0 {
            return None;
        }
        let hdr = (self.slot_base & !CROSS_SPAN_MASK) | entry << 4;
        // SAFETY: the header lies in granule `g`, which holds a live block, so it is committed.
        // Atomic: another thread may be freeing that block (it writes the tag atomically).
        let word = unsafe { (*(hdr as *const AtomicUsize)).load(Ordering::Acquire) };
        if word_tag(word) | 1 != TAG_SAMPLED {
            return None;
        }
        let end = (hdr + HEADER).saturating_add(word_size(word));
        let last = self.granule(end.min(self.committed_end.get()) - 1);
        (last > g).then_some(last)
    }

    /// Where a run may start past the pinned granule at `at`: the next granule, or, when a block
    /// crosses out of it, past that block's last granule, which may itself be the first granule
    /// of another crossing block (one step per block, not per granule).
    /// The first granule at or past `past_pin(at)` that no live block uses (or the end of
    /// committed memory): a lap over a row of pinned granules skips them in one tight loop,
    /// instead of starting and abandoning a run at each one.
    pub(super) fn past_pins(&self, at: usize) -> usize {
        let end = self.committed_end.get();
        let mut at = self.past_pin(at);
        while at < end && self.live(self.granule(at)) != 0 {
            at = self.past_pin(at);
        }
        at.min(end)
    }

    pub(super) fn past_pin(&self, at: usize) -> usize {
        let mut g = self.granule(at);
        while let Some(last) = self.crossing_last(g) {
            g = last; // counted, so `crossing_last` may look at it
        }
        self.slot_base + ((g + 1) << GRANULE_SHIFT)
    }

    /// Takes the units of the block `[hdr + HEADER, end)` off its first and last granule.
    /// Returns about how many granules it leaves empty: its inner ones and its last one if that
    /// is empty now (exact for a block within one granule; this feeds a trigger, and remote
    /// frees are not looked at). Its crossing entry stays: its header now says freed.
    ///
    /// # Safety
    /// The block is live, counted, and this is the owner thread.
    #[inline(always)]
    pub(super) unsafe fn uncount_block(&self, hdr: usize, end: usize) -> usize {
        let (first, last) = (hdr >> GRANULE_SHIFT, (end - 1) >> GRANULE_SHIFT);
        // SAFETY: absolute granule numbers of addresses in this slot; owner thread only.
        let left = unsafe {
            let local = self.local_by_addr;
            *local.add(first) -= 1;
            let count = &mut *local.add(last);
            *count -= 1;
            *count
        };
        self.live_local_bytes
            .sub((align_up(end, MIN_ALIGN) - hdr) as u64);
        // A granule that reaches into the uncounted range may hold blocks not counted yet: it
        // is not empty for this purpose (its emptiness is reported when the range is walked).
        let last_empty = left == 0 && (last + 1) << GRANULE_SHIFT <= self.uncounted.get();
        (last - first) + last_empty as usize
    }

    /// `live(g)` plus the units the uncounted blocks will put on `g` (observation only: it does
    /// not flush, so that checking the invariants changes nothing).
    pub(super) fn units(&self, g: usize) -> u64 {
        let mut extra = 0u64;
        self.for_each_uncounted(|hdr, end, _| {
            extra += (self.granule(hdr) == g) as u64 + (self.granule(end - 1) == g) as u64;
        });
        self.live(g).wrapping_add(extra)
    }

    /// `crossing_last(g)`, the uncounted blocks' included, for the checks: the crossing block
    /// starting in `g`, if there is one. When a block of the uncounted range starts in `g`
    /// (live or freed), the last such block decides: no block laid out before it can cross out
    /// of `g`. Otherwise the granule's crossing entry may be stale: it names the header of the
    /// last block counted in `g`, and when the bump pointer went back below that header (LIFO
    /// frees, a region end that keeps its run) newer blocks may lie over it. Their contents,
    /// read as a header, can pass for a crossing block of any size (the allocator only ever
    /// errs towards "covered" that way, keeping memory a while, never handing out live memory),
    /// so here an entry counts only when the block it names is consistent with the counts: its
    /// last granule holds a unit and the granules inside it none.
    pub(super) fn crossing_last_or_uncounted(&self, g: usize) -> Option<usize> {
        let mut decided = None;
        self.walk_uncounted(self.uncounted.get(), self.top.get(), |hdr, end, tag| {
            if self.granule(hdr) == g {
                let last = self.granule(end - 1);
                let live = tag | 1 == TAG_SAMPLED;
                decided = Some((live && last > g).then_some(last));
            }
        });
        match decided {
            Some(found) => found,
            None => self.crossing_last(g).filter(|&last| {
                self.units(last) != 0 && (g + 1..last).all(|inner| self.units(inner) == 0)
            }),
        }
    }
}
