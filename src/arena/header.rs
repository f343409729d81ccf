//! Block headers: the size-and-tag word and the link in front of every block, the state tags
//! that tell a live block from a freed one, and the reads of a header that free, realloc and
//! `malloc_usable_size` share.

use core::cell::Cell;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::free::bad_free;
use super::Arena;
use crate::layout::{align_up, HEADER, LINE, MIN_ALIGN};
use crate::misuse::Misuse;

/// Header word layout: state tag in the low 16 bits, size above (`size << TAG_BITS | tag`), so
/// that the fast free checks and flips the tag with 16-bit operations. Sizes fit: no arena is
/// larger than 64 GiB.
pub const TAG_BITS: u32 = 16;
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the fast free writes the tag as a u16"
);
const TAG_MASK: usize = (1 << TAG_BITS) - 1;
/// A live block.
pub const TAG_LIVE: usize = 0xA110;
/// A live block sampled by the lifetime predictor: the header's second word holds its
/// [`SampleWord`](super::sample::SampleWord). Owner frees of it take the slow path, which learns from its age.
pub(super) const TAG_SAMPLED: usize = 0xA111;
/// A block its owner freed.
pub const TAG_FREED: usize = 0xF4EE;
/// A block another thread freed. Its units may be on the remote counts already, so a walk of
/// the uncounted range counts it like a live one (see `uncounted`).
pub(super) const TAG_FREED_REMOTE: usize = 0xF4EF;
/// Not a block: alignment padding in the uncounted range, which a walk skips: `size` bytes of
/// it, or, for a size of 0, padding up to a header whose block starts on a cache line
/// ([`LINE_GAP`]).
pub const TAG_GAP: usize = 0x6A90;
/// The gap header in front of a block aligned to a cache line (`block_align`'s alignment for
/// blocks of a page or more): its end follows from where it stands (`line_gap_end`), so an
/// allocation writes a constant (putting the padding's size in the word takes four more
/// instructions).
pub const LINE_GAP: usize = header_word(0, TAG_GAP);
const _: () = {
    // `owner_freed` tells `TAG_FREED` by its low byte alone: no other tag, and no multiple of
    // 16 (the value of `limit`, the word at `no_link`), may share it.
    let low = TAG_FREED as u8;
    assert!(
        low != TAG_LIVE as u8
            && low != TAG_SAMPLED as u8
            && low != TAG_FREED_REMOTE as u8
            && low != TAG_GAP as u8
            && !low.is_multiple_of(16),
        "TAG_FREED's low byte must be its own"
    );
};

/// The link a remote free leaves in the block it frees: the address of a word whose low byte is
/// `TAG_FREED`'s. The owner's LIFO free reads no tag (see `Arena::is_last_uncounted`), so a
/// block another thread freed and its owner frees again at the bump pointer gets as far as
/// `release_top`, which aborts on a link above the header, or whose test of the link's word
/// then says "freed" and sends it to `release_freed_below`, which aborts on this address. A
/// static: nothing in any arena.
static POISON_LINK: AtomicUsize = AtomicUsize::new(TAG_FREED);

#[inline(always)]
pub(super) fn poison_link() -> usize {
    &POISON_LINK as *const AtomicUsize as usize
}

/// `free`, `realloc` or `malloc_usable_size` of `p`, whose header word `word` says neither
/// live nor sampled.
#[cold]
#[inline(never)]
pub(super) fn bad_header(p: usize, word: usize) -> ! {
    if word_tag(word) | 1 == TAG_FREED_REMOTE {
        bad_free(Misuse::Freed, p, Some(word_size(word)))
    }
    bad_free(Misuse::NotABlock, p, None)
}

/// Where the padding marked by a [`LINE_GAP`] header at `at` ends: at the first header past
/// `at` whose block starts on a cache line, which is where the allocation put its block. `at`
/// itself when none was needed, as for a gap header that no well-formed range holds (the
/// block's header overwrote it).
#[inline(always)]
pub(super) const fn line_gap_end(at: usize) -> usize {
    align_up(at + HEADER, LINE) - HEADER
}

/// The header word of a block of `size` bytes in state `tag`.
#[inline(always)]
pub(super) const fn header_word(size: usize, tag: usize) -> usize {
    size << TAG_BITS | tag
}

/// The size a header word records.
#[inline(always)]
pub(super) const fn word_size(word: usize) -> usize {
    word >> TAG_BITS
}

/// The state tag of a header word.
#[inline(always)]
pub(super) const fn word_tag(word: usize) -> usize {
    word & TAG_MASK
}

impl Arena {
    /// The link, and `below_top`, that names no block: the address of `limit`. Read as a
    /// header, its low byte is never `TAG_FREED`'s (`limit`'s value is a multiple of 16), and
    /// it lies below every run (the arena sits at the slot's start), so the walks down the
    /// links stop at it with the tests they make anyway (`release_top` needs no null test),
    /// and it is in the cache line the fast paths use.
    #[inline(always)]
    pub(super) fn no_link(&self) -> usize {
        &self.limit as *const Cell<usize> as usize
    }

    /// `below_top` names no block from now on, and a paused walk is forgotten: what every move
    /// of the bump pointer but a bump, a release or a resize of the block at it calls.
    #[inline(always)]
    pub(super) fn forget_below_top(&self) {
        self.below_top.set(self.no_link());
        self.forget_pause();
    }

    /// Forgets a paused walk (the bump pointer went elsewhere), and gives the fast paths their
    /// `limit` back.
    #[inline(always)]
    pub(super) fn forget_pause(&self) {
        if self.paused_at.get() != 0 {
            self.unpause();
        }
    }

    /// [`Arena::forget_pause`] of a paused walk: out of line, so that the frees that may meet
    /// one keep their registers.
    #[cold]
    #[inline(never)]
    fn unpause(&self) {
        self.paused_at.set(0);
        self.update_limit();
    }

    /// Reads and validates the header of `p`, aborting on a double or invalid free and on an
    /// overwritten header (see [`Arena::check_link`]). Returns the header's address and the
    /// block's size.
    ///
    /// # Safety
    /// `p` lies in committed memory of this arena's slot at least `HEADER` bytes past `data_start`.
    #[inline(always)]
    pub(super) unsafe fn header_of(&self, p: usize) -> (*mut usize, usize) {
        if !p.is_multiple_of(MIN_ALIGN) {
            bad_free(Misuse::NotABlock, p, None);
        }
        let hdr = (p - HEADER) as *mut usize;
        // SAFETY: caller's obligation: the header bytes are committed memory of our slot.
        let word = unsafe { *hdr };
        // TAG_LIVE and TAG_SAMPLED differ in the low bit only.
        if word_tag(word) | 1 != TAG_SAMPLED {
            bad_header(p, word);
        }
        if word_tag(word) == TAG_LIVE {
            // SAFETY: as above.
            unsafe { self.check_link(hdr as usize) };
        }
        (hdr, word_size(word))
    }

    /// The link of the block at `hdr`; aborts unless it lies below the header, as the link
    /// of every live, unsampled block (and of one its owner is freeing) does: it was `below_top` (a header below, or `no_link`) when the block was
    /// handed out, and nothing writes it while the block lives. A write before the block (or
    /// past the end of the one before it) that reached the link's high bytes shows here, in
    /// one compare. The walks that follow a link check it whole ([`Arena::link_below`]).
    ///
    /// # Safety
    /// `hdr` is a header in committed memory of this arena whose tag says live (or says freed
    /// by the owner just now).
    #[inline(always)]
    pub(super) unsafe fn check_link(&self, hdr: usize) -> usize {
        // SAFETY: caller's obligation. Atomic: another thread that frees the block too (a
        // double free) writes it.
        let link = unsafe { (*((hdr + 8) as *const AtomicUsize)).load(Ordering::Relaxed) };
        if link >= hdr {
            // Overwritten, or `POISON_LINK` above the arena (another thread freed the block).
            self.bad_link(hdr, link);
        }
        link
    }

    /// `no_link <= link < hdr`, in one compare: what the link of a block at `hdr` is unless
    /// it was overwritten or another thread freed the block (`POISON_LINK`, a static outside
    /// every arena).
    #[inline(always)]
    pub(super) fn link_below(&self, hdr: usize, link: usize) -> bool {
        link.wrapping_sub(self.no_link()) < hdr.wrapping_sub(self.no_link())
    }

    /// The link of the block at `hdr` is no block below it: another thread freed the block
    /// (a double free now), or its header was overwritten.
    #[cold]
    #[inline(never)]
    pub(super) fn bad_link(&self, hdr: usize, link: usize) -> ! {
        if link == poison_link() {
            // SAFETY: the caller read the link of this header: it is ours to read.
            let word = unsafe { (*(hdr as *const AtomicUsize)).load(Ordering::Relaxed) };
            bad_free(Misuse::Freed, hdr + HEADER, Some(word_size(word)))
        }
        bad_free(Misuse::HeaderOverwritten, hdr + HEADER, None)
    }

    /// Checks that `p` can be a block of this arena before its header is read: 16-byte aligned
    /// and inside committed data, in one compare (a misaligned offset rotates into the high
    /// bits). A live block is always committed (shrinking never decommits a granule with a live
    /// count), so this rejects wild pointers instead of faulting on them.
    #[inline(always)]
    pub(super) fn plausible(&self, p: usize) -> bool {
        let offset = p.wrapping_sub(self.data_start + HEADER);
        offset.rotate_right(MIN_ALIGN.trailing_zeros())
            < self.plausible_slots.load(Ordering::Relaxed)
    }

    /// Usable size of the live block `p`.
    ///
    /// # Safety
    /// `p` was returned by `alloc` of this arena and not freed.
    pub unsafe fn usable_size(&self, p: *mut u8) -> usize {
        // SAFETY: caller's obligation.
        let (_, size) = unsafe { self.header_of(p as usize) };
        align_up(size, MIN_ALIGN)
    }
}
