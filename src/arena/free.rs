//! Frees by the owner thread: the LIFO free at the bump pointer (mirrored by the assembly entry
//! point of `free`, see [`super::asm_layout`]), frees of uncounted and counted blocks, and the
//! checks that abort on a double or invalid free.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::header::{
    bad_header, header_word, poison_link, word_size, word_tag, TAG_FREED, TAG_LIVE, TAG_SAMPLED,
};
use super::Arena;
use crate::layout::{align_up, HEADER, MIN_ALIGN};
use crate::misuse::{self, HeapKind, Misuse};

/// How far below the header it stands on the walk down over freed blocks asks for memory: four
/// cache lines, a few blocks of a request's temporaries ahead. (On the serde_json request of
/// `examples/workloads`, whose drop walks down over half the document, the walk's share of the
/// request's time went from about 4.4 % to 2.7 % at 256; 128 and 512 gained little.)
const PREFETCH_BELOW: usize = 256;

/// How many blocks the walk down over freed blocks goes before it pauses (see
/// `Arena::release_freed_below`) once the program showed that it allocates after such a walk:
/// enough for the few blocks a loop of temporaries leaves freed below the one it frees last,
/// few enough that no single free pays for a whole structure. The `check-invariants` build (the
/// test script's) pauses after two, so that the shadow-model tests pause and take walks on all
/// the time.
pub const WALK_STEPS: usize = if cfg!(feature = "check-invariants") {
    2
} else {
    32
};

/// How many blocks a walk goes before it pauses until an allocation took a paused walk on in
/// the current outermost region (`Arena::walk_steps`): where the blocks were freed in no
/// order and nothing is allocated before the range's last free or the region's end, which take
/// the memory back in one step, the walk is work for nothing. (On `scripts/matrix.sh`'s random
/// cells of 64 blocks, walks of up to 32 blocks were 4 to 9 instructions per allocation.)
pub const WALK_STEPS_SHORT: usize = 2;

/// Asks the cache for the memory [`PREFETCH_BELOW`] bytes below `hdr`: the walk down over freed
/// blocks goes from header to header through the links, one dependent load a step, and the
/// blocks below lie next to each other, so the headers it reads next are there.
#[inline(always)]
fn prefetch_below(hdr: usize) {
    let addr = hdr.wrapping_sub(PREFETCH_BELOW);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing the program sees and never faults, whatever
    // the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    };
    // Elsewhere the walk goes without (stable Rust has no prefetch for other targets).
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Aborts on a misuse found at arena block `p` (see `misuse.rs`).
#[cold]
#[inline(never)]
pub(super) fn bad_free(what: Misuse, p: usize, size: Option<usize>) -> ! {
    misuse::abort(what, HeapKind::Arena, p, size)
}

impl Arena {
    /// Frees a block on the owner thread.
    ///
    /// # Safety
    /// Called by the owner thread; `p` was returned by this arena's `alloc` (a double free is
    /// detected and aborts).
    #[inline(always)]
    pub unsafe fn free_local(&self, p: *mut u8) {
        // SAFETY: forwarded obligations.
        if !unsafe { self.try_free_local_fast(p) } {
            // SAFETY: forwarded obligations.
            unsafe { self.free_local_slow(p) };
        }
    }

    /// The fast path alone: frees a valid, unsampled block and returns true; returns false,
    /// having changed nothing, for anything else, except that a second free of the last block
    /// after another thread freed it aborts (see `POISON_LINK`). Calls nothing but the rare
    /// bound check. `free`'s assembly entry point (x86-64 Linux) makes the LIFO branch itself,
    /// for a block whose link does not say "freed", and calls [`Arena::try_free_local_other`]
    /// for other blocks ([`asm_layout`]).
    ///
    /// # Safety
    /// Called by the owner thread. `p` is null, a live block of this arena, or any address at
    /// or above 4 KiB that this arena does not own.
    #[inline(always)]
    pub unsafe fn try_free_local_fast(&self, p: *mut u8) -> bool {
        // SAFETY: forwarded obligations.
        unsafe { self.try_free_local_recent(p) || self.try_free_counted(p) }
    }

    /// [`Arena::try_free_local_fast`] for the blocks handed out since the counts were last
    /// looked at (the LIFO free and the uncounted range's tag flip) alone: false, having changed
    /// nothing, for every other block, counted ones included, which
    /// [`Arena::try_free_local_counted`] takes. What the front ends inline: the counted path
    /// holds the registers that made every inlined free save and restore three of them.
    ///
    /// # Safety
    /// As [`Arena::try_free_local_fast`].
    #[inline(always)]
    pub unsafe fn try_free_local_recent(&self, p: *mut u8) -> bool {
        let p = p as usize;
        let hdr = p.wrapping_sub(HEADER);
        // The LIFO case first: the block right below the bump pointer, not counted yet.
        if self.is_last_uncounted(hdr) {
            // SAFETY: tested just now.
            unsafe { self.free_last_uncounted(p as *mut u8) };
            return true;
        }
        // SAFETY: forwarded obligations.
        self.in_uncounted(hdr) && unsafe { self.try_free_uncounted(p) }
    }

    /// The LIFO free: `p`'s block is the run's last, not counted yet
    /// ([`Arena::is_last_uncounted`] of its header). Its tag says freed, the peak is noted, and
    /// the bump pointer goes back to it and on down over the blocks below that their owner freed
    /// already. Public for `free`'s assembly entry point, which makes the test itself and does
    /// this itself too unless the link says "freed" ([`asm_layout`]).
    ///
    /// # Safety
    /// Owner thread; `is_last_uncounted(p - HEADER)` holds.
    #[inline(always)]
    pub unsafe fn free_last_uncounted(&self, p: *mut u8) {
        let hdr = p as usize - HEADER;
        debug_assert!(self.is_last_uncounted(hdr));
        debug_assert_eq!(
            self.paused_at.get(),
            0,
            "a LIFO free while a walk is paused"
        );
        // SAFETY: `below_top` names a block header of our run (its invariant); marks it freed
        // for double-free detection. (Had another thread freed it, `release_top` finds its
        // poisoned link and aborts.)
        unsafe { *(hdr as *mut u16) = TAG_FREED as u16 };
        let live = self.live_uncounted.get() - 1;
        self.live_uncounted.set(live);
        self.note_peak();
        if live == 0 {
            // SAFETY: the last live block of the range, just freed by its owner.
            unsafe { self.release_uncounted(hdr) };
        } else {
            // SAFETY: a block of the current run with only padding up to `top`, freed by its
            // owner just now, and `uncounted <= hdr` (the caller's obligation).
            unsafe { self.release_top(hdr) };
        }
        self.debug_check();
    }

    /// The owner just freed the block at `hdr`, the last live one of the uncounted range: every
    /// block of `[uncounted, top)` is free, so the bump pointer goes back to `uncounted` in one
    /// step, where the links would have been walked block by block (FIFO, random order and a
    /// tree's post-order all end this way). When the block is the range's first, that is its
    /// LIFO release (which goes on down over counted blocks freed below it); otherwise
    /// `below_top` names no block (the counted block below the range, if any, is found by its
    /// end at `top`, see `lifo_release`).
    ///
    /// # Safety
    /// Owner thread; `hdr` is a header of the uncounted range whose tag says freed, and
    /// `live_uncounted` is 0.
    #[inline(always)]
    unsafe fn release_uncounted(&self, hdr: usize) {
        if self.carried.get() {
            // SAFETY: forwarded obligations.
            return unsafe { self.release_carried(hdr) };
        }
        // SAFETY: forwarded obligations.
        unsafe { self.release_range(hdr) }
    }

    /// [`Arena::release_uncounted`] without its carried case: the bump pointer goes back to
    /// `uncounted`. Ends in its one call, so that the inlined frees need no stack frame.
    ///
    /// # Safety
    /// As [`Arena::release_uncounted`].
    #[inline(always)]
    unsafe fn release_range(&self, hdr: usize) {
        if self.uncounted.get() == hdr {
            // SAFETY: every block above `hdr` is free, so only free memory lies between its end
            // and `top`; the rest is the caller's obligation.
            unsafe { self.release_top(hdr) };
        } else {
            // SAFETY: forwarded obligations.
            unsafe { self.rewind_uncounted(hdr) };
        }
    }

    /// [`Arena::release_range`] of a block that is not the range's first: the bump pointer goes
    /// back to `uncounted` in one step. Once per range, out of line: the look at the bound it
    /// may ask for is a call.
    ///
    /// # Safety
    /// As [`Arena::release_uncounted`], and `hdr != uncounted`.
    #[inline(never)]
    unsafe fn rewind_uncounted(&self, hdr: usize) {
        let unc = self.uncounted.get();
        // SAFETY: caller's obligation: the block's header is ours to read. Atomic: had another
        // thread freed the block (a double free now), it wrote `POISON_LINK` there.
        let link = unsafe { (*((hdr + 8) as *const AtomicUsize)).load(Ordering::Relaxed) };
        if !self.link_below(hdr, link) {
            self.bad_link(hdr, link);
        }
        self.note_release(self.top.get() - unc);
        self.top.set(unc);
        self.allocs_at_count.set(self.region_allocs.get());
        self.forget_below_top();
    }

    /// [`Arena::release_uncounted`] of a range that began in the region before this one, which
    /// ended with these blocks live (`carry_reset`): the next region end may carry again, and
    /// this region starts where they began (its peak counts from there).
    ///
    /// # Safety
    /// As [`Arena::release_uncounted`].
    #[cold]
    #[inline(never)]
    unsafe fn release_carried(&self, hdr: usize) {
        // SAFETY: forwarded obligations.
        unsafe { self.release_range(hdr) };
        self.carried.set(false);
        if self.top.get() < self.origin.get() {
            self.origin.set(self.top.get());
        }
    }

    /// [`Arena::try_free_local_fast`] after its LIFO test: the paths for a block that is not
    /// the last uncounted one (for that one too they are right, only longer). Public for
    /// `free`'s assembly entry point, which makes the LIFO test itself, and the uncounted
    /// branch's tag flip when `Arena::free_uncounted` would release nothing ([`asm_layout`]).
    ///
    /// # Safety
    /// As [`Arena::try_free_local_fast`].
    #[inline(always)]
    pub unsafe fn try_free_local_other(&self, p: *mut u8) -> bool {
        // Not the last block, or counted: the paths below tell (and find sampled blocks and
        // blocks freed already by their tags).
        if self.in_uncounted((p as usize).wrapping_sub(HEADER)) {
            // SAFETY: forwarded obligations; in the range.
            return unsafe { self.try_free_uncounted(p as usize) };
        }
        // SAFETY: forwarded obligations.
        unsafe { self.try_free_counted(p) }
    }

    /// The uncounted branch: `p`'s header lies in the uncounted range `[uncounted, top)`. A
    /// block handed out since the counts were last looked at was never counted, so freeing it
    /// is a tag flip, and the last one goes back to the bump pointer. False, having changed
    /// nothing, for a sampled block, a double free or no block's start (the slow path tells).
    ///
    /// # Safety
    /// As [`Arena::try_free_local_fast`], and `in_uncounted(p - HEADER)`.
    #[inline(always)]
    unsafe fn try_free_uncounted(&self, p: usize) -> bool {
        let hdr = p.wrapping_sub(HEADER);
        // SAFETY: `hdr` lies in the uncounted range of our committed run: a block's header,
        // or, for a pointer that is no block's start, bytes whose tag then says not live
        // (unaligned: the slow path aborts on such a pointer before any aligned access).
        let word = unsafe { (hdr as *const usize).read_unaligned() };
        if word_tag(word) != TAG_LIVE {
            return false; // sampled, or a double free: the slow path tells
        }
        // SAFETY: a live, uncounted block of ours.
        unsafe {
            self.check_link(hdr);
            self.free_uncounted(hdr);
        }
        true
    }

    /// [`Arena::try_free_counted`] out of line: the owner's free of a counted block, after
    /// [`Arena::try_free_local_recent`] declined it. False, having changed nothing, for a block
    /// that is not a live, unsampled one of this arena's committed memory.
    ///
    /// # Safety
    /// As [`Arena::try_free_local_fast`].
    #[inline(never)]
    pub unsafe fn try_free_local_counted(&self, p: *mut u8) -> bool {
        // SAFETY: forwarded obligations.
        unsafe { self.try_free_counted(p) }
    }

    /// The free of a counted block of this arena (one below the uncounted range; for a block
    /// in it, the range's tests come first): its units come off its granules, and it goes back
    /// to the bump pointer when it is the run's last block.
    ///
    /// # Safety
    /// As [`Arena::try_free_local_fast`].
    #[inline(always)]
    unsafe fn try_free_counted(&self, p: *mut u8) -> bool {
        let p = p as usize;
        let hdr = p.wrapping_sub(HEADER);
        if !self.plausible(p) || self.in_uncounted(hdr) {
            return false;
        }
        // SAFETY: `p` is in our committed data (plausible), so its header is readable.
        let word = unsafe { *(hdr as *const usize) };
        let size = word_size(word);
        if word_tag(word) != TAG_LIVE {
            return false;
        }
        // SAFETY: as above.
        unsafe { self.check_link(hdr) };
        // SAFETY: a validated live header; marks it freed for double-free detection (the tag is
        // the header word's low 16 bits, little endian).
        unsafe { *(hdr as *mut u16) = TAG_FREED as u16 };
        // SAFETY: a live block of this arena, on the owner thread.
        let emptied = unsafe { self.uncount_block(hdr, p + size) };
        if !self.lifo_release(hdr, p + size, emptied) && emptied != 0 {
            self.granules_emptied(emptied, hdr);
        }
        self.debug_check();
        true
    }

    /// Frees the live block at `hdr` of the uncounted range: it was never counted, so this is a
    /// tag flip, and the range's last live block also takes the bump pointer back to where the
    /// range began. A block that ends at `top` is `below_top` (its invariant), which the LIFO
    /// free takes, so nothing goes back to the bump pointer here otherwise. `free`'s assembly
    /// entry point does the tag flip itself when the block is not the range's last live one
    /// ([`asm_layout`]).
    ///
    /// # Safety
    /// Owner thread; `hdr` is the header of a live block in the uncounted range.
    #[inline(always)]
    unsafe fn free_uncounted(&self, hdr: usize) {
        // SAFETY: caller's obligation; marks it freed for double-free detection (and so that
        // the walk does not count it): the tag is the header word's low 16 bits (little endian).
        unsafe { *(hdr as *mut u16) = TAG_FREED as u16 };
        let live = self.live_uncounted.get() - 1;
        self.live_uncounted.set(live);
        if live == 0 {
            self.note_peak();
            // The bump pointer goes back below where a walk may have paused. (Not on the LIFO
            // path: while a walk is paused, `below_top` names no block, so no free is a LIFO
            // one.)
            if self.paused_at.get() != 0 {
                // SAFETY: as below.
                return unsafe { self.release_uncounted_paused(hdr) };
            }
            // SAFETY: the last live block of the range, just freed by its owner (its tag said
            // live, so no other thread freed it).
            unsafe { self.release_uncounted(hdr) };
        }
        self.debug_check();
    }

    /// The owner's free of the sampled block `[hdr + HEADER, end)` of the uncounted range, once
    /// the profiler learnt from it: [`Arena::free_uncounted`], and a block at `top` goes back
    /// to the bump pointer, through the link its sample word replaced when the arena kept it
    /// (`sampled_at`). Without it, the blocks below are counted, so that none of the uncounted
    /// range ends at `top` unnamed by `below_top`.
    ///
    /// # Safety
    /// Owner thread; `hdr` is the header of a live sampled block in the uncounted range.
    unsafe fn free_sampled_uncounted(&self, hdr: usize, end: usize) {
        let link = if self.sampled_at.get() == hdr {
            self.sampled_at.set(0);
            Some(self.sampled_link.get())
        } else {
            None
        };
        // SAFETY: caller's obligation: the block's link word, its sample word until now, is
        // ours to write; the link given back was the block's own, or `no_link`.
        unsafe {
            (hdr as *mut usize)
                .add(1)
                .write(link.unwrap_or(self.no_link()))
        };
        let at_top = align_up(end, MIN_ALIGN) == self.top.get();
        // SAFETY: forwarded obligations; its link is a plain block's now.
        unsafe { self.free_uncounted(hdr) };
        if at_top && self.live_uncounted.get() != 0 {
            self.note_peak();
            // SAFETY: the block, freed by its owner, ends at the bump pointer and lies in the
            // uncounted range, so in the current run; its link is its own or `no_link`.
            unsafe { self.release_top(hdr) };
            if link.is_none() {
                self.flush_uncounted();
            }
        }
        self.debug_check();
    }

    /// [`Arena::release_uncounted`] while a walk is paused: forgets the pause first. Out of
    /// line, so that the free that calls it needs no stack frame.
    ///
    /// # Safety
    /// As [`Arena::release_uncounted`].
    #[cold]
    #[inline(never)]
    unsafe fn release_uncounted_paused(&self, hdr: usize) {
        self.forget_pause();
        // SAFETY: forwarded obligations.
        unsafe { self.release_uncounted(hdr) };
        self.debug_check();
    }

    /// The block at `hdr`, just freed by its owner, ended at the bump pointer (or only padding
    /// lay between them): the bump pointer goes back to it, and on down over the blocks right
    /// below it that their owner freed already (their links say which: see `below_top`), a
    /// bounded walk at a time (see `release_freed_below`).
    /// Temporaries freed in the order they were made (FIFO) then leave the bump pointer where
    /// the first one began, as a LIFO loop does, so the next ones reuse memory still in the
    /// cache instead of walking on through the arena until a lap comes round. `free`'s assembly
    /// entry point does what this does when the link's word does not say "freed" ([`asm_layout`]).
    ///
    /// # Safety
    /// Owner thread; `hdr` is the header of a block of the current run (`hdr >= run_start`)
    /// with nothing but alignment padding between its end and `top`, its tag already says
    /// freed, and its second header word is its link (a plain block's, or `no_link`), or
    /// `POISON_LINK` when another thread freed it before (a double free: this aborts);
    /// `uncounted <= hdr`.
    #[inline(always)]
    unsafe fn release_top(&self, hdr: usize) {
        // SAFETY: caller's obligation: the block's header is ours to read. One compare, as in
        // `free`'s assembly LIFO path; the walk below checks each link whole.
        let link = unsafe { self.check_link(hdr) };
        self.top.set(hdr);
        self.below_top.set(link);
        // SAFETY: `link` is `no_link` (`limit`, whose low byte says no block is freed), a
        // header of the run below `hdr` (`below_top`'s invariant), or `POISON_LINK` below the
        // arena (whose word says freed, so that `release_freed_below` aborts): memory we may
        // read. The callers keep `uncounted <= hdr`.
        if unsafe { Self::owner_freed(link) } {
            // SAFETY: as above.
            unsafe { self.release_freed_below(hdr, link) };
        }
    }

    /// Whether the header at `hdr` says its owner freed the block (false for `no_link`). Atomic:
    /// another thread may be freeing that block (it writes the tag with Release).
    ///
    /// # Safety
    /// `hdr` is a block header in committed memory of this arena, its `no_link`, or
    /// `POISON_LINK`.
    #[inline(always)]
    pub(super) unsafe fn owner_freed(hdr: usize) -> bool {
        // SAFETY: caller's obligation.
        let word = unsafe { (*(hdr as *const AtomicUsize)).load(Ordering::Relaxed) };
        // By the low byte, which is `TAG_FREED`'s alone (asserted where the tags are): a byte
        // compare needs no widening, where the 16-bit tag took a `movzx` first.
        word as u8 == TAG_FREED as u8
    }

    /// [`Arena::release_top`] went back to a block whose link says its owner freed the block
    /// below it already: goes on down the links while that holds, for at most `walk_steps`
    /// blocks ([`WALK_STEPS_SHORT`], or [`WALK_STEPS`] once an allocation in this outermost
    /// region took a paused walk on). Where freed blocks go on below that, the walk pauses at
    /// the last block it reached (`paused_at`), and the next allocation takes it on before it
    /// bumps ([`Arena::finish_paused_walk`]). So a free costs a bounded number of steps whatever
    /// the order of the frees before it, and a walk whose memory the last free of the uncounted
    /// range or the region's end takes back anyway (a tree dropped from its leaves, a parsed
    /// document or a map dropped at the end of a request) is never made; a program that
    /// allocates again gets the memory back all the same, and a loop that frees its
    /// temporaries in order below a live block pays the paused walk's slow allocation once in
    /// the region, not once a turn.
    ///
    /// # Safety
    /// Owner thread; `link` is the link of the block at `freed` that its owner just freed (now
    /// `below_top`): the header of a block of the current run its owner freed, or
    /// `POISON_LINK` (another thread freed the block at `freed` before: this aborts).
    #[cold]
    #[inline(never)]
    unsafe fn release_freed_below(&self, freed: usize, link: usize) {
        if link == poison_link() {
            self.bad_link(freed, link);
        }
        // SAFETY: forwarded obligations.
        unsafe { self.walk_down(link, self.walk_steps.get()) };
    }

    /// Takes a paused walk down over freed blocks on to its end (see
    /// [`Arena::release_freed_below`]): what the slow path does first, before it looks at the
    /// bump pointer. True when there was one.
    #[inline]
    pub(super) fn finish_paused_walk(&self) -> bool {
        let at = self.paused_at.get();
        if at == 0 {
            return false;
        }
        debug_assert_eq!(at, self.top.get());
        let link = self.paused_link.get();
        self.forget_pause();
        // The program allocates after walks: they are worth making at once from now on.
        self.walk_steps.set(WALK_STEPS);
        // SAFETY: the pause's invariant: `link` is a header of the current run, below `top`,
        // whose owner freed it, with only freed blocks and padding up to `top`.
        unsafe { self.walk_down(link, usize::MAX) };
        true
    }

    /// The walk of [`Arena::release_freed_below`] from `hdr`, a block of the current run its
    /// owner freed, with only free memory from it up to `top`, for at most `steps` blocks past
    /// it: the bump pointer ends on the lowest freed block reached, and `below_top` names the
    /// block below it, or the walk pauses there.
    ///
    /// # Safety
    /// Owner thread; `hdr` is as said.
    unsafe fn walk_down(&self, mut hdr: usize, mut steps: usize) {
        let run_start = self.run_start.get();
        let below = loop {
            prefetch_below(hdr);
            // SAFETY: `hdr` is a header of the current run whose owner freed it (checked by the
            // caller or below): its link is a plain block's (owner frees of sampled blocks reset
            // theirs). Another thread writes it only when it frees the block too (a double free,
            // which aborts below or in that thread): atomic for that.
            let below = unsafe { (*((hdr + 8) as *const AtomicUsize)).load(Ordering::Relaxed) };
            // `link_below(hdr, below)`, in two halves: `below < hdr` here, and `below` not
            // below `no_link` only where the walk stops below `run_start` (`no_link` lies
            // below every run), so that each step makes one compare of it.
            if below >= hdr || (below < run_start && !self.link_below(hdr, below)) {
                // Freed by its owner and by another thread (`POISON_LINK`: whichever came
                // second aborts on the tag it finds; kept here in case that one raced past
                // it), or the freed block's header was written to since.
                self.bad_link(hdr, below);
            }
            // SAFETY: `below` is a header of the run below `hdr` (the links' invariant), so
            // committed memory, or `no_link`, which lies below `run_start`.
            if below < run_start || !unsafe { Self::owner_freed(below) } {
                break below;
            }
            if steps == 0 {
                // Freed blocks go on below: pause here (see `release_freed_below`).
                self.paused_at.set(hdr);
                self.paused_link.set(below);
                self.update_limit(); // 0: the next allocation takes the walk on
                break self.no_link();
            }
            steps -= 1;
            hdr = below;
        };
        self.top.set(hdr);
        self.below_top.set(below);
        if self.uncounted.get() > hdr {
            self.uncounted.set(hdr);
        }
    }

    /// LIFO: when the counted block `[hdr, end)`, just freed by its owner, is the most recent
    /// one of the current run (it ends at `top`, or it is `below_top`, with only padding up to
    /// `top`), its memory goes back to the bump pointer at once (returns true). The caller
    /// reports the `emptied` granules of a block that does not (see `granules_emptied`); of one
    /// that does, markers mode leaves them out (its region end resizes), process mode reports
    /// them here (it has no region end, and a 200 MiB block freed at the top of the run stayed
    /// resident; glibc unmaps it).
    #[inline(always)]
    fn lifo_release(&self, hdr: usize, end: usize, emptied: usize) -> bool {
        if hdr == self.below_top.get()
            || (align_up(end, MIN_ALIGN) == self.top.get() && hdr >= self.run_start.get())
        {
            if emptied != 0 && self.recycle {
                self.lifo_release_emptying(hdr, emptied);
                return true;
            }
            self.note_peak();
            // A counted block with only padding up to `top`: the uncounted range held no block.
            self.uncounted.set(hdr);
            // SAFETY: a block of the current run (`below_top`'s invariant, or `hdr >= run_start`)
            // with only padding up to `top`, freed by its owner (the callers flipped its tag;
            // the slow path cleared a sampled one's link).
            unsafe { self.release_top(hdr) };
            return true;
        }
        false
    }

    /// [`Arena::lifo_release`] of a process-mode block that emptied `emptied` granules: back to
    /// the bump pointer, then the report. Out of line, so that the look at the bound the report
    /// may make is no call in the middle of `free` (which gave every `free` a stack frame).
    #[cold]
    #[inline(never)]
    fn lifo_release_emptying(&self, hdr: usize, emptied: usize) {
        self.note_peak();
        // As in `lifo_release`.
        self.uncounted.set(hdr);
        // SAFETY: as in `lifo_release`, whose checks the caller made.
        unsafe { self.release_top(hdr) };
        self.granules_emptied(emptied, hdr);
    }

    #[cold]
    #[inline(never)]
    unsafe fn free_local_slow(&self, p: *mut u8) {
        let p = p as usize;
        let hdr = p.wrapping_sub(HEADER);
        if !p.is_multiple_of(MIN_ALIGN) {
            bad_free(Misuse::NotABlock, p, None);
        }
        if self.in_uncounted(hdr) {
            // SAFETY: `hdr` lies in the uncounted range of our committed run: a block's header.
            let word = unsafe { *(hdr as *const usize) };
            if word_tag(word) == TAG_SAMPLED {
                // A sampled block not counted yet (the fast path took the plain ones): learn
                // from it, then free it without counting the range first.
                // SAFETY: the header of a live sampled block of ours.
                if let Some(w) = unsafe { Self::sample_of(hdr as *mut usize) } {
                    self.learn_from_free(p, w);
                }
                // SAFETY: a live, uncounted, sampled block of ours.
                unsafe { self.free_sampled_uncounted(hdr, p + word_size(word)) };
                return;
            }
            // Anything else in the uncounted range is no live block (the fast path took the
            // live ones): a double free, a block another thread freed, or no block's start.
            // Told here, before a walk of the range could trust a header that is not one.
            bad_header(p, word);
        }
        // A block below the uncounted range is counted already, and freeing it leaves the
        // range alone (a counted block that ends at `top` means the range is empty): no walk.
        // (Counting the range here for a sampled block, one in eight, would count every
        // younger block that could otherwise be freed by a tag flip.)
        if !self.plausible(p) {
            bad_free(Misuse::NotABlock, p, None);
        }
        // SAFETY: `p` is in our slot (plausible), so its header is readable.
        let (hdr, size) = unsafe { self.header_of(p) };
        // SAFETY: a validated header.
        if let Some(w) = unsafe { Self::sample_of(hdr) } {
            self.learn_from_free(p, w);
        }
        // SAFETY: as above; marks the block freed for double-free detection. A sampled block's
        // second word is its sample word, no link (see `below_top`): it reads as none now.
        unsafe {
            *hdr = header_word(size, TAG_FREED);
            *hdr.add(1) = self.no_link();
        }
        let hdr = hdr as usize;
        // SAFETY: a validated live block of this arena, on the owner thread.
        let emptied = unsafe { self.uncount_block(hdr, p + size) };
        if !self.lifo_release(hdr, p + size, emptied) && emptied > 0 {
            self.granules_emptied(emptied, hdr);
        }
        self.debug_check();
    }
}
