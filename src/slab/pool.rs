//! The page pool: the one reservation all pages come from, committed a step at a time, and
//! the pages that go back to it (kept warm, or given back to the kernel).

use core::ptr;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::page::{Page, TF_LIST};
use super::PAGE_SIZE;
use crate::os;

/// Address space reserved for pages (less under `RLIMIT_AS`).
pub const RESERVE: usize = 16 << 30;
/// Bytes committed at a time at the end of the used part of the reservation.
const COMMIT_STEP: usize = 1 << 20;

/// Empty pages the pool keeps resident for the next heap that needs one (see `Pool::warm`):
/// at most 4 MiB.
pub const WARM_PAGES: usize = 64;

// ------------------------------------------------------------------------------ the reservation

/// Start of the page reservation; 0 until it exists.
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Its length; 0 until it exists (published last, with Release).
static LEN: AtomicUsize = AtomicUsize::new(0);
/// Bytes committed from its start (`Pool::committed`, for readers without the lock).
static COMMITTED: AtomicUsize = AtomicUsize::new(0);

/// Pages by index: which are free (their memory given back) and how far the reservation is used.
pub(super) struct Pool {
    /// Pages handed out from the start of the reservation so far (free or not).
    pub(super) fresh: usize,
    /// Bytes made readable and writable from the start of the reservation.
    pub(super) committed: usize,
    /// Bit `i` set: page `i` (below `fresh`) is free, and its memory was given back.
    pub(super) free_bits: [u64; RESERVE / PAGE_SIZE / 64],
    /// No word below this one has a set bit.
    pub(super) hint: usize,
    /// Empty pages kept resident for the next page request, `warm[..n_warm]` (page indexes):
    /// a heap's pages go back when its thread exits, and a program that starts short threads
    /// one after another then faulted a page of every class it uses in every thread (the
    /// memory suite's `threads`, two threads at a time: 2,115 page faults, 1.13x glibc's time;
    /// with 64 warm pages 254 and 0.9-1.0x). Counted in `PAGES_IN_USE`; `trim_warm` gives them
    /// back.
    pub(super) warm: [u32; WARM_PAGES],
    pub(super) n_warm: usize,
    pub(super) init_failed: bool,
}

pub(super) static POOL: spin::Mutex<Pool> = spin::Mutex::new(Pool {
    fresh: 0,
    committed: 0,
    free_bits: [0; RESERVE / PAGE_SIZE / 64],
    hint: 0,
    warm: [0; WARM_PAGES],
    n_warm: 0,
    init_failed: false,
});

/// Figures for `stats`.
pub(super) static PAGES_IN_USE: AtomicU64 = AtomicU64::new(0);
pub(super) static PAGES_RETURNED: AtomicU64 = AtomicU64::new(0);
pub(super) static PAGES_ADOPTED: AtomicU64 = AtomicU64::new(0);

/// True when `p` lies in the page reservation: one subtraction and one compare. (`LEN` first,
/// with Acquire, as in `reservation::owns`.)
#[inline(always)]
pub fn owns(p: *const u8) -> bool {
    let len = LEN.load(Ordering::Acquire);
    (p as usize).wrapping_sub(BASE.load(Ordering::Relaxed)) < len
}

/// True when `p` lies in the committed part of the reservation, where a page header reads as
/// one (zero for a page never used).
pub(super) fn committed(p: *const u8) -> bool {
    (p as usize).wrapping_sub(BASE.load(Ordering::Relaxed)) < COMMITTED.load(Ordering::Acquire)
}

#[inline(always)]
pub(super) fn page_of(p: *const u8) -> *mut Page {
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
pub(super) fn take_page() -> *mut Page {
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
        COMMITTED.store(pool.committed, Ordering::Release);
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
pub(super) unsafe fn return_page(p: *mut Page) {
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
