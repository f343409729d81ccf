//! Invariant checks: the O(1) checks of debug builds and the full walk of the `check-invariants`
//! feature, run after every arena operation.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::header::{poison_link, word_size, word_tag, TAG_FREED_REMOTE, TAG_LIVE};
use super::Arena;
use crate::layout::{align_up, GRANULE, HEADER, MIN_ALIGN};
use crate::os;

/// How much of the memory known to read as zero [`Arena::check_reads_as_zero`] reads.
const ZERO_CHECK_BYTES: usize = 16 << 10;

#[cold]
#[inline(never)]
fn invariant_broken(what: &str) -> ! {
    os::write_stderr(b"resizealloc: arena invariant broken: ");
    os::write_stderr(what.as_bytes());
    os::fatal(b"\n")
}

impl Arena {
    /// Checks the structural invariants documented on [`Arena`]; returns the first violation.
    /// Cost is linear in the current run, so tests call it after every operation while debug
    /// builds check the O(1) part on every allocation.
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        self.check_bump()?;
        let mut live = 0;
        let mut links_below = true;
        let mut last_named = true;
        let (top, below_top) = (self.top.get(), self.below_top.get());
        if self
            .for_each_uncounted(|hdr, end, _| {
                live += 1;
                // SAFETY: a header of the uncounted range, in committed memory. Atomic: another
                // thread may be freeing the block.
                let (word, link) = unsafe {
                    (
                        (*(hdr as *const AtomicUsize)).load(Ordering::Relaxed),
                        (*((hdr + 8) as *const AtomicUsize)).load(Ordering::Relaxed),
                    )
                };
                // A live tag with the poisoned link: another thread's `free_remote` is between
                // its two stores (the link first, then the tag), which this walk may read in
                // either order.
                if word_tag(word) == TAG_LIVE && link != poison_link() {
                    links_below &= self.link_below(hdr, link);
                }
                if word_tag(word) == TAG_LIVE && align_up(end, MIN_ALIGN) == top {
                    last_named &= hdr == below_top;
                }
            })
            .is_none()
        {
            return Err("the uncounted range is not a row of blocks ending at the bump pointer");
        }
        if live != self.live_uncounted.get() {
            return Err("live_uncounted is not the number of live blocks in the uncounted range");
        }
        // The free that leaves a carried range no live block ends the carry
        // (`release_carried`), and a count of the range does too.
        if self.carried.get() && live == 0 {
            return Err("a carried range has no live block left, and is still carried");
        }
        if !links_below {
            return Err("the link of a live block names no block below it");
        }
        if !last_named {
            return Err(
                "a live uncounted block ends at the bump pointer, and below_top names none",
            );
        }
        let (top, run_end) = (self.top.get(), self.run_end.get());
        self.check_reads_as_zero()?;
        let ahead = align_up(top, GRANULE);
        let mut result = Ok(());
        self.for_each_granule(|start, blocks| {
            if blocks != 0 && ahead <= start && start < run_end && result.is_ok() {
                result = Err("live block (or a crossing block's cover) ahead of the bump pointer");
            }
        });
        result?;
        // Every crossing entry of a granule with live blocks names a live header in it, or a block
        // another thread freed; interior granules count nothing.
        for g in self.granule(self.data_start)..self.granule(self.committed_end.get()) {
            if self.units(g) == 0 {
                continue;
            }
            if let Some(last) = self.crossing_last_or_uncounted(g) {
                for inner in g + 1..last {
                    if self.units(inner) != 0 {
                        return Err("a granule inside a crossing block is counted");
                    }
                }
                // Another thread may free the crossing block between the two reads: it writes
                // the freed tag before it adds its remote units, so a block whose last unit is
                // gone by now reads as freed when looked at again (Acquire on both sides).
                if self.units(last) == 0 && self.crossing_last_or_uncounted(g) == Some(last) {
                    return Err("the last granule of a crossing block is not counted");
                }
            }
        }
        let mut resident = 0;
        let run_lo = self.granule(self.run_start.get());
        let run_hi = self.granule(self.run_end.get());
        let mut result = Ok(());
        let units = |g| self.units(g);
        let crossing = |g| self.crossing_last_or_uncounted(g);
        self.walk_granules(
            self.committed_end.get(),
            units,
            crossing,
            |g, units, covered| {
                let live = units.max(covered as u64);
                // SAFETY: granule of this slot; owner thread.
                let touched = unsafe { *self.touched.add(g) } != 0;
                resident += touched as u64;
                let broken = if live > (GRANULE / MIN_ALIGN) as u64 * 64 {
                    Some("granule live count underflowed")
                } else if live != 0 && !touched {
                    Some("a live granule is not counted resident")
                } else if run_lo <= g && g < run_hi && !touched {
                    Some("a granule of the run is not counted resident")
                } else {
                    None
                };
                if let (Some(e), Ok(())) = (broken, &result) {
                    result = Err(e);
                }
            },
        );
        result?;
        if resident != self.resident_granules.get() {
            return Err("resident granule count out of step with the table");
        }
        Ok(())
    }

    /// The O(1) part of [`Arena::check_invariants`]: bounds, alignment, the fast-path limit, and
    /// the granule the bump pointer enters next.
    pub fn check_bump(&self) -> Result<(), &'static str> {
        let (top, run_start, run_end) = (self.top.get(), self.run_start.get(), self.run_end.get());
        if !(self.data_start <= run_start && run_start <= top && top <= run_end) {
            return Err("bump pointer outside its run");
        }
        let unc = self.uncounted.get();
        if unc > top || (unc != top && unc < run_start) {
            return Err("the uncounted range is not in the run below the bump pointer");
        }
        if run_end > self.committed_end.get() || self.committed_end.get() > self.slot_end {
            return Err("run or commit past the slot");
        }
        if top % MIN_ALIGN != 0
            || run_end % GRANULE != 0
            || !self.cap_end.get().is_multiple_of(GRANULE)
        {
            return Err("misaligned bump pointer or boundary");
        }
        if self.limit.get() != self.fast_limit() {
            return Err("fast-path limit out of date");
        }
        if !self.limit.get().is_multiple_of(MIN_ALIGN) {
            return Err("fast-path limit not 16-byte aligned (the fast paths test rounded ends)");
        }
        let next = align_up(top, GRANULE);
        if next < run_end && self.units(self.granule(next)) != 0 {
            return Err("live block in the granule after the bump pointer's");
        }
        let below = self.below_top.get();
        let paused = self.paused_at.get();
        if paused != 0 {
            let link = self.paused_link.get();
            if paused != top || below != self.no_link() || link < run_start || link >= paused {
                return Err("the paused walk is not at the bump pointer, over the run below it");
            }
            // SAFETY: a header of the run below the bump pointer (checked just now).
            if !unsafe { Self::owner_freed(link) } {
                return Err("the paused walk goes on at a block its owner did not free");
            }
        }
        if below != self.no_link() {
            if below < run_start || below + HEADER > top {
                return Err("the block below the bump pointer is not in the run below it");
            }
            // SAFETY: a header in the run (checked above); atomic for a concurrent remote free.
            let word = unsafe { (*(below as *const AtomicUsize)).load(Ordering::Relaxed) };
            let end = align_up(below + HEADER + word_size(word), MIN_ALIGN);
            if end > top {
                return Err("the block below the bump pointer ends past it");
            }
            // The LIFO free reads no tag: this block is live or freed by another thread.
            if word_tag(word) != TAG_LIVE && word_tag(word) != TAG_FREED_REMOTE {
                return Err("the block below the bump pointer is sampled or freed by its owner");
            }
        }
        Ok(())
    }

    /// The memory `calloc` takes as zero without clearing it, `[max(zero_from, highest top),
    /// run_end)`, reads as zero: its first [`ZERO_CHECK_BYTES`] (reading pages never touched
    /// maps the kernel's zero page, so the check costs no resident memory).
    fn check_reads_as_zero(&self) -> Result<(), &'static str> {
        let from = self
            .zero_from
            .get()
            .max(self.peak_top.get())
            .max(self.top.get());
        let from = align_up(from, 8);
        let to = self
            .run_end
            .get()
            .min(from.saturating_add(ZERO_CHECK_BYTES));
        let mut a = from;
        while a < to {
            // SAFETY: committed memory of the current run, past every block of it.
            if unsafe { *(a as *const u64) } != 0 {
                return Err("memory calloc takes as zero holds old bytes");
            }
            a += 8;
        }
        Ok(())
    }

    /// Runs after every arena operation: the O(1) checks in debug builds, the full walk with the
    /// `check-invariants` feature (the test script turns it on), nothing in release builds.
    #[inline(always)]
    pub(super) fn debug_check(&self) {
        if cfg!(feature = "check-invariants") {
            if let Err(e) = self.check_invariants() {
                invariant_broken(e);
            }
        } else if cfg!(debug_assertions) {
            if let Err(e) = self.check_bump() {
                invariant_broken(e);
            }
        }
    }
}
