//! Zeroed allocation (`calloc`): memory known to read as zero is not cleared again, and a large
//! block is cleared by giving its pages back.

use core::ptr;

use super::{whole_pages, Arena};
use crate::layout::is_small_request;
use crate::os;

/// A `calloc` that would clear this much memory the arena handed out before gives its pages
/// back to the kernel instead, which hands them out zeroed when they are touched. The marks that
/// say what may hold old contents are coarse (everything below the highest top of the run): a
/// 256 MiB `calloc` in a loop, each block freed after two bytes were written, wrote 256 MiB of
/// zeros per call, faulting in pages nobody had touched (17 ms a call; glibc maps a fresh
/// block: 19 µs). From 32 MiB, the largest block glibc may keep in its heap (it maps every
/// larger one fresh), so a block that size costs what glibc's costs.
const CLEAR_BY_DISCARD_FROM: usize = 32 << 20;

/// Zeroes `len` bytes at `p`, from [`CLEAR_BY_DISCARD_FROM`] on by giving the whole pages back
/// (`madvise(MADV_DONTNEED)`: private anonymous memory then reads as zero) and writing only the
/// partial pages at the ends, unless most of them are resident: writing memory the program keeps
/// using costs less than faulting it back in (a region that callocs and fills 64 MiB a step).
///
/// # Safety
/// `[p, p + len)` is part of a block of the arena's committed memory that the caller took and has
/// not handed out yet.
unsafe fn clear_fresh_block(p: *mut u8, len: usize) {
    if len >= CLEAR_BY_DISCARD_FROM {
        let (start, end) = (p as usize, p as usize + len);
        let (lo, hi) = whole_pages(start, end);
        // SAFETY: whole pages of committed memory inside the block, which nothing else uses
        // (caller's obligation); `mincore` only reads their residency.
        let residency = unsafe { os::resident_sixteenths(lo, hi - lo) };
        let mostly_resident = residency.is_none_or(|r| r >= 8);
        // SAFETY: the same pages; the discard leaves them mapped, reading as zero. Refused
        // (locked memory), it changed nothing, and the whole range is written below.
        if !mostly_resident && unsafe { os::discard(lo, hi - lo) } {
            // SAFETY: the partial pages at both ends, inside the block.
            unsafe {
                ptr::write_bytes(p, 0, lo - start);
                ptr::write_bytes(hi as *mut u8, 0, end - hi);
            }
            return;
        }
    }
    // SAFETY: caller's obligation.
    unsafe { ptr::write_bytes(p, 0, len) };
}

impl Arena {
    /// The fast path of `calloc` for a block under a page: a zeroed block from the checked run,
    /// or null (the caller takes [`Arena::alloc_zeroed`]). Clears only what the run may have
    /// written: below the highest top it reached, or below `zero_from`.
    ///
    /// # Safety
    /// As [`Arena::alloc`], except that `size` may be 0 (declined: the caller's slow path
    /// serves it, so `calloc` needs no `max(1)`).
    #[inline(always)]
    pub unsafe fn try_alloc_zeroed_fast(&self, size: usize) -> *mut u8 {
        if !is_small_request(size) {
            // A page or more takes the slow path: clearing it costs far more than the call,
            // and this path stays small enough to inline into `calloc`. So does 0.
            return ptr::null_mut();
        }
        let written_below = self.peak_top.get().max(self.top.get());
        // SAFETY: forwarded obligations; `size` is 1 to a page less one (tested above). The fast
        // path never starts a run.
        let p = unsafe { self.try_alloc_fast_small(size) };
        if !p.is_null() {
            let clean_from = written_below.max(self.zero_from.get());
            if clean_from > p as usize {
                let dirty = (clean_from - p as usize).min(size);
                // SAFETY: the first `dirty` bytes of a fresh block of at least `size` bytes.
                unsafe { ptr::write_bytes(p, 0, dirty) };
            }
        }
        p
    }

    /// [`Arena::alloc`] for `calloc`/`alloc_zeroed`: clears the part of the block whose memory is
    /// not known to be zero (fresh from the kernel and not written since).
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    pub unsafe fn alloc_zeroed(&self, size: usize, align: usize) -> *mut u8 {
        // Every byte the current run has written lies below the highest top it reached; a run
        // started for this block has written nothing yet (what earlier runs wrote there is
        // covered by `zero_from`).
        self.note_peak();
        let written_below = self.peak_top.get().max(self.top.get());
        let run = self.run_id.get();
        // SAFETY: forwarded obligations.
        let p = unsafe { self.alloc(size, align) };
        if p.is_null() {
            return p;
        }
        let written_below = if self.run_id.get() == run {
            written_below
        } else {
            0
        };
        // Only the part below both marks may hold old contents.
        let clean_from = written_below.max(self.zero_from.get());
        let dirty = clean_from.saturating_sub(p as usize).min(size);
        if dirty > 0 {
            // SAFETY: the first `dirty` bytes of a block of at least `size` bytes that we just
            // took and have not handed out.
            unsafe { clear_fresh_block(p, dirty) };
        }
        p
    }
}
