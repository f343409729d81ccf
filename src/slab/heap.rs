//! Heaps: one per thread, with its per-class page lists and its cache of blocks freed last, in a
//! fixed table.

use core::cell::Cell;
use core::ptr;

use super::page::{empty_page, Block, Page, PageList};
use super::{CLASSES, CLASS_SIZE};

/// Most heaps (threads using the heap at once); a thread beyond them uses the next allocator.
pub const MAX_HEAPS: usize = 1024;

/// Blocks the owner freed most recently, per class, handed out again first: their memory is
/// still in the cache, where a page's free list would hand out whichever block of the current
/// page was freed longest ago (the load of its link then misses). For their pages the blocks
/// stay in use (`Page::used` counts them), so a cached block is simply one allocated and not yet
/// handed out: it may belong to a page that has since changed hands, and it goes back through
/// [`free`](fn@super::free)'s general path when the cache is flushed.
pub(super) struct BlockCache {
    pub(super) head: Cell<*mut Block>,
    pub(super) count: Cell<u32>,
    /// At most this many blocks (about [`CACHE_BYTES`] of them).
    pub(super) limit: Cell<u32>,
}

/// Bytes of blocks one class's `BlockCache` holds at most (at least 4 blocks, at most 64).
pub const CACHE_BYTES: usize = 8 << 10;

/// One thread's heap, in a static table (so its address, which full pages carry, stays a heap's).
///
/// Invariant: `current[c]` is the first page of `queues[c]`, or `EMPTY_PAGE` when that queue
/// is empty.
pub struct Heap {
    pub(super) cache: [BlockCache; CLASSES],
    pub(super) current: [Cell<*mut Page>; CLASSES],
    pub(super) queues: [PageList; CLASSES],
    /// Empty pages kept for reuse (linked through `next`).
    pub(super) empty: Cell<*mut Page>,
    pub(super) empty_count: Cell<u32>,
}

// SAFETY: a heap is touched only by its thread, and by the next thread to take it from the table
// after that one abandoned it (ordered by the table's lock).
unsafe impl Sync for Heap {}

impl Heap {
    pub(super) const fn new() -> Self {
        Heap {
            cache: [const {
                BlockCache {
                    head: Cell::new(ptr::null_mut()),
                    count: Cell::new(0),
                    limit: Cell::new(0),
                }
            }; CLASSES],
            current: [const { Cell::new(ptr::null_mut()) }; CLASSES],
            queues: [const { PageList::new() }; CLASSES],
            empty: Cell::new(ptr::null_mut()),
            empty_count: Cell::new(0),
        }
    }

    pub(super) fn as_ptr(&self) -> *mut Heap {
        self as *const Heap as *mut Heap
    }
}

pub(super) struct HeapTable {
    pub(super) heaps: [Heap; MAX_HEAPS],
}

pub(super) static HEAPS: HeapTable = HeapTable {
    heaps: [const { Heap::new() }; MAX_HEAPS],
};
/// Bit `i` set: heap `i` belongs to a live thread.
pub(super) static HEAP_USED: spin::Mutex<[u64; MAX_HEAPS / 64]> =
    spin::Mutex::new([0; MAX_HEAPS / 64]);

// ------------------------------------------------------------------------------ heaps

/// Takes a free heap from the table for the calling thread; null when all are taken.
/// The caller keeps it in the thread's state and calls [`abandon`](fn@super::abandon) when the thread exits.
#[cold]
#[inline(never)]
pub(crate) fn acquire_heap() -> *mut Heap {
    let mut used = HEAP_USED.lock();
    for (w, bits) in used.iter_mut().enumerate() {
        if *bits != u64::MAX {
            let b = (!*bits).trailing_zeros() as usize;
            *bits |= 1 << b;
            let h = &HEAPS.heaps[w * 64 + b];
            // One index into three tables (an iterator over `CLASS_SIZE` lost the compiler's
            // knowledge that no class size is 0, and with it the divide's zero test).
            #[allow(clippy::needless_range_loop)]
            for c in 0..CLASSES {
                h.current[c].set(empty_page());
                let limit = (CACHE_BYTES / CLASS_SIZE[c] as usize).clamp(4, 64);
                h.cache[c].limit.set(limit as u32);
            }
            return h.as_ptr();
        }
    }
    ptr::null_mut()
}
