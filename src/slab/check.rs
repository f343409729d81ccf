//! The checks that catch a misused block of the small-block heap and abort with one line: a
//! block freed twice, a pointer that is no block's start, `malloc_usable_size` of either.
//!
//! The heap keeps no header in front of its blocks, so the checks lean on what a free block
//! holds. Its second word carries [`FREED_KEY`] while it is free (glibc's tcache does the same
//! with its `key`): written by every free and by the carving of fresh blocks, cleared by every
//! allocation. A free that finds the key set looks for the block on the lists that hold free
//! blocks (the owner's cache, the page's free list, other threads' frees waiting on the page)
//! and aborts if it is there; program data that happens to equal the key costs that look and
//! nothing else. A pointer's place in its page is checked where it costs no hot instruction:
//! the owner's fast free tests its alignment only, every other path tests it whole.

use core::sync::atomic::Ordering;

use super::heap::Heap;
use super::page::{Block, Page, TF_LIST};
use super::pool::{committed, page_of};
use super::{CLASSES, FULL, HEADER, PAGE_SIZE};
use crate::misuse::{self, HeapKind, Misuse};

/// What the second word of a free block holds (see the module docs). An odd value, so that no
/// pointer or length a program stores reads as it by chance.
pub(super) const FREED_KEY: usize = 0xF7EE_D00D_5EA1_B10B;
const _: () = assert!(FREED_KEY % 2 == 1);

/// Aborts on a misused block `p`, with one line naming it and its page's block size.
#[cold]
#[inline(never)]
pub(super) fn bad_block(what: Misuse, p: *const u8) -> ! {
    // SAFETY: only read when the page is committed and serves blocks (`place_ok` said so).
    let size = (what == Misuse::Freed || place_ok(p))
        .then(|| unsafe { (*page_of(p)).block_size.get() as usize });
    misuse::abort(what, HeapKind::SmallBlocks, p as usize, size)
}

/// `p` is the start of a block its page has carved: the page lies in the committed part of
/// the reservation and serves a class, and `p` is a whole number of blocks past the header,
/// below the carved ones' end. Reads only the page header, and only once it is committed.
pub(super) fn place_ok(p: *const u8) -> bool {
    let pg = page_of(p);
    if !committed(pg as *const u8) {
        return false;
    }
    // SAFETY: a committed page: its header reads as a page's (zero if never used).
    let (bs, cap, class) = unsafe {
        (
            (*pg).block_size.get() as usize,
            (*pg).capacity.get() as usize,
            (*pg).class.get() as usize,
        )
    };
    let off = (p as usize & (PAGE_SIZE - 1)).wrapping_sub(HEADER);
    bs != 0 && class < CLASSES && off < PAGE_SIZE && off.is_multiple_of(bs) && off / bs < cap
}

/// A free (or `malloc_usable_size`) of `b`, whose second word holds [`FREED_KEY`]: aborts if
/// the block is free, else returns (program data equal to the key). The owner looks on its
/// lists; another thread cannot read them safely and lets the free go on (so a double free
/// whose second free comes from another thread is not caught: glibc catches neither).
///
/// # Safety
/// `b` lies in a committed page (`place_ok`); `heap` is the calling thread's heap or null.
#[cold]
#[inline(never)]
pub(super) unsafe fn freed_again(heap: *mut Heap, b: *mut Block) {
    let pg = page_of(b as *const u8);
    // SAFETY: caller's obligation: the page header is readable.
    let owner = unsafe { (*pg).heap.load(Ordering::Acquire) } & !FULL;
    if heap.is_null() || owner != heap as usize {
        return;
    }
    // SAFETY: the calling thread owns the page and its heap: the cache and the free list are
    // its own; other threads only push onto `thread_free`, whose blocks only the owner takes.
    if unsafe { on_free_lists(heap, pg, b) } {
        bad_block(Misuse::Freed, b as *const u8);
    }
}

/// Whether `b` is on its class's cache of `heap`, on `pg`'s free list or on its `thread_free`.
///
/// # Safety
/// The calling thread owns `heap` and `pg`.
unsafe fn on_free_lists(heap: *mut Heap, pg: *mut Page, b: *mut Block) -> bool {
    // SAFETY: caller's obligation; every list holds free blocks of ours, linked by their
    // first word, and ends in null.
    unsafe {
        let class = (*pg).class.get() as usize;
        let lists = [
            (*heap).cache[class].head.get(),
            (*pg).free.get(),
            ((*pg).thread_free.load(Ordering::Acquire) & TF_LIST) as *mut Block,
        ];
        for mut x in lists {
            while !x.is_null() {
                if x == b {
                    return true;
                }
                x = (*x).next;
            }
        }
    }
    false
}
