//! Process mode's give-back of the next allocator's free memory. Process mode sends long-lived
//! blocks to the next allocator, so a freed phase of them stays in glibc's heap, which returns
//! memory only from its top. Frees to the next allocator are sampled here, and once enough was
//! freed and not reused, the next allocator is asked to trim (`malloc_trim`), from the next
//! allocation rather than from inside the free.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::real::{self, next_mallinfo2, TrimFn, NEXT_MALLOC_TRIM};

/// Free bytes the next allocator may keep before process mode asks it to trim.
const NEXT_FREE_LIMIT: usize = 32 << 20;

/// Estimated bytes freed to the next allocator so far (sampled, process mode).
static NEXT_FREED: AtomicU64 = AtomicU64::new(0);

/// `NEXT_FREED` and the bytes process mode had sent to the next allocator at the last look.
static LOOKED_FREED: AtomicU64 = AtomicU64::new(0);
static LOOKED_SENT: AtomicU64 = AtomicU64::new(0);

/// Process mode sends long-lived blocks to the next allocator, so a phase of long-lived data is
/// freed into glibc's heap, which returns memory only from its top: a few small blocks above
/// a freed 500 MB phase keep all of it resident.
///
/// One free to the next allocator in 16 (`router::note_next_free`) is measured here
/// (`malloc_usable_size`), and threads add up their estimates in 4 MiB batches. When 32 MiB more
/// have been freed to it than process mode sent it since the last time allocation caught up
/// with the frees, the heap may hold a freed phase: then, and only then, a give-back is asked
/// for ([`give_back`], run when allocation resumes). Steady churn frees what it allocates and
/// never gets there.
#[cold]
#[inline(never)]
pub fn sample_next_free(p: *mut c_void) {
    if real::is_boot(p) || !real::plausible_block(p) {
        return; // the next allocator's `free` reports it
    }
    let bytes = real::usable_size(p) as u64 * resizealloc::region::NEXT_FREE_SAMPLE as u64;
    let Some(batch) = resizealloc::region::add_next_freed(bytes) else {
        return;
    };
    let freed = NEXT_FREED.fetch_add(batch, Ordering::Relaxed) + batch;
    // No `stats()` here (it takes the slot-table lock, which a free between fork's prepare and
    // child handlers would wait on forever): the arenas publish what they send lock-free.
    let sent = resizealloc::arena::bytes_sent_to_next();
    let freed_since = freed.saturating_sub(LOOKED_FREED.load(Ordering::Relaxed));
    let sent_since = sent.saturating_sub(LOOKED_SENT.load(Ordering::Relaxed));
    if freed_since <= sent_since || freed_since - sent_since >= NEXT_FREE_LIMIT as u64 {
        // Allocation caught up with the frees (steady churn: start counting again), or 32 MiB
        // net have been freed since it last did (a phase is ending: look).
        LOOKED_FREED.store(freed, Ordering::Relaxed);
        LOOKED_SENT.store(sent, Ordering::Relaxed);
    }
    if freed_since < sent_since + NEXT_FREE_LIMIT as u64 {
        return;
    }
    // The heap may hold a freed phase. Look and give back at the next allocation instead
    // (`run_pending_give_back`): by then the burst of frees is over and glibc has coalesced
    // its free chunks, so that one `malloc_trim` gives them back in a few `madvise` calls.
    // Trimmed while the frees go on, every look re-walked and every trim re-`madvise`d
    // thousands of fragments (7,484 `madvise` calls for a 250 MB phase freed in random order,
    // 14% of its time). Frees that go on for `RESIZEALLOC_GIVE_BACK_AFTER` more bytes (1 GiB)
    // with no allocation in between give back from here. (At 256 MiB, a 500 MB phase freed in
    // random order gave back halfway through its frees: the trim `madvise`d thousands of
    // fragments, glibc's coalescing then faulted some of them in again, and the phase took
    // 1.13-1.17x glibc's time, against 1.00x when the give-back waited for the next allocation.)
    let asked = GIVE_BACK_ASKED_AT.load(Ordering::Relaxed);
    if asked == 0 {
        GIVE_BACK_ASKED_AT.store(freed, Ordering::Relaxed);
    } else if freed.saturating_sub(asked) >= resizealloc::options::give_back_after() as u64 {
        give_back();
    }
}

/// `NEXT_FREED` when process mode asked for a give-back that has not run yet; 0: none pending.
/// (`NEXT_FREED` is at least 32 MiB by then, never 0.)
static GIVE_BACK_ASKED_AT: AtomicU64 = AtomicU64::new(0);

/// Runs the give-back process mode asked for, if one is pending: called where allocation
/// resumes (the predicted path's general case, which samples and probes reach from every site
/// of a size the arena may serve, and every small request). One relaxed load when none is.
#[inline(always)]
pub fn run_pending_give_back() {
    if give_back_pending() {
        give_back();
    }
}

/// Whether a give-back is pending (one relaxed load).
#[inline(always)]
pub fn give_back_pending() -> bool {
    GIVE_BACK_ASKED_AT.load(Ordering::Relaxed) != 0
}

/// Reads the next allocator's figures (`mallinfo2` walks its free chunks) and, when it holds
/// more than 32 MiB free and more than a quarter of what it has in use (the memory bound's
/// margin: glibc holding that much free is what the heap keeps it from reusing), asks it to
/// give free pages back (`malloc_trim(0)`, which `madvise`s the free chunks inside the heap
/// too).
#[cold]
#[inline(never)]
fn give_back() {
    if GIVE_BACK_ASKED_AT.swap(0, Ordering::AcqRel) == 0 {
        return; // another thread took it
    }
    let m = next_mallinfo2();
    if m.fordblks > NEXT_FREE_LIMIT && m.fordblks > m.uordblks / 4 {
        if let Some(f) = NEXT_MALLOC_TRIM.get() {
            // SAFETY: the next object's `malloc_trim`, which has this signature.
            unsafe { core::mem::transmute::<*mut c_void, TrimFn>(f)(0) };
        }
    }
}
