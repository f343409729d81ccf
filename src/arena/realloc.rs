//! `realloc` in place: the last block grows or shrinks where it is, by moving `top`.

use core::sync::atomic::Ordering;

use super::counts::{cross_entry, MAX_SLOT};
use super::header::{header_word, word_size, word_tag, TAG_LIVE};
use super::run::Stop;
use super::Arena;
use crate::layout::{align_up, GRANULE_SHIFT, HEADER, MIN_ALIGN};

impl Arena {
    /// The fast path of `realloc` for the last block handed out, when it is still uncounted: it
    /// grows or shrinks where it is, with nothing to recount. False, having changed nothing, for any
    /// other block or when the run has no room; the caller then takes the general path.
    ///
    /// # Safety
    /// Called by the owner thread; `p` is a live block of the allocator (this arena's or not)
    /// and `new_size >= 1`.
    #[inline(always)]
    pub unsafe fn try_resize_last(&self, p: *mut u8, new_size: usize) -> bool {
        let hdr = (p as usize).wrapping_sub(HEADER);
        // Its old size is not needed; padding it grows over becomes part of it.
        if new_size > MAX_SLOT || !self.is_last_live_uncounted(hdr) {
            return false; // too large, or not the last block, live and uncounted
        }
        let top = self.top.get();
        let new_top = align_up(p as usize + new_size, MIN_ALIGN);
        if new_top > self.limit.get() {
            return false;
        }
        if new_top < top {
            self.note_peak();
        }
        self.top.set(new_top);
        // SAFETY: as above; the block is ours and live.
        unsafe { *(hdr as *mut usize) = header_word(new_size, TAG_LIVE) };
        self.debug_check();
        true
    }

    /// The other fast path of `realloc`: true, having changed nothing, when `p` is a live,
    /// unsampled block of this arena whose size already holds `new_size` and is not twice it
    /// or more (the slack a move gave it serves the growth that follows, see
    /// `router::realloc_owned`, which decides the same way for any block). False for anything
    /// else, changing nothing.
    ///
    /// # Safety
    /// Called by the owner thread; `p` is a live block of the allocator (this arena's or not).
    #[inline(always)]
    pub unsafe fn fits_as_it_is(&self, p: *mut u8, new_size: usize) -> bool {
        let p = p as usize;
        if !self.plausible(p) {
            return false;
        }
        // SAFETY: `p` is in our committed data (plausible), so its header is readable.
        let word = unsafe { ((p - HEADER) as *const usize).read() };
        let size = word_size(word);
        word_tag(word) == TAG_LIVE && new_size <= size && new_size >= size / 2
    }

    /// Grows the live block `p` to `new_size` without moving it, when it is the last block of the
    /// current run and the run has room. Returns `false` when the caller must move it.
    ///
    /// # Safety
    /// Called by the owner thread; `p` is a live block of this arena.
    pub unsafe fn try_resize_in_place(&self, p: *mut u8, new_size: usize) -> bool {
        let p = p as usize;
        // SAFETY: caller's obligation.
        let (hdr, old_size) = unsafe { self.header_of(p) };
        if new_size == 0
            || new_size < self.user_min_alloc
            || new_size > self.user_max_alloc.min(self.slot_end - self.data_start)
        {
            return false;
        }
        // An uncounted block resizes without counting the range where it can: the last one
        // within the run as `realloc`'s fast path does. (Counting the range here counted a
        // parsed document's every block at each growth of its output buffer, and made their
        // frees counted ones.)
        if self.in_uncounted(hdr as usize) {
            // SAFETY: a live block of this arena, on the owner thread; `new_size >= 1`.
            if unsafe { self.try_resize_last(p as *mut u8, new_size) } {
                return true;
            }
            // Past the run's end: the run grows over resident free granules without counting,
            // as an allocation's does (`alloc_past_run_end`), and the block grows there. (A
            // run that ended under a growing output buffer counted the whole range, and every
            // free of the request's document was a counted one.)
            let new_top = align_up(p + new_size, MIN_ALIGN);
            if new_size <= MAX_SLOT
                && self.is_last_live_uncounted(hdr as usize)
                && self.extend_over_resident(new_top)
                // SAFETY: as above.
                && unsafe { self.try_resize_last(p as *mut u8, new_size) }
            {
                return true;
            }
        }
        // A block that grows stays only as the last one of the run, which it is not unless it
        // ends at `top` (counting the range moves nothing): any other one moves, and the range
        // stays uncounted. (Buffers grown in turn, each moved to the top and soon below the
        // next one, counted the range at every growth.)
        if new_size > align_up(old_size, MIN_ALIGN)
            && align_up(p + old_size, MIN_ALIGN) != self.top.get()
        {
            return false;
        }
        self.flush_uncounted();
        if new_size <= align_up(old_size, MIN_ALIGN) {
            let (new_last, old_last) = (
                self.granule(p + new_size - 1),
                self.granule(p + old_size - 1),
            );
            if new_last != old_last {
                // Shrinking off whole granules: they stop holding this block, so they can be
                // reused and given back; the last block also hands its tail to the bump pointer.
                let emptied = self.move_last_granule(old_last, new_last);
                self.granules_emptied(emptied, p);
            }
            if align_up(p + old_size, MIN_ALIGN) == self.top.get()
                && hdr as usize >= self.run_start.get()
            {
                self.note_peak();
                self.top.set(align_up(p + new_size, MIN_ALIGN));
                self.uncounted.set(self.top.get()); // flushed above: nothing is uncounted
            }
            self.live_local_bytes
                .add(align_up(new_size, MIN_ALIGN) as u64);
            self.live_local_bytes
                .sub(align_up(old_size, MIN_ALIGN) as u64);
            // SAFETY: validated header; the tag (plain or sampled) stays.
            unsafe { *hdr = header_word(new_size, word_tag(*hdr)) };
            self.debug_check();
            return true;
        }
        let is_last = align_up(p + old_size, MIN_ALIGN) == self.top.get()
            && hdr as usize >= self.run_start.get();
        let end = match p.checked_add(new_size) {
            Some(end) => end,
            None => return false,
        };
        let new_top = align_up(end, MIN_ALIGN);
        if !is_last || new_top > self.slot_end || !self.extend_for_growth(new_top) {
            return false;
        }
        let old_last = self.granule(p + old_size - 1);
        let new_last = self.granule(end - 1);
        if new_last > old_last {
            self.move_last_granule(old_last, new_last);
            // The block is the last one of the run, so the last one starting in its granule,
            // but the entry may name a later block that was freed since (LIFO): name this one.
            let hdr = hdr as usize;
            // SAFETY: granule of this slot; owner thread only.
            unsafe { *self.cross_by_addr.add(hdr >> GRANULE_SHIFT) = cross_entry(hdr) };
        }
        self.live_local_bytes
            .add((align_up(new_size, MIN_ALIGN) - align_up(old_size, MIN_ALIGN)) as u64);
        // SAFETY: validated header; the tag (plain or sampled) stays.
        unsafe { *hdr = header_word(new_size, word_tag(*hdr)) };
        self.top.set(new_top);
        self.uncounted.set(new_top); // flushed above: the grown block is counted
        self.debug_check();
        true
    }

    /// The last block of the run grows to `new_top`: extends the run over free granules (and
    /// commits memory) as an allocation would, so that a buffer grown step by step stays where
    /// it is instead of being copied into fresh memory at every step. False when the run cannot
    /// reach `new_top` (a pinned granule, the end of the slot, the memory bound).
    fn extend_for_growth(&self, new_top: usize) -> bool {
        if new_top > self.run_end.get() {
            self.pending_bytes.set(new_top - self.top.get());
            loop {
                match self.extend_run(new_top) {
                    Ok(()) => break,
                    Err(Stop::Uncommitted) if self.grow_commit(new_top) => {}
                    Err(_) => return false,
                }
            }
        }
        if new_top > self.cap_end.get() {
            self.outgrow_capacity();
        }
        true
    }

    /// The run is about to hand out memory past the capacity (an overflow).
    pub(super) fn outgrow_capacity(&self) {
        if self.recycle {
            // Process mode has no region end to resize at: the capacity follows the committed
            // memory at once.
            self.overflow_allocs.add(1);
            self.set_capacity_end(self.committed_end.get());
        } else if !self.overflowing.load(Ordering::Relaxed) {
            // The region outgrew its capacity: the rest of it is served at full speed and
            // counted at its end (see `overflowing`).
            self.overflow_base.set(self.region_allocs.get());
            self.overflowing.store(true, Ordering::Relaxed);
            self.update_limit();
        }
    }

    /// A live block that ended in granule `old_last` now ends in `new_last`: moves its end unit
    /// (a block that grows also names itself in its crossing entry; one that shrinks keeps it:
    /// the entry is read with the header's new size). Returns how many granules it left empty (shrinking; remote frees are not looked
    /// at: this feeds a trigger).
    fn move_last_granule(&self, old_last: usize, new_last: usize) -> usize {
        // SAFETY: granules of this slot; owner thread only.
        unsafe {
            *self.local.add(old_last) -= 1;
            *self.local.add(new_last) += 1;
            if new_last < old_last {
                // Everything past the new end was this block's alone, but for the old end.
                (old_last - new_last - 1) + (*self.local.add(old_last) == 0) as usize
            } else {
                0
            }
        }
    }
}
