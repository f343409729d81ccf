//! Thread exit and fork: an exiting thread's heap is abandoned, its pages with live blocks parked
//! on a global list that other heaps adopt from.

use core::ptr;
use core::sync::atomic::Ordering;

use super::alloc::{collect, collect_when_free_is_empty};
use super::free::{double_free, flush_cache};
use super::heap::{Heap, HEAPS, HEAP_USED};
use super::page::{empty_page, Page, PageList, TF_COUNT_SHIFT};
use super::pool::{return_page, PAGES_ADOPTED, POOL};
use super::CLASSES;

/// Abandoned pages with free room and live blocks, one list per class.
pub(super) struct Abandoned {
    pub(super) lists: [PageList; CLASSES],
}

// SAFETY: only reached through the `ABANDONED` mutex.
unsafe impl Send for Abandoned {}

pub(super) static ABANDONED: spin::Mutex<Abandoned> = spin::Mutex::new(Abandoned {
    lists: [const { PageList::new() }; CLASSES],
});

/// Puts a page that the lock holder owns (and whose `heap` is null) on the abandoned list of its
/// class, or gives it back when nothing in it is live.
///
/// # Safety
/// The caller holds the lock (`ab`) and owns `pg`, which is on no list.
pub(super) unsafe fn park_abandoned(ab: &Abandoned, pg: *mut Page) {
    // SAFETY: caller's obligation.
    unsafe {
        let used = (*pg).used.get();
        if used == 0 {
            return_page(pg);
            return;
        }
        (*pg).settle_hint.store(used, Ordering::Relaxed);
        (*pg).abandoned.store(true, Ordering::Relaxed);
        ab.lists[(*pg).class.get() as usize].push_back(pg);
    }
}

/// After other threads' frees to an abandoned page may have emptied it: counts its
/// `thread_free` list against `used`, and gives the page back once nothing in it is live. The
/// list itself stays where it is (appending it to the page's free list walked its cold
/// blocks, under the lock): whoever adopts the page takes it when its free list runs out.
#[cold]
#[inline(never)]
pub(super) fn settle_abandoned(pg: *mut Page) {
    let ab = ABANDONED.lock();
    // SAFETY: holding the lock, we own an abandoned page (its `abandoned` flag only changes under
    // the lock). A page no longer abandoned was adopted, and its new owner collects.
    unsafe {
        if !(*pg).abandoned.load(Ordering::Relaxed) {
            return;
        }
        // Acquire pairs with the frees' push: every use of the blocks on the list happened
        // before the page can be given back below.
        let waiting = ((*pg).thread_free.load(Ordering::Acquire) >> TF_COUNT_SHIFT) as u32;
        let used = (*pg).used.get();
        if waiting > used {
            double_free();
        }
        let live = used - waiting;
        if live != 0 {
            (*pg).settle_hint.store(live, Ordering::Relaxed);
            return;
        }
        ab.lists[(*pg).class.get() as usize].remove(pg);
        (*pg).abandoned.store(false, Ordering::Relaxed);
        return_page(pg);
    }
}

/// Takes an abandoned page of `class` for `heap`, with other threads' frees collected when its free
/// list is empty (see [`collect_when_free_is_empty`]); null when there is none. The page is on no
/// list yet.
///
/// # Safety
/// The calling thread owns `heap`.
pub(super) unsafe fn adopt(heap: *mut Heap, class: usize) -> *mut Page {
    let ab = ABANDONED.lock();
    let pg = ab.lists[class].first.get();
    if pg.is_null() {
        return pg;
    }
    // SAFETY: holding the lock we own the abandoned page; once `heap` names us, other threads'
    // frees push onto it as onto any owned page, and our own take the fast path.
    unsafe {
        ab.lists[class].remove(pg);
        (*pg).abandoned.store(false, Ordering::Relaxed);
        (*pg).heap.store(heap as usize, Ordering::SeqCst);
        drop(ab);
        collect_when_free_is_empty(pg);
    }
    PAGES_ADOPTED.fetch_add(1, Ordering::Relaxed);
    pg
}

/// The thread of `heap` exits: the pages on its queues go back or to the abandoned lists, its
/// cached pages back, and the heap to the table. Its full pages stay tagged with the heap: the
/// first free to one detaches it (or, once the heap serves another thread, takes it back).
///
/// # Safety
/// `heap` is the calling thread's heap, which it never uses again.
pub(crate) unsafe fn abandon(heap: *mut Heap) {
    // SAFETY: the calling thread owns the heap and its pages until it hands them over.
    unsafe {
        flush_cache(heap);
        let h = &*heap;
        for c in 0..CLASSES {
            let q = &h.queues[c];
            loop {
                let pg = q.first.get();
                if pg.is_null() {
                    break;
                }
                q.remove(pg);
                let ab = ABANDONED.lock();
                // Null first, then collect: a free that pushes after this collect sees null
                // (both SeqCst) and settles the page itself.
                (*pg).heap.store(0, Ordering::SeqCst);
                collect(pg);
                park_abandoned(&ab, pg);
            }
            h.current[c].set(empty_page());
        }
        let mut pg = h.empty.get();
        while !pg.is_null() {
            let next = (*pg).next.get();
            return_page(pg);
            pg = next;
        }
        h.empty.set(ptr::null_mut());
        h.empty_count.set(0);
    }
    let i = (heap as usize - HEAPS.heaps.as_ptr() as usize) / core::mem::size_of::<Heap>();
    HEAP_USED.lock()[i / 64] &= !(1 << (i % 64));
}

/// Fork support: takes every lock of the small-block heap (in the order the slow paths take
/// them), so that the child never inherits one held by a thread that does not exist there.
/// False when one could not be had in time (see `fork.rs`): then none is held.
pub fn fork_prepare() -> bool {
    use crate::fork::wait_for;
    if !wait_for(|| HEAP_USED.try_lock().map(core::mem::forget).is_some()) {
        return false;
    }
    if !wait_for(|| ABANDONED.try_lock().map(core::mem::forget).is_some()) {
        // SAFETY: taken just above by this thread, its guard forgotten.
        unsafe { HEAP_USED.force_unlock() };
        return false;
    }
    if !wait_for(|| POOL.try_lock().map(core::mem::forget).is_some()) {
        // SAFETY: as above.
        unsafe {
            ABANDONED.force_unlock();
            HEAP_USED.force_unlock();
        }
        return false;
    }
    true
}

/// Fork support: the parent and the child both release the locks taken in [`fork_prepare`].
///
/// # Safety
/// Called once after a [`fork_prepare`] that returned true, by the thread that called it (or its
/// copy in the child), or in a child whose only thread is that copy (to reset the locks).
pub unsafe fn fork_finish() {
    // SAFETY: the caller's obligation: the locks are held by our own `fork_prepare`.
    unsafe {
        POOL.force_unlock();
        ABANDONED.force_unlock();
        HEAP_USED.force_unlock();
    }
}
