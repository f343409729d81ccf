//! The page pool: the one reservation all pages come from, committed a step at a time, and
//! the pages that go back to it (kept warm, or given back to the kernel).
//!
//! The reservation's address space is held in steps too, as the arenas' is (see
//! `reservation.rs`): the first use finds a free range of [`RESERVE`] bytes and keeps
//! [`MAP_STEP`] of it; the rest is mapped in place a step at a time as pages are needed, and
//! when `RLIMIT_AS` falls below what is held, everything past the committed part goes back
//! ([`fit_address_limit`]) and the reservation grows no more.

use core::ptr;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::page::{Page, TF_LIST};
use super::PAGE_SIZE;
use crate::os;

/// Address space reserved for pages (less under `RLIMIT_AS`).
pub const RESERVE: usize = 16 << 30;
/// Bytes committed at a time at the end of the used part of the reservation.
const COMMIT_STEP: usize = 1 << 20;
/// Bytes of address space mapped at a time at the end of the reservation.
const MAP_STEP: usize = 16 << 20;

/// Empty pages the pool keeps resident for the next heap that needs one (see `Pool::warm`):
/// at most 4 MiB.
pub const WARM_PAGES: usize = 64;

/// Empty pages the pool keeps past [`WARM_PAGES`] for the purge delay
/// (`RESIZEALLOC_PURGE_DELAY_MS`), at most 32 MiB in all, as an exited thread's arena keeps its
/// free memory: a thread per request that fills 10 MB of small blocks and exits would
/// otherwise give back all but 4 MiB of them, and the next thread fault the rest in again (100
/// such threads: 151,000 page faults, 3.9x glibc's time).
const WARM_DEFERRED_PAGES: usize = 512;

// ------------------------------------------------------------------------------ the reservation

/// Start of the page reservation; 0 until it exists.
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Its mapped length; 0 until it exists (published last, with Release). Grows a step at a
/// time; shrinks only to what is committed, under a falling `RLIMIT_AS`.
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
    pub(super) warm: [u32; WARM_DEFERRED_PAGES],
    pub(super) n_warm: usize,
    /// When the warm pages past [`WARM_PAGES`] go back (an `os::monotonic_ms` time), 0 while
    /// there are none: set by the first page kept past them, looked at by every page returned
    /// or taken.
    pub(super) warm_until_ms: u64,
    pub(super) init_failed: bool,
    /// Bytes the first reservation found room for: `LEN` grows up to this much.
    pub(super) max_len: usize,
}

pub(super) static POOL: spin::Mutex<Pool> = spin::Mutex::new(Pool {
    fresh: 0,
    committed: 0,
    free_bits: [0; RESERVE / PAGE_SIZE / 64],
    hint: 0,
    warm: [0; WARM_DEFERRED_PAGES],
    warm_until_ms: 0,
    n_warm: 0,
    init_failed: false,
    max_len: 0,
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

/// The committed part of the reservation: `(base, bytes)`, page headers all of it.
pub(super) fn committed_range() -> (usize, usize) {
    let len = COMMITTED.load(Ordering::Acquire);
    (BASE.load(Ordering::Relaxed), len)
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
            // The range is free: keep its first step, map the rest when it is needed.
            let keep = MAP_STEP.min(len);
            // SAFETY: the part of the mapping just made past `keep`, holding nothing.
            unsafe { os::release(base + keep, len - keep) };
            pool.max_len = len;
            crate::mode::watch_slab_frees();
            BASE.store(base, Ordering::Relaxed);
            LEN.store(keep, Ordering::Release);
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
    if pool.n_warm > WARM_PAGES {
        let expired = expire_warm_locked(&mut pool);
        if expired.is_some() {
            drop(pool);
            discard_expired(expired);
            return take_page();
        }
    }
    if pool.n_warm > 0 {
        pool.n_warm -= 1;
        if pool.n_warm <= WARM_PAGES {
            set_warm_until(&mut pool, 0);
        }
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
    let mut len = LEN.load(Ordering::Relaxed);
    let at = pool.fresh * PAGE_SIZE;
    if at + PAGE_SIZE > len {
        if !grow_locked(&mut pool, base, len) {
            return ptr::null_mut();
        }
        len = LEN.load(Ordering::Relaxed);
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

/// Maps the next step of the reservation in place, unless the first reservation had no room
/// for it, it was trimmed, or `RLIMIT_AS` leaves no room (the budget `init_locked` uses).
fn grow_locked(pool: &mut Pool, base: usize, len: usize) -> bool {
    let step = MAP_STEP.min(pool.max_len.saturating_sub(len));
    if step == 0 || os::address_space_budget().is_some_and(|b| len + step > b / 2) {
        return false;
    }
    if !os::reserve_at(base + len, step) {
        pool.max_len = len; // taken by another mapping: the reservation stays as it is
        return false;
    }
    LEN.store(len + step, Ordering::Release);
    true
}

/// Gives back the reservation's address space past its committed part when `RLIMIT_AS` is
/// `limit` (`None`: the limit in force) and the pool holds more than its budget under it;
/// the reservation grows no more afterwards. Called before a limit is lowered (the preload
/// library's `setrlimit` and `prlimit`); a limit lowered otherwise is seen when the next step
/// would be mapped.
pub fn fit_address_limit(limit: Option<u64>) {
    if LEN.load(Ordering::Acquire) == 0 {
        return;
    }
    let Some(budget) = os::address_space_budget_under(limit) else {
        return;
    };
    let mut pool = POOL.lock();
    let len = LEN.load(Ordering::Relaxed);
    if len <= budget / 2 {
        return;
    }
    let base = BASE.load(Ordering::Relaxed);
    // Committed memory stays (its pages may hold blocks); a reservation with nothing committed
    // keeps one page, so that it still exists (`LEN` 0 would mean "not made yet").
    let keep = pool.committed.max(PAGE_SIZE).min(len);
    pool.max_len = keep;
    if keep < len {
        LEN.store(keep, Ordering::Release);
        // SAFETY: past the committed part, holding nothing; `LEN` no longer covers it.
        unsafe { os::release(base + keep, len - keep) };
    }
}

/// Returns a page to the pool: kept warm while there is room (see `Pool::warm`), else its
/// memory goes back to the kernel.
///
/// # Safety
/// The caller owns `p`, which holds no live block and is on no list.
pub(super) unsafe fn return_page(p: *mut Page) {
    let base = BASE.load(Ordering::Relaxed);
    let expired = {
        let mut pool = POOL.lock();
        let expired = expire_warm_locked(&mut pool);
        let n = pool.n_warm;
        let delay = crate::options::purge_delay_ms() as u64;
        if n < WARM_PAGES || (n < WARM_DEFERRED_PAGES && delay > 0) {
            if n >= WARM_PAGES && pool.warm_until_ms == 0 {
                set_warm_until(&mut pool, os::monotonic_ms().saturating_add(delay).max(1));
            }
            pool.warm[n] = ((p as usize - base) / PAGE_SIZE) as u32;
            pool.n_warm = n + 1;
            drop(pool);
            discard_expired(expired);
            return;
        }
        expired
    };
    discard_expired(expired);
    // SAFETY: forwarded obligations.
    unsafe { discard_page(p) };
}

/// [`Pool::warm_until_ms`], mirrored for [`expire_warm_if_due`]'s look without the lock.
static WARM_DUE: AtomicU64 = AtomicU64::new(0);

fn set_warm_until(pool: &mut Pool, at: u64) {
    pool.warm_until_ms = at;
    WARM_DUE.store(at, Ordering::Relaxed);
}

/// Gives back the warm pages past [`WARM_PAGES`] once their purge delay is over: the periodic
/// looks call it, so that a program that goes on allocating from pages it holds (taking and
/// returning none) still gets them back. One load while none wait.
pub fn expire_warm_if_due() {
    let at = WARM_DUE.load(Ordering::Relaxed);
    if at == 0 || os::monotonic_ms() < at {
        return;
    }
    let expired = expire_warm_locked(&mut POOL.lock());
    discard_expired(expired);
}

/// The warm pages past [`WARM_PAGES`] whose purge delay is over, taken off the warm list:
/// `(first index in `warm`, count)` for [`discard_expired`] to give back without the lock.
fn expire_warm_locked(pool: &mut Pool) -> Option<([u32; WARM_DEFERRED_PAGES], usize)> {
    if pool.warm_until_ms == 0 || os::monotonic_ms() < pool.warm_until_ms {
        return None;
    }
    set_warm_until(pool, 0);
    let n = pool.n_warm.saturating_sub(WARM_PAGES);
    if n == 0 {
        return None;
    }
    pool.n_warm = WARM_PAGES;
    let mut out = [0u32; WARM_DEFERRED_PAGES];
    out[..n].copy_from_slice(&pool.warm[WARM_PAGES..WARM_PAGES + n]);
    Some((out, n))
}

/// Gives back the pages [`expire_warm_locked`] took off the warm list.
fn discard_expired(expired: Option<([u32; WARM_DEFERRED_PAGES], usize)>) {
    let Some((pages, n)) = expired else { return };
    let base = BASE.load(Ordering::Relaxed);
    for &i in &pages[..n] {
        // SAFETY: a page taken off the warm list: the pool's alone, empty and on no list.
        unsafe { discard_page((base + i as usize * PAGE_SIZE) as *mut Page) };
    }
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
            if pool.n_warm <= WARM_PAGES {
                set_warm_until(&mut pool, 0);
            }
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
