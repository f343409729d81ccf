//! Frees: the owner's push onto its cache or its page, other threads' pushes onto the page's
//! atomic list, and the hand-over of a full page that another thread frees into.

use core::ptr;
use core::sync::atomic::Ordering;

use super::abandon::{park_abandoned, settle_abandoned, ABANDONED};
use super::alloc::collect;
use super::check::{bad_block, freed_again, place_ok, FREED_KEY};
use super::heap::Heap;
use super::page::{empty_page, Block, Page, TF_COUNT_SHIFT, TF_LIST};
use super::pool::{page_of, return_page};
use super::{CLASSES, EMPTY_CACHE, FULL};
use crate::misuse::Misuse;
use crate::os;

/// `used - 1` for a block going back, aborting (as glibc does) when nothing was in use: the
/// program freed a block twice.
fn checked_release(used: u32) -> u32 {
    if used == 0 {
        double_free();
    }
    used - 1
}

#[cold]
#[inline(never)]
pub(super) fn double_free() -> ! {
    os::fatal(b"resizealloc: free(): block freed twice or not allocated (small heap)\n")
}

/// Frees `p`. Any thread may call it for any live block; a block freed twice (by its owner
/// the second time) or a pointer that is no block's start aborts (see `check.rs`).
///
/// # Safety
/// `owns(p)`; `heap` is the calling thread's heap or null.
#[inline(always)]
pub unsafe fn free(heap: *mut Heap, p: *mut u8) {
    // Every block is 16-byte aligned (the header and every class size are multiples of 16):
    // the one test of the pointer's place the owner's fast path makes.
    if !(p as usize).is_multiple_of(16) {
        bad_block(Misuse::NotABlock, p);
    }
    // SAFETY: a block's page is in use, so its words are readable. A free block holds the key.
    if unsafe { (*(p as *mut Block)).key } == FREED_KEY {
        // SAFETY: forwarded obligations.
        return unsafe { free_keyed(heap, p) };
    }
    // SAFETY: forwarded obligations.
    unsafe { free_block(heap, p) }
}

/// [`free`] of a block that holds the key: a double free (which aborts), or program data.
/// Out of line, so that the fast path calls nothing that returns.
///
/// # Safety
/// As [`free`].
#[cold]
#[inline(never)]
unsafe fn free_keyed(heap: *mut Heap, p: *mut u8) {
    // SAFETY: forwarded obligations.
    unsafe {
        freed_again(heap, p as *mut Block);
        free_block(heap, p);
    }
}

/// [`free`] after its checks.
///
/// # Safety
/// As [`free`].
#[inline(always)]
unsafe fn free_block(heap: *mut Heap, p: *mut u8) {
    let pg = page_of(p);
    let b = p as *mut Block;
    // SAFETY: a block's page is in use, so its header stays mapped; the owner check decides
    // who may touch the owner-only fields.
    unsafe {
        (*b).key = FREED_KEY;
        let owner = (*pg).heap.load(Ordering::Relaxed);
        if !heap.is_null() && owner & !FULL == heap as usize {
            // Our page (full or not): into the block cache while it has room. (A page of ours
            // has a valid class; a pointer that is not a block may not, and must not index.)
            let class = (*pg).class.get() as usize;
            if class >= CLASSES {
                bad_block(Misuse::NotABlock, p);
            }
            let tc = &(*heap).cache[class];
            let n = tc.count.get();
            if n < tc.limit.get() {
                (*b).next = tc.head.get();
                tc.head.set(b);
                tc.count.set(n + 1);
                return;
            }
            if owner == heap as usize {
                free_to_own_page(&*heap, pg, b);
                return;
            }
        }
        free_other(heap, pg, b);
    }
}

/// The owner's free of `b` onto its page's free list.
///
/// # Safety
/// The calling thread owns `h` and `pg` (not full); `b` is an allocated block of `pg`.
#[inline(always)]
unsafe fn free_to_own_page(h: &Heap, pg: *mut Page, b: *mut Block) {
    // SAFETY: caller's obligation.
    unsafe {
        (*b).next = (*pg).free.get();
        (*pg).free.set(b);
        let u = (*pg).used.get().wrapping_sub(1);
        (*pg).used.set(u);
        // u == 0: the page is empty now; u == MAX: a double free.
        if u.wrapping_add(1) <= 1 {
            free_local_slow(h, pg);
        }
    }
}

/// Empties the heap's block cache: every block goes back to its page as any free would.
///
/// # Safety
/// `heap` is the calling thread's heap.
pub(super) unsafe fn flush_cache(heap: *mut Heap) {
    for c in 0..CLASSES {
        // SAFETY: the calling thread owns the heap; cached blocks are allocated blocks.
        unsafe {
            let tc = &(*heap).cache[c];
            let mut b = tc.head.replace(ptr::null_mut());
            tc.count.set(0);
            while !b.is_null() {
                let next = (*b).next;
                let pg = page_of(b as *const u8);
                if (*pg).heap.load(Ordering::Relaxed) == heap as usize {
                    free_to_own_page(&*heap, pg, b);
                } else {
                    free_other(heap, pg, b);
                }
                b = next;
            }
        }
    }
}

/// After an owner's free that emptied the page (or freed a block twice): an empty page leaves
/// its queue, unless it is the class's only page, for the empty cache or the kernel.
///
/// # Safety
/// The calling thread owns `h` and `pg`, which is on `h`'s queue of its class.
#[cold]
#[inline(never)]
unsafe fn free_local_slow(h: &Heap, pg: *mut Page) {
    // SAFETY: caller's obligation.
    unsafe {
        if (*pg).used.get() == u32::MAX {
            double_free();
        }
        let c = (*pg).class.get() as usize;
        let q = &h.queues[c];
        if q.first.get() == pg && q.last.get() == pg {
            return; // the class's only page: keep it for the next allocation
        }
        q.remove(pg);
        if h.current[c].get() == pg {
            let first = q.first.get();
            h.current[c].set(if first.is_null() { empty_page() } else { first });
        }
        retire(h, pg);
    }
}

/// An empty page leaves its heap: into the heap's empty cache, or back to the kernel.
///
/// # Safety
/// The calling thread owns `h` and `pg`; `pg` is on no list and holds no live block.
unsafe fn retire(h: &Heap, pg: *mut Page) {
    // SAFETY: caller's obligation. With no live block, no other thread can free into the page.
    unsafe {
        (*pg).heap.store(0, Ordering::Relaxed);
        if h.empty_count.get() < EMPTY_CACHE {
            (*pg).next.set(h.empty.get());
            h.empty.set(pg);
            h.empty_count.set(h.empty_count.get() + 1);
            return;
        }
        return_page(pg);
    }
}

/// A free the owner's fast path did not take: the owner's free to its full page takes the page
/// back; another thread's free to a full page detaches it (onto the abandoned list); any other
/// free pushes onto the page's `thread_free`.
///
/// # Safety
/// `b` is a live block of `pg`; `heap` is the calling thread's heap or null.
#[cold]
#[inline(never)]
unsafe fn free_other(heap: *mut Heap, pg: *mut Page, b: *mut Block) {
    // Off the owner's fast path: the pointer's place is checked whole (a free into a page
    // that serves no blocks, or past its carved ones, would corrupt it).
    if !place_ok(b as *const u8) {
        bad_block(Misuse::NotABlock, b as *const u8);
    }
    // SAFETY: a page with a live block stays mapped; the compare-and-swap on `heap` decides
    // who owns a full page; `thread_free` is atomic; `b` is ours to link (the program freed it).
    unsafe {
        loop {
            let owner = (*pg).heap.load(Ordering::Acquire);
            if owner & FULL == 0 {
                break;
            }
            if owner == heap as usize | FULL && !heap.is_null() {
                // Our full page: take it back, unless another thread detached it first.
                if (*pg)
                    .heap
                    .compare_exchange(owner, heap as usize, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    // Back on its queue, then freed into as any page of ours.
                    let h = &*heap;
                    let c = (*pg).class.get() as usize;
                    h.queues[c].push_back(pg);
                    if h.current[c].get() == empty_page() {
                        h.current[c].set(pg);
                    }
                    free_to_own_page(h, pg, b);
                    return;
                }
            } else if detach(pg, owner, b) {
                return;
            }
        }
        // Not full (or no longer): push onto `thread_free`.
        let tf = &(*pg).thread_free;
        let mut cur = tf.load(Ordering::Relaxed);
        loop {
            (*b).next = (cur & TF_LIST) as *mut Block;
            let new = b as usize | ((cur >> TF_COUNT_SHIFT) + 1) << TF_COUNT_SHIFT;
            match tf.compare_exchange_weak(cur, new, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        // Abandoned (the store of null comes before the abandoner's last `collect`, so a push
        // it missed sees null here): once the hint says the page may be empty, look.
        // After the push the block is no longer ours: another thread's free may settle the page
        // and a new heap reuse it before these loads. So only atomic accesses follow (see
        // `Page::reset`), and `settle_abandoned` decides under the lock.
        if (*pg).heap.load(Ordering::SeqCst) == 0
            && (*pg).settle_hint.fetch_sub(1, Ordering::Relaxed) == 1
        {
            settle_abandoned(pg);
        }
    }
}

/// Another thread's free `b` to a full page owned by `owner` (tagged): detaches the page onto
/// the abandoned list of its class, with `b` freed into it. False when the owner took it back
/// (or another thread detached it) first: the caller looks again.
///
/// # Safety
/// `b` is a live block of `pg`.
#[cold]
#[inline(never)]
unsafe fn detach(pg: *mut Page, owner: usize, b: *mut Block) -> bool {
    let ab = ABANDONED.lock();
    // SAFETY: winning the swap from the tagged owner to null makes us the page's owner, under
    // the lock, until it is on the abandoned list.
    unsafe {
        if (*pg)
            .heap
            .compare_exchange(owner, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        // Other threads' frees first: a full page's free list is empty, so they become it
        // without a walk over their cold blocks; then `b` on top.
        collect(pg);
        (*b).next = (*pg).free.get();
        (*pg).free.set(b);
        (*pg).used.set(checked_release((*pg).used.get()));
        park_abandoned(&ab, pg);
    }
    true
}
