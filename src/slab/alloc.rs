//! Allocation: the cache pop, the current page's free list, and the slow path that collects
//! other threads' frees, carves more of a page or takes a new one.

use core::ptr;
use core::sync::atomic::Ordering;

use super::abandon::adopt;
use super::check::FREED_KEY;
use super::free::double_free;
use super::heap::Heap;
use super::page::{empty_page, Block, Page, TF_COUNT_SHIFT, TF_LIST};
use super::pool::take_page;
use super::{CLASS_OF, CLASS_SIZE, FULL, HEADER, PAGE_SIZE};
use crate::os;

/// The class of a request of `size` bytes (`1..=MAX_SMALL`).
#[inline(always)]
pub fn class_of(size: usize) -> usize {
    CLASS_OF[(size + 15) >> 4] as usize
}

/// Allocates a block of class `class` from `heap`; null when no page can be had.
///
/// # Safety
/// `heap` is the calling thread's heap (from `acquire_heap`); `class < CLASSES`.
#[inline(always)]
pub unsafe fn alloc(heap: *mut Heap, class: usize) -> *mut u8 {
    // SAFETY: forwarded obligations.
    let b = unsafe { alloc_cached(heap, class) };
    if !b.is_null() {
        return b;
    }
    // SAFETY: as above.
    unsafe { alloc_from_page(heap, class) }
}

/// [`alloc`] from the thread's cache of the class alone: null when it is empty (nothing changed
/// then). Calls nothing.
///
/// # Safety
/// As [`alloc`].
#[inline(always)]
pub unsafe fn alloc_cached(heap: *mut Heap, class: usize) -> *mut u8 {
    // SAFETY: the calling thread owns `heap`.
    unsafe {
        let tc = &(*heap).cache[class];
        let b = tc.head.get();
        if !b.is_null() {
            tc.head.set((*b).next);
            tc.count.set(tc.count.get() - 1);
            (*b).key = 0;
        }
        b as *mut u8
    }
}

/// [`alloc`] from the class's current page.
///
/// # Safety
/// As [`alloc`].
#[inline(always)]
unsafe fn alloc_from_page(heap: *mut Heap, class: usize) -> *mut u8 {
    // SAFETY: as in `alloc`.
    unsafe {
        let pg = (*heap).current[class].get();
        let b = (*pg).free.get();
        if b.is_null() {
            return alloc_slow(heap, class);
        }
        (*pg).free.set((*b).next);
        (*pg).used.set((*pg).used.get() + 1);
        (*b).key = 0;
        b as *mut u8
    }
}

/// [`alloc`] when the current page has no free block: walks the class's pages for room
/// (setting full ones aside), then adopts an abandoned page or takes a new one.
///
/// # Safety
/// As [`alloc`].
#[cold]
#[inline(never)]
unsafe fn alloc_slow(heap: *mut Heap, class: usize) -> *mut u8 {
    // SAFETY: the calling thread owns `heap` (caller's obligation) and every page on its queues.
    unsafe {
        let h = &*heap;
        let q = &h.queues[class];
        let mut pg = q.first.get();
        while !pg.is_null() {
            let next = (*pg).next.get();
            if (*pg).free.get().is_null() {
                // Other threads' frees first (a free list that is empty takes them without a
                // walk), then fresh blocks.
                collect(pg);
                if (*pg).free.get().is_null() {
                    extend(pg);
                }
            }
            if !(*pg).free.get().is_null() {
                q.remove(pg);
                return serve_from(heap, class, pg);
            }
            // Full: off the queue, still ours (see `FULL`).
            q.remove(pg);
            (*pg).heap.store(heap as usize | FULL, Ordering::Release);
            pg = next;
        }
        h.current[class].set(empty_page());
        loop {
            let pg = adopt(heap, class);
            if pg.is_null() {
                break;
            }
            if (*pg).free.get().is_null() {
                extend(pg);
            }
            if (*pg).free.get().is_null() {
                // Abandoned by an exiting thread with every block live: full, and ours now.
                (*pg).heap.store(heap as usize | FULL, Ordering::Release);
                continue;
            }
            return serve_from(heap, class, pg);
        }
        let pg = new_page(h, class);
        if pg.is_null() {
            return ptr::null_mut();
        }
        extend(pg);
        serve_from(heap, class, pg)
    }
}

/// Makes `pg` (ours, on no list, with a free block) the class's current page and allocates
/// from it.
///
/// # Safety
/// As [`alloc`]; the calling thread owns `pg`, whose free list is not empty.
unsafe fn serve_from(heap: *mut Heap, class: usize, pg: *mut Page) -> *mut u8 {
    // SAFETY: caller's obligations.
    unsafe {
        (*heap).queues[class].push_front(pg);
        (*heap).current[class].set(pg);
        alloc_from_page(heap, class)
    }
}

/// A new page of class `class` for `h`: from its empty cache, else from the pool.
///
/// # Safety
/// The calling thread owns `h`.
unsafe fn new_page(h: &Heap, class: usize) -> *mut Page {
    let mut pg = h.empty.get();
    if pg.is_null() {
        pg = take_page();
        if pg.is_null() {
            return pg;
        }
    } else {
        // SAFETY: a page of the heap's own empty cache.
        h.empty.set(unsafe { (*pg).next.get() });
        h.empty_count.set(h.empty_count.get() - 1);
    }
    let bs = CLASS_SIZE[class];
    // SAFETY: the page is ours alone: fresh from the pool or our own empty page.
    unsafe {
        Page::reset(pg);
        (*pg).block_size.set(bs);
        (*pg)
            .reserved
            .set(((PAGE_SIZE - HEADER) / bs as usize) as u32);
        (*pg).class.set(class as u8);
        (*pg).heap.store(h.as_ptr() as usize, Ordering::Release);
    }
    pg
}

/// Carves more blocks of the page onto its free list: up to the end of the next 4 KiB piece of
/// memory, at least one block, so an untouched piece is never faulted in.
///
/// # Safety
/// The caller owns `pg`, whose free list is empty.
unsafe fn extend(pg: *mut Page) {
    // SAFETY: the caller owns the page; blocks `capacity..reserved` hold nothing.
    unsafe {
        let (cap, res) = ((*pg).capacity.get(), (*pg).reserved.get());
        if cap >= res {
            return;
        }
        let bs = (*pg).block_size.get() as usize;
        let start = pg as usize + HEADER + cap as usize * bs;
        let end_piece = (start + os::PAGE) & !(os::PAGE - 1);
        let n = (((end_piece - start) / bs).max(1) as u32).min(res - cap);
        let mut head: *mut Block = ptr::null_mut();
        for i in (0..n as usize).rev() {
            let b = (start + i * bs) as *mut Block;
            (*b).next = head;
            (*b).key = FREED_KEY;
            head = b;
        }
        (*pg).free.set(head);
        (*pg).capacity.set(cap + n);
    }
}

/// Takes over the blocks other threads freed to the page: onto its free list, out of `used`.
/// Returns how many.
///
/// # Safety
/// The caller owns `pg`.
pub(super) unsafe fn collect(pg: *mut Page) -> u32 {
    // SAFETY: the caller owns the page; `thread_free` is atomic, and the blocks on it are free.
    unsafe {
        if (*pg).thread_free.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let word = (*pg).thread_free.swap(0, Ordering::SeqCst);
        let head = (word & TF_LIST) as *mut Block;
        let n = (word >> TF_COUNT_SHIFT) as u32;
        // The blocks are cold (other threads freed them): walk them only to append the list to
        // a free list that is not empty, which the allocation path never asks for.
        let old = (*pg).free.get();
        if !old.is_null() {
            let mut tail = head;
            while !(*tail).next.is_null() {
                tail = (*tail).next;
            }
            (*tail).next = old;
        }
        (*pg).free.set(head);
        let used = (*pg).used.get();
        if n > used {
            double_free();
        }
        (*pg).used.set(used - n);
        n
    }
}

/// [`collect`] when the page's free list is empty, which takes the blocks without a walk;
/// otherwise they wait on `thread_free` (still counted in `used`) until the free list runs
/// empty, when the allocation path collects them. For an adopted page: appending them to its
/// free list walked every block other threads freed to it, a cache miss each (server
/// benchmark: half of the small-block heap's allocation time).
///
/// # Safety
/// The caller owns `pg`.
pub(super) unsafe fn collect_when_free_is_empty(pg: *mut Page) {
    // SAFETY: the caller owns the page.
    unsafe {
        if (*pg).free.get().is_null() {
            collect(pg);
        }
    }
}
