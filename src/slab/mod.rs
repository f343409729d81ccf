//! The small-block heap: where process mode sends the small blocks that the lifetime predictor
//! routes away from the arena (long-lived sites), instead of the next allocator.
//!
//! Process mode routes long-lived data away from the bump arena. Sent to glibc, those blocks
//! cost glibc's price plus ours, so a program whose data is mostly long-lived could only ever be
//! slower than glibc. This heap serves them at a free-list pop instead, with glibc-like memory.
//! It follows mimalloc's design (Leijen, Zorn, de Moura: "Mimalloc: Free List Sharding in
//! Action", 2019), cut down to what these blocks need:
//!
//! * **Pages.** One reservation (made on first use, [`RESERVE`] bytes or less under
//!   `RLIMIT_AS`) split into 64 KiB [`Page`]s, each aligned to its size, so a block's page is a
//!   mask. A page serves one size class (16 B to [`MAX_SMALL`], four classes per doubling) and
//!   belongs to one thread's [`Heap`]; its header holds the free list.
//! * **Fast paths.** The owner's `free` pushes onto a small per-class cache of blocks freed last
//!   (see `BlockCache`), then onto the page's free list; `alloc` pops the cache, then the class's
//!   current page's free list. No atomics, no locks.
//! * **Other threads' frees** push onto the page's atomic `thread_free` list (its length in the
//!   top bits), which the owner takes over in one swap, without walking it, when it runs short.
//! * **Full pages** (no free block left) leave their heap's lists, still owned: their `heap`
//!   field carries the tag [`FULL`]. The owner's next free to one takes it back (one
//!   compare-and-swap on `heap`); another thread's free *detaches* it instead (the same swap,
//!   to null) onto the global list of abandoned pages, where any heap short of a page of that
//!   class adopts it. Memory freed by other threads thus serves whichever thread allocates next,
//!   even when the owner has gone idle (a thread that filled a table and now waits).
//! * **Memory goes back.** A page whose last block is freed goes to a small per-heap cache
//!   ([`EMPTY_CACHE`] pages) or back to the kernel (`madvise(MADV_DONTNEED)`) at once; only the
//!   4 KiB pieces a page's blocks were carved from are ever touched.
//! * **Thread exit.** The heap is *abandoned*: its empty pages go back; pages with live blocks
//!   go to a global abandoned list, where other threads' frees keep their counts (and return a
//!   page once it is empty) and heaps short of a page of that class adopt them.
//!
//! Soundness does not depend on any prediction: a block is only reused once it was freed, and a
//! free always reaches the page that served the block, whichever thread makes it.
//!
//! Page ownership: a page's owner-only fields (free list, counts, links) are touched by the
//! thread of the heap in `Page::heap` (tag removed), or, while that is null (abandoned), by
//! whoever holds the `ABANDONED` lock. Ownership changes hands under that lock (abandon,
//! detach, adopt), by the compare-and-swap on `heap` that decides between the owner taking a
//! full page back and another thread detaching it, or through the global page pool's lock
//! (retire, take); each orders every access before the next owner's.

mod abandon;
mod alloc;
mod check;
mod free;
mod heap;
mod page;
mod pool;

pub use crate::layout::MAX_SMALL;
pub(crate) use abandon::abandon;
pub use abandon::{fork_finish, fork_prepare};
pub use alloc::{alloc, alloc_cached, class_of};
pub use free::free;
pub(crate) use heap::acquire_heap;
pub use heap::{Heap, CACHE_BYTES, MAX_HEAPS};
pub use page::Page;
pub use pool::{expire_warm_if_due, fit_address_limit, owns, trim_warm, RESERVE, WARM_PAGES};

use core::sync::atomic::Ordering;

use pool::{page_of, PAGES_ADOPTED, PAGES_IN_USE, PAGES_RETURNED};

/// log2 of the page size.
pub const PAGE_SHIFT: u32 = 16;
/// Bytes per page; pages are aligned to this.
pub const PAGE_SIZE: usize = 1 << PAGE_SHIFT;
/// The page header's size; the first block starts here.
const HEADER: usize = 128;

/// Number of size classes.
pub const CLASSES: usize = 20;
/// Block size of each class.
pub const CLASS_SIZE: [u32; CLASSES] = [
    16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
];
/// Class of a request, indexed by `(size + 15) / 16`.
static CLASS_OF: [u8; MAX_SMALL / 16 + 1] = class_table();

const fn class_table() -> [u8; MAX_SMALL / 16 + 1] {
    let mut t = [0u8; MAX_SMALL / 16 + 1];
    let mut i = 1;
    while i < t.len() {
        let size = (i * 16) as u32;
        let mut c = 0;
        while CLASS_SIZE[c] < size {
            c += 1;
        }
        t[i] = c as u8;
        i += 1;
    }
    t
}

/// Empty pages a heap keeps for reuse without giving their memory back.
pub const EMPTY_CACHE: u32 = 4;

/// Tag in `Page::heap` of a full page: still owned by that heap, on none of its lists.
pub const FULL: usize = 1;

/// Usable size of a block; aborts (`check.rs`) when `p` is no block's start or a free block.
///
/// # Safety
/// `owns(p)`; `heap` is the calling thread's heap or null.
pub unsafe fn usable_size(heap: *mut Heap, p: *const u8) -> usize {
    if !check::place_ok(p) {
        check::bad_block(crate::misuse::Misuse::NotABlock, p);
    }
    let b = p as *mut page::Block;
    // SAFETY: a block of a committed page (checked above), so its words are readable; the
    // page header is mapped and `block_size` does not change while the page has live blocks.
    unsafe {
        if (*b).key == check::FREED_KEY {
            check::freed_again(heap, b);
        }
        (*page_of(p)).block_size.get() as usize
    }
}

/// Bytes of the blocks handed out now (a block another thread freed counts until its page's
/// owner takes it back): a walk of the committed page headers, for `mallinfo`. Each page's
/// count and block size are read without its owner's cooperation, so a page that changes
/// hands meanwhile may be off by its blocks in flight. A page never used, or given back, reads
/// as zero (its header is then the kernel's zero page, which adds nothing resident).
pub fn live_bytes() -> u64 {
    let (base, len) = pool::committed_range();
    (0..len / PAGE_SIZE)
        .map(|i| {
            // SAFETY: a page header in the committed part of the reservation, readable for
            // the life of the process; `used` and `block_size` are atomics.
            let pg = unsafe { &*((base + i * PAGE_SIZE) as *const Page) };
            u64::from(pg.used.get()) * u64::from(pg.block_size.get())
        })
        .sum()
}

/// `(pages in use, pages given back to the kernel so far, abandoned pages adopted so far)`.
pub fn counts() -> (u64, u64, u64) {
    (
        PAGES_IN_USE.load(Ordering::Relaxed),
        PAGES_RETURNED.load(Ordering::Relaxed),
        PAGES_ADOPTED.load(Ordering::Relaxed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_with_little_waste() {
        for size in 1..=MAX_SMALL {
            let c = class_of(size);
            let bs = CLASS_SIZE[c] as usize;
            assert!(bs >= size, "size {size} got class {c} of {bs}");
            assert!(c == 0 || (CLASS_SIZE[c - 1] as usize) < size);
            assert!(
                size <= 128 || bs * 4 <= size * 5 + 64,
                "size {size} wastes in {bs}"
            );
        }
    }
}
