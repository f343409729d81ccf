//! Pages: a 64 KiB page of one size class, its header with the free lists, and the lists of
//! pages a heap keeps per class.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use super::{HEADER, PAGE_SIZE};

/// `Page::thread_free` keeps the list's length above this bit: the reservation lies below 2^48
/// (checked when it is made) and a page holds fewer than 2^16 blocks.
pub(super) const TF_COUNT_SHIFT: u32 = 48;
pub(super) const TF_LIST: usize = (1 << TF_COUNT_SHIFT) - 1;
const _: () = assert!((PAGE_SIZE - HEADER) / 16 < 1 << (usize::BITS - TF_COUNT_SHIFT));

/// A free block: its first word links the free list, its second holds `FREED_KEY` (see
/// `check.rs`). Every class's blocks have room for both (16 bytes or more).
#[repr(C)]
pub(super) struct Block {
    pub(super) next: *mut Block,
    pub(super) key: usize,
}

/// An owner-only `u32` of a page header that a statistics walk (`mallinfo`) may read from
/// another thread: relaxed atomic loads and stores, the same plain moves as a `Cell`'s.
pub(super) struct Shared32(AtomicU32);

impl Shared32 {
    pub(super) const fn new(v: u32) -> Self {
        Shared32(AtomicU32::new(v))
    }

    #[inline(always)]
    pub(super) fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(super) fn set(&self, v: u32) {
        self.0.store(v, Ordering::Relaxed)
    }
}

/// A page header, at the start of its 64 KiB page. Blocks of `block_size` bytes follow from
/// `HEADER` on; the first `capacity` of them have been carved (handed out or on a free list),
/// at most `reserved`.
///
/// Invariants (owner-only fields; see the module docs for who the owner is):
/// * `used` = carved blocks − blocks on `free` − blocks taken back from `thread_free`; blocks
///   on `thread_free` still count as used until the owner takes them.
/// * A page is on at most one list: its heap's queue of its class (`heap` untagged), the
///   abandoned list of its class (`abandoned`, `heap` null), its heap's empty cache (`heap`
///   null), or none (full: `heap` tagged [`FULL`](super::FULL); or in the global pool: `heap` null).
#[repr(C, align(128))]
pub struct Page {
    pub(super) free: Cell<*mut Block>,
    pub(super) used: Shared32,
    pub(super) capacity: Cell<u32>,
    pub(super) reserved: Cell<u32>,
    pub(super) block_size: Shared32,
    pub(super) class: Cell<u8>,
    /// On the abandoned list. Changed only under the [`ABANDONED`](super::abandon::ABANDONED) lock (and cleared by
    /// `Page::reset` on a page on no list), but atomic (relaxed): a thread whose free made an
    /// abandoned page empty may still look at it in [`settle_abandoned`](super::abandon::settle_abandoned) after another thread
    /// settled it and a new heap took it over.
    pub(super) abandoned: AtomicBool,
    pub(super) prev: Cell<*mut Page>,
    pub(super) next: Cell<*mut Page>,
    /// The owning heap (tagged [`FULL`](super::FULL) while the page is full), or null while abandoned, cached
    /// empty or in the pool.
    pub(super) heap: AtomicUsize,
    /// Keeps the fields other threads write off the owner's cache line: every remote free
    /// would otherwise take the line the owner's next allocation reads.
    pub(super) _line: [u8; 8],
    /// Blocks freed by other threads: a list through their first word, its length in the top
    /// 16 bits (see [`TF_COUNT_SHIFT`]), so that taking it over needs no walk.
    pub(super) thread_free: AtomicUsize,
    /// While abandoned: frees still needed before the page is empty, as far as other threads'
    /// frees can tell without the lock. Only a hint for when to look (see [`settle_abandoned`](super::abandon::settle_abandoned)).
    pub(super) settle_hint: AtomicU32,
}

const _: () = assert!(
    core::mem::size_of::<Page>() <= HEADER && core::mem::offset_of!(Page, thread_free) == 64
);

// SAFETY: owner-only fields are touched by one thread at a time (see the module docs); the
// shared ones are atomics.
unsafe impl Sync for Page {}

impl Page {
    /// All zero: what a page fresh from the kernel reads as.
    pub(super) const fn empty() -> Self {
        Page {
            free: Cell::new(ptr::null_mut()),
            used: Shared32::new(0),
            capacity: Cell::new(0),
            reserved: Cell::new(0),
            block_size: Shared32::new(0),
            class: Cell::new(0),
            abandoned: AtomicBool::new(false),
            prev: Cell::new(ptr::null_mut()),
            next: Cell::new(ptr::null_mut()),
            heap: AtomicUsize::new(0),
            _line: [0; 8],
            thread_free: AtomicUsize::new(0),
            settle_hint: AtomicU32::new(0),
        }
    }

    /// Makes the header of a page that holds no live block read as [`Page::empty`]'s, field by
    /// field, with atomic stores for the shared fields. Never a whole-struct write: a thread
    /// whose free to an abandoned page was the last may still load `heap` and `abandoned` and
    /// decrement `settle_hint` after another thread settled the page and a new heap took it
    /// (see `free_other`), and those accesses must meet atomic ones. At worst they leave a
    /// wrong hint, which `settle_abandoned` corrects under the lock.
    ///
    /// # Safety
    /// The caller owns the page, which holds no live block and is on no list.
    pub(super) unsafe fn reset(pg: *mut Page) {
        // SAFETY: the caller owns the header's owner-only fields; the others are atomics.
        let p = unsafe { &*pg };
        p.free.set(ptr::null_mut());
        p.used.set(0);
        p.capacity.set(0);
        p.reserved.set(0);
        p.block_size.set(0);
        p.class.set(0);
        p.prev.set(ptr::null_mut());
        p.next.set(ptr::null_mut());
        p.abandoned.store(false, Ordering::Relaxed);
        p.heap.store(0, Ordering::Relaxed);
        p.thread_free.store(0, Ordering::Relaxed);
        p.settle_hint.store(0, Ordering::Relaxed);
    }
}

/// The sentinel every class without a page points at, so the fast path never asks "is there a
/// page?": its free list is always empty, and nothing ever writes to it.
pub(super) static EMPTY_PAGE: Page = Page::empty();

pub(super) fn empty_page() -> *mut Page {
    &EMPTY_PAGE as *const Page as *mut Page
}

/// A doubly linked list of pages through `prev`/`next`.
pub(super) struct PageList {
    pub(super) first: Cell<*mut Page>,
    pub(super) last: Cell<*mut Page>,
}

impl PageList {
    pub(super) const fn new() -> Self {
        PageList {
            first: Cell::new(ptr::null_mut()),
            last: Cell::new(ptr::null_mut()),
        }
    }

    /// # Safety
    /// `p` is a page on no list; the caller owns it and this list.
    pub(super) unsafe fn push_front(&self, p: *mut Page) {
        // SAFETY: the caller owns `p` and this list's pages.
        unsafe {
            (*p).prev.set(ptr::null_mut());
            (*p).next.set(self.first.get());
            match self.first.get().as_ref() {
                Some(f) => f.prev.set(p),
                None => self.last.set(p),
            }
        }
        self.first.set(p);
    }

    /// # Safety
    /// As [`PageList::push_front`].
    pub(super) unsafe fn push_back(&self, p: *mut Page) {
        // SAFETY: as push_front.
        unsafe {
            (*p).next.set(ptr::null_mut());
            (*p).prev.set(self.last.get());
            match self.last.get().as_ref() {
                Some(l) => l.next.set(p),
                None => self.first.set(p),
            }
        }
        self.last.set(p);
    }

    /// # Safety
    /// `p` is on this list; the caller owns it and this list.
    pub(super) unsafe fn remove(&self, p: *mut Page) {
        // SAFETY: the caller owns `p` and its neighbours on this list.
        unsafe {
            let (prev, next) = ((*p).prev.get(), (*p).next.get());
            match prev.as_ref() {
                Some(pr) => pr.next.set(next),
                None => self.first.set(next),
            }
            match next.as_ref() {
                Some(n) => n.prev.set(prev),
                None => self.last.set(prev),
            }
            (*p).prev.set(ptr::null_mut());
            (*p).next.set(ptr::null_mut());
        }
    }
}
