//! Frees by other threads: lock-free, onto the atomic `remote` counts and `remote_balance`; a
//! large block's pages go back to the kernel from the freeing thread.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::free::bad_free;
use super::header::{header_word, poison_link, TAG_FREED_REMOTE};
use super::orphan::ORPHANED;
use super::{whole_pages, Arena};
use crate::layout::{align_up, HEADER, MIN_ALIGN};
use crate::misuse::Misuse;
use crate::os;

/// A block at least this large that another thread frees gives its pages back at once, from
/// the freeing thread: its owner reuses its memory only once it looks at the remote counts (a
/// lap, a region end), and went on mapping fresh memory meanwhile. One thread allocating 32 MiB
/// blocks that another frees peaked at 66 MiB in process mode and 98 MiB in regions (glibc,
/// which unmaps such blocks on free: 38 MiB).
const REMOTE_DISCARD_FROM: usize = 1 << 20;

/// Gives the whole pages of the block `[p, p + size)` back to the kernel.
///
/// # Safety
/// The block is live, the caller frees it, and nothing has published the free yet: nobody reuses
/// its memory meanwhile.
#[cold]
#[inline(never)]
unsafe fn discard_freed_block(p: usize, size: usize) {
    let (lo, hi) = whole_pages(p, p + size);
    if hi > lo {
        // SAFETY: whole pages strictly inside the block (its header lies before `lo`), which the
        // program gives up: the owner reuses none of it before the counts say it is free, and a
        // freed block's contents do not matter. Refused, nothing changed.
        let _ = unsafe { os::discard(lo, hi - lo) };
    }
}

impl Arena {
    /// Frees a block from a thread that does not own the arena. Returns `true` when this free
    /// was the last one of an orphaned arena: the caller must then release the slot.
    ///
    /// # Safety
    /// `p` was returned by this arena's `alloc` and is freed exactly once.
    pub unsafe fn free_remote(&self, p: *mut u8) -> bool {
        let p = p as usize;
        if !self.plausible(p) {
            bad_free(Misuse::NotABlock, p, None);
        }
        // SAFETY: `p` is in our slot, so its header is readable.
        let (hdr, size) = unsafe { self.header_of(p) };
        // SAFETY: a validated header.
        if let Some(w) = unsafe { Self::sample_of(hdr) } {
            self.learn_from_free(p, w);
        }
        if size >= REMOTE_DISCARD_FROM {
            // SAFETY: a live block of ours that this thread frees, before the counts say so.
            unsafe { discard_freed_block(p, size) };
        }
        // SAFETY: validated live header; only this thread frees this block. Atomic, because the
        // owner may read the tag of a crossing block at any time (`crossing_last`), and the link
        // when it frees the block again (a double free). The poisoned link is how the owner's
        // LIFO free, which reads no tag, finds that double free (see `POISON_LINK`). The owner
        // sees it when the program ordered its two frees (a join, a lock); a second free racing
        // with this one may go unseen, as it could when the owner tested the tag.
        unsafe {
            (*(hdr.add(1) as *const AtomicUsize)).store(poison_link(), Ordering::Relaxed);
            (*(hdr as *const AtomicUsize))
                .store(header_word(size, TAG_FREED_REMOTE), Ordering::Release)
        };
        let first = self.granule(p - HEADER);
        let last = self.granule(p + size - 1);
        // SAFETY: granules of this slot. Release publishes our last use of the block.
        unsafe {
            if first == last {
                (*self.remote.add(first)).fetch_add(2, Ordering::Release);
            } else {
                (*self.remote.add(first)).fetch_add(1, Ordering::Release);
                (*self.remote.add(last)).fetch_add(1, Ordering::Release);
            }
        }
        let bytes = (align_up(size, MIN_ALIGN) + HEADER) as u64;
        // Last access to the arena: after this add another thread may release the slot.
        let balance = self
            .remote_balance
            .fetch_add(bytes, Ordering::AcqRel)
            .wrapping_add(bytes);
        balance == ORPHANED
    }

    /// Bytes other threads freed (owner thread, before it exits).
    pub(super) fn remote_bytes(&self) -> u64 {
        self.remote_balance.load(Ordering::Relaxed)
    }
}
