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

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::os;

/// log2 of the page size.
pub const PAGE_SHIFT: u32 = 16;
/// Bytes per page; pages are aligned to this.
pub const PAGE_SIZE: usize = 1 << PAGE_SHIFT;
/// The page header's size; the first block starts here.
const HEADER: usize = 128;
pub use crate::layout::MAX_SMALL;
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

/// Address space reserved for pages (less under `RLIMIT_AS`).
pub const RESERVE: usize = 16 << 30;
/// Bytes committed at a time at the end of the used part of the reservation.
const COMMIT_STEP: usize = 1 << 20;
/// Empty pages a heap keeps for reuse without giving their memory back.
pub const EMPTY_CACHE: u32 = 4;
/// Empty pages the pool keeps resident for the next heap that needs one (see `Pool::warm`):
/// at most 4 MiB.
pub const WARM_PAGES: usize = 64;
/// Most heaps (threads using the heap at once); a thread beyond them uses the next allocator.
pub const MAX_HEAPS: usize = 1024;

/// Tag in `Page::heap` of a full page: still owned by that heap, on none of its lists.
pub const FULL: usize = 1;

/// `Page::thread_free` keeps the list's length above this bit: the reservation lies below 2^48
/// (checked when it is made) and a page holds fewer than 2^16 blocks.
const TF_COUNT_SHIFT: u32 = 48;
const TF_LIST: usize = (1 << TF_COUNT_SHIFT) - 1;
const _: () = assert!((PAGE_SIZE - HEADER) / 16 < 1 << (usize::BITS - TF_COUNT_SHIFT));

/// A free block: its first word links the free list.
#[repr(C)]
struct Block {
    next: *mut Block,
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
///   null), or none (full: `heap` tagged [`FULL`]; or in the global pool: `heap` null).
#[repr(C, align(128))]
pub struct Page {
    free: Cell<*mut Block>,
    used: Cell<u32>,
    capacity: Cell<u32>,
    reserved: Cell<u32>,
    block_size: Cell<u32>,
    class: Cell<u8>,
    /// On the abandoned list. Changed only under the [`ABANDONED`] lock (and cleared by
    /// `Page::reset` on a page on no list), but atomic (relaxed): a thread whose free made an
    /// abandoned page empty may still look at it in [`settle_abandoned`] after another thread
    /// settled it and a new heap took it over.
    abandoned: AtomicBool,
    prev: Cell<*mut Page>,
    next: Cell<*mut Page>,
    /// The owning heap (tagged [`FULL`] while the page is full), or null while abandoned, cached
    /// empty or in the pool.
    heap: AtomicUsize,
    /// Keeps the fields other threads write off the owner's cache line: every remote free
    /// would otherwise take the line the owner's next allocation reads.
    _line: [u8; 8],
    /// Blocks freed by other threads: a list through their first word, its length in the top
    /// 16 bits (see [`TF_COUNT_SHIFT`]), so that taking it over needs no walk.
    thread_free: AtomicUsize,
    /// While abandoned: frees still needed before the page is empty, as far as other threads'
    /// frees can tell without the lock. Only a hint for when to look (see [`settle_abandoned`]).
    settle_hint: AtomicU32,
}

const _: () = assert!(
    core::mem::size_of::<Page>() <= HEADER && core::mem::offset_of!(Page, thread_free) == 64
);

// SAFETY: owner-only fields are touched by one thread at a time (see the module docs); the
// shared ones are atomics.
unsafe impl Sync for Page {}

impl Page {
    /// All zero: what a page fresh from the kernel reads as.
    const fn empty() -> Self {
        Page {
            free: Cell::new(ptr::null_mut()),
            used: Cell::new(0),
            capacity: Cell::new(0),
            reserved: Cell::new(0),
            block_size: Cell::new(0),
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
    unsafe fn reset(pg: *mut Page) {
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
static EMPTY_PAGE: Page = Page::empty();

fn empty_page() -> *mut Page {
    &EMPTY_PAGE as *const Page as *mut Page
}

/// A doubly linked list of pages through `prev`/`next`.
struct PageList {
    first: Cell<*mut Page>,
    last: Cell<*mut Page>,
}

impl PageList {
    const fn new() -> Self {
        PageList {
            first: Cell::new(ptr::null_mut()),
            last: Cell::new(ptr::null_mut()),
        }
    }

    /// # Safety
    /// `p` is a page on no list; the caller owns it and this list.
    unsafe fn push_front(&self, p: *mut Page) {
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
    unsafe fn push_back(&self, p: *mut Page) {
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
    unsafe fn remove(&self, p: *mut Page) {
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

/// Blocks the owner freed most recently, per class, handed out again first: their memory is
/// still in the cache, where a page's free list would hand out whichever block of the current
/// page was freed longest ago (the load of its link then misses). For their pages the blocks
/// stay in use (`Page::used` counts them), so a cached block is simply one allocated and not yet
/// handed out: it may belong to a page that has since changed hands, and it goes back through
/// [`free`]'s general path when the cache is flushed.
struct BlockCache {
    head: Cell<*mut Block>,
    count: Cell<u32>,
    /// At most this many blocks (about [`CACHE_BYTES`] of them).
    limit: Cell<u32>,
}

/// Bytes of blocks one class's `BlockCache` holds at most (at least 4 blocks, at most 64).
pub const CACHE_BYTES: usize = 8 << 10;

/// One thread's heap, in a static table (so its address, which full pages carry, stays a heap's).
///
/// Invariant: `current[c]` is the first page of `queues[c]`, or `EMPTY_PAGE` when that queue
/// is empty.
pub struct Heap {
    cache: [BlockCache; CLASSES],
    current: [Cell<*mut Page>; CLASSES],
    queues: [PageList; CLASSES],
    /// Empty pages kept for reuse (linked through `next`).
    empty: Cell<*mut Page>,
    empty_count: Cell<u32>,
}

// SAFETY: a heap is touched only by its thread, and by the next thread to take it from the table
// after that one abandoned it (ordered by the table's lock).
unsafe impl Sync for Heap {}

impl Heap {
    const fn new() -> Self {
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

    fn as_ptr(&self) -> *mut Heap {
        self as *const Heap as *mut Heap
    }
}

struct HeapTable {
    heaps: [Heap; MAX_HEAPS],
}

static HEAPS: HeapTable = HeapTable {
    heaps: [const { Heap::new() }; MAX_HEAPS],
};
/// Bit `i` set: heap `i` belongs to a live thread.
static HEAP_USED: spin::Mutex<[u64; MAX_HEAPS / 64]> = spin::Mutex::new([0; MAX_HEAPS / 64]);

/// Abandoned pages with free room and live blocks, one list per class.
struct Abandoned {
    lists: [PageList; CLASSES],
}

// SAFETY: only reached through the `ABANDONED` mutex.
unsafe impl Send for Abandoned {}

static ABANDONED: spin::Mutex<Abandoned> = spin::Mutex::new(Abandoned {
    lists: [const { PageList::new() }; CLASSES],
});

// ------------------------------------------------------------------------------ the reservation

/// Start of the page reservation; 0 until it exists.
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Its length; 0 until it exists (published last, with Release).
static LEN: AtomicUsize = AtomicUsize::new(0);

/// Pages by index: which are free (their memory given back) and how far the reservation is used.
struct Pool {
    /// Pages handed out from the start of the reservation so far (free or not).
    fresh: usize,
    /// Bytes made readable and writable from the start of the reservation.
    committed: usize,
    /// Bit `i` set: page `i` (below `fresh`) is free, and its memory was given back.
    free_bits: [u64; RESERVE / PAGE_SIZE / 64],
    /// No word below this one has a set bit.
    hint: usize,
    /// Empty pages kept resident for the next page request, `warm[..n_warm]` (page indexes):
    /// a heap's pages go back when its thread exits, and a program that starts short threads
    /// one after another then faulted a page of every class it uses in every thread (the
    /// memory suite's `threads`, two threads at a time: 2,115 page faults, 1.13x glibc's time;
    /// with 64 warm pages 254 and 0.9-1.0x). Counted in `PAGES_IN_USE`; `trim_warm` gives them
    /// back.
    warm: [u32; WARM_PAGES],
    n_warm: usize,
    init_failed: bool,
}

static POOL: spin::Mutex<Pool> = spin::Mutex::new(Pool {
    fresh: 0,
    committed: 0,
    free_bits: [0; RESERVE / PAGE_SIZE / 64],
    hint: 0,
    warm: [0; WARM_PAGES],
    n_warm: 0,
    init_failed: false,
});

/// Figures for `stats`.
static PAGES_IN_USE: AtomicU64 = AtomicU64::new(0);
static PAGES_RETURNED: AtomicU64 = AtomicU64::new(0);
static PAGES_ADOPTED: AtomicU64 = AtomicU64::new(0);

/// True when `p` lies in the page reservation: one subtraction and one compare. (`LEN` first,
/// with Acquire, as in `reservation::owns`.)
#[inline(always)]
pub fn owns(p: *const u8) -> bool {
    let len = LEN.load(Ordering::Acquire);
    (p as usize).wrapping_sub(BASE.load(Ordering::Relaxed)) < len
}

#[inline(always)]
fn page_of(p: *const u8) -> *mut Page {
    (p as usize & !(PAGE_SIZE - 1)) as *mut Page
}

/// Called with the pool locked: makes the reservation on first use.
fn init_locked(pool: &mut Pool) -> bool {
    if LEN.load(Ordering::Relaxed) != 0 {
        return true;
    }
    if pool.init_failed {
        return false;
    }
    let mut len = RESERVE;
    if let Some(budget) = os::address_space_budget() {
        len = len.min(budget / 2) & !(PAGE_SIZE - 1);
    }
    while len >= 16 * PAGE_SIZE {
        if let Some(base) = os::reserve_aligned(len, PAGE_SIZE) {
            if base + len > TF_LIST {
                // Above 2^48 (5-level paging): `thread_free` could not hold its length.
                // SAFETY: the mapping just made, holding nothing.
                unsafe { os::release(base, len) };
                break;
            }
            crate::mode::watch_slab_frees();
            BASE.store(base, Ordering::Relaxed);
            LEN.store(len, Ordering::Release);
            return true;
        }
        len /= 2;
    }
    pool.init_failed = true;
    false
}

/// Takes a page from the pool: a warm one (old contents: the caller writes its header), a
/// given-back one, or the next fresh one. Null when the reservation is exhausted or the kernel
/// refuses the commit.
#[cold]
#[inline(never)]
fn take_page() -> *mut Page {
    let mut pool = POOL.lock();
    if !init_locked(&mut pool) {
        return ptr::null_mut();
    }
    let base = BASE.load(Ordering::Relaxed);
    if pool.n_warm > 0 {
        pool.n_warm -= 1;
        // Still counted in use (see `Pool::warm`).
        return (base + pool.warm[pool.n_warm] as usize * PAGE_SIZE) as *mut Page;
    }
    let words = pool.fresh.div_ceil(64);
    let mut w = pool.hint;
    while w < words {
        let bits = pool.free_bits[w];
        if bits != 0 {
            let i = w * 64 + bits.trailing_zeros() as usize;
            pool.free_bits[w] &= bits - 1;
            pool.hint = w;
            PAGES_IN_USE.fetch_add(1, Ordering::Relaxed);
            return (base + i * PAGE_SIZE) as *mut Page;
        }
        w += 1;
    }
    pool.hint = words;
    let len = LEN.load(Ordering::Relaxed);
    let at = pool.fresh * PAGE_SIZE;
    if at + PAGE_SIZE > len {
        return ptr::null_mut();
    }
    if at + PAGE_SIZE > pool.committed {
        let step = COMMIT_STEP.min(len - pool.committed);
        // SAFETY: a page-aligned range inside our reservation, beyond anything handed out.
        if !unsafe { os::commit(base + pool.committed, step) } {
            return ptr::null_mut();
        }
        pool.committed += step;
    }
    pool.fresh += 1;
    PAGES_IN_USE.fetch_add(1, Ordering::Relaxed);
    (base + at) as *mut Page
}

/// Returns a page to the pool: kept warm while there is room (see `Pool::warm`), else its
/// memory goes back to the kernel.
///
/// # Safety
/// The caller owns `p`, which holds no live block and is on no list.
unsafe fn return_page(p: *mut Page) {
    let base = BASE.load(Ordering::Relaxed);
    {
        let mut pool = POOL.lock();
        if pool.n_warm < WARM_PAGES {
            let n = pool.n_warm;
            pool.warm[n] = ((p as usize - base) / PAGE_SIZE) as u32;
            pool.n_warm = n + 1;
            return;
        }
    }
    // SAFETY: forwarded obligations.
    unsafe { discard_page(p) };
}

/// Gives back every warm page (`malloc_trim`, `resizealloc::trim`).
pub fn trim_warm() {
    let base = BASE.load(Ordering::Relaxed);
    loop {
        let i = {
            let mut pool = POOL.lock();
            if pool.n_warm == 0 {
                return;
            }
            pool.n_warm -= 1;
            pool.warm[pool.n_warm] as usize
        };
        // SAFETY: a warm page is the pool's alone: empty and on no list.
        unsafe { discard_page((base + i * PAGE_SIZE) as *mut Page) };
    }
}

/// Gives a page's memory back to the kernel and marks it free in the pool.
///
/// # Safety
/// As [`return_page`].
unsafe fn discard_page(p: *mut Page) {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: the page is ours and holds nothing live (caller's obligation).
    if !unsafe { os::discard(p as usize, PAGE_SIZE) } {
        // Locked memory keeps its contents: make the header read as a fresh page's.
        // SAFETY: as above.
        unsafe { Page::reset(p) };
    }
    let i = (p as usize - base) / PAGE_SIZE;
    let mut pool = POOL.lock();
    pool.free_bits[i / 64] |= 1 << (i % 64);
    pool.hint = pool.hint.min(i / 64);
    PAGES_IN_USE.fetch_sub(1, Ordering::Relaxed);
    PAGES_RETURNED.fetch_add(1, Ordering::Relaxed);
}

// ------------------------------------------------------------------------------ heaps

/// Takes a free heap from the table for the calling thread; null when all are taken.
/// The caller keeps it in the thread's state and calls [`abandon`] when the thread exits.
#[cold]
#[inline(never)]
pub(crate) fn acquire_heap() -> *mut Heap {
    let mut used = HEAP_USED.lock();
    for (w, bits) in used.iter_mut().enumerate() {
        if *bits != u64::MAX {
            let b = (!*bits).trailing_zeros() as usize;
            *bits |= 1 << b;
            let h = &HEAPS.heaps[w * 64 + b];
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
unsafe fn collect(pg: *mut Page) -> u32 {
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
unsafe fn collect_when_free_is_empty(pg: *mut Page) {
    // SAFETY: the caller owns the page.
    unsafe {
        if (*pg).free.get().is_null() {
            collect(pg);
        }
    }
}

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
fn double_free() -> ! {
    os::fatal(b"resizealloc: free(): block freed twice or not allocated (small heap)\n")
}

/// Frees `p`. Any thread may call it for any live block.
///
/// # Safety
/// `owns(p)` and `p` is a live block (not freed since it was handed out); `heap` is the
/// calling thread's heap or null.
#[inline(always)]
pub unsafe fn free(heap: *mut Heap, p: *mut u8) {
    let pg = page_of(p);
    let b = p as *mut Block;
    // SAFETY: a live block's page is in use, so its header stays mapped; the owner check
    // decides who may touch the owner-only fields.
    unsafe {
        let owner = (*pg).heap.load(Ordering::Relaxed);
        if !heap.is_null() && owner & !FULL == heap as usize {
            // Our page (full or not): into the block cache while it has room. (A page of ours
            // has a valid class; a pointer that is not a block may not, and must not index.)
            let class = (*pg).class.get() as usize;
            if class >= CLASSES {
                double_free();
            }
            let tc = &(*heap).cache[class];
            let n = tc.count.get();
            if n < tc.limit.get() {
                if tc.head.get() == b {
                    double_free(); // the block just freed, freed again (the common double free)
                }
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
        if (*pg).free.get() == b {
            double_free(); // the block just freed, freed again (the common double free)
        }
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
unsafe fn flush_cache(heap: *mut Heap) {
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

/// Puts a page that the lock holder owns (and whose `heap` is null) on the abandoned list of its
/// class, or gives it back when nothing in it is live.
///
/// # Safety
/// The caller holds the lock (`ab`) and owns `pg`, which is on no list.
unsafe fn park_abandoned(ab: &Abandoned, pg: *mut Page) {
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
fn settle_abandoned(pg: *mut Page) {
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
unsafe fn adopt(heap: *mut Heap, class: usize) -> *mut Page {
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
pub fn fork_prepare() {
    core::mem::forget(HEAP_USED.lock());
    core::mem::forget(ABANDONED.lock());
    core::mem::forget(POOL.lock());
}

/// Fork support: the parent and the child both release the locks taken in [`fork_prepare`].
///
/// # Safety
/// Called once after [`fork_prepare`], by the thread that called it (or its copy in the child).
pub unsafe fn fork_finish() {
    // SAFETY: the caller's obligation: the locks are held by our own `fork_prepare`.
    unsafe {
        POOL.force_unlock();
        ABANDONED.force_unlock();
        HEAP_USED.force_unlock();
    }
}

/// Usable size of a block.
///
/// # Safety
/// `owns(p)` and `p` is a live block.
pub unsafe fn usable_size(p: *const u8) -> usize {
    // SAFETY: a live block's page header is mapped; `block_size` does not change while the page
    // has live blocks.
    unsafe { (*page_of(p)).block_size.get() as usize }
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
