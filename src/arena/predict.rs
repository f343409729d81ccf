//! Predicted allocation (process mode and arenas that predict for their regions): each request
//! goes to the arena, the small-block heap or the next allocator by its site's predicted
//! lifetime (see `lifetime.rs`).

use core::ptr;
use core::sync::atomic::{AtomicU64, Ordering};

use super::sample::clock_bytes;
use super::Arena;
use crate::layout::{LINE_ALIGN_FROM, MAX_SMALL, MIN_ALIGN};
use crate::lifetime;

/// Requests from this size on stay in the arena whatever their site's lifetime: a long-lived
/// large block pins at most the two granules at its ends (under 2 % of its size at 1 MiB), so
/// prediction buys nothing for it, while the next allocator's path for it (`mmap`, page faults,
/// `munmap`) is the slowest there is. (A Python job with 40 MiB and 4 MiB temporaries that
/// live longer than a lap kept 40 MiB more resident when some of them went to glibc and some
/// stayed in the arena.)
const LARGE_STAYS: usize = 1 << 20;

/// What the predictor's fast path ([`Arena::try_alloc_predicted_fast`]) decided.
#[derive(Clone, Copy)]
pub enum Predicted {
    /// A block from the arena.
    Block(*mut u8),
    /// A long site's request: the next allocator serves it.
    Next,
    /// A small request in process mode (an arena that recycles, a size up to
    /// [`MAX_SMALL`]), whatever its site: the small-block heap serves it (or, when it has no
    /// memory, the next allocator). See `Arena::small_heap_takes`.
    Small,
    /// Neither: take [`Arena::alloc_predicted_general`], which decides from scratch.
    General,
}

/// Bytes the arenas sent to the next allocator (predicted long, or turned away by the bound),
/// process-wide, for the front end's look at the next allocator's heap. Arenas add in batches
/// of `SENT_BATCH` so that the shared counter is rarely written.
static SENT_TO_NEXT: AtomicU64 = AtomicU64::new(0);
const SENT_BATCH: u64 = 1 << 20;

/// Bytes the arenas have sent to the next allocator so far (published in 1 MiB batches). Takes
/// no lock and allocates nothing: the malloc front end may call it from `free`.
pub fn bytes_sent_to_next() -> u64 {
    SENT_TO_NEXT.load(Ordering::Relaxed)
}

impl Arena {
    /// Allocates for `site` (the caller's return address, or 0) through the lifetime predictor:
    /// null when the site is predicted long-lived (the next allocator serves it) or the arena
    /// declines. Samples one allocation in `SAMPLE_EVERY`, and probes long sites.
    ///
    /// `on_look` runs at each periodic look ([`Arena::periodic_look`]): the work the layer above
    /// does at the same pace (the router passes `reservation::expire_unowned_if_due`). A function
    /// item, so it costs no load and no call of its own.
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    #[inline(always)]
    pub unsafe fn alloc_predicted(
        &self,
        size: usize,
        align: usize,
        site: usize,
        zeroed: bool,
        on_look: impl FnOnce(),
    ) -> *mut u8 {
        // SAFETY: forwarded obligations.
        match unsafe { self.try_alloc_predicted_fast(size, align, site, zeroed) } {
            Predicted::Block(p) => return p,
            Predicted::Next | Predicted::Small => return ptr::null_mut(),
            Predicted::General => {}
        }
        // SAFETY: forwarded obligations.
        unsafe { self.alloc_predicted_general(size, align, site, zeroed, on_look) }
    }

    /// The common cases of [`Arena::alloc_predicted`], calling nothing, when no sweep and no
    /// periodic look is due: a small request goes to the small-block heap in process mode, a
    /// long site's request to the next allocator (but for its probes), and a short site's block
    /// under a page comes from the run (unless it is sampled, or `zeroed`: `calloc` takes the
    /// general path, which knows what needs clearing). Anything else is [`Predicted::General`],
    /// having changed nothing but the count to the next periodic look: the caller then takes the
    /// general path, which decides from scratch.
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    #[inline(always)]
    pub unsafe fn try_alloc_predicted_fast(
        &self,
        size: usize,
        align: usize,
        site: usize,
        zeroed: bool,
    ) -> Predicted {
        let looks_in = self.look_countdown.get();
        if looks_in <= 1 {
            return Predicted::General; // a periodic look is due
        }
        self.look_countdown.set(looks_in - 1);
        if self.small_heap_takes(size) {
            // Not on the allocation clock: small blocks never share the arena's laps, so bytes
            // of them between a block's birth and death say nothing about what it pins.
            return Predicted::Small;
        }
        let clock = self.alloc_clock.get() + clock_bytes(size);
        if clock >= self.next_sweep.get() {
            return Predicted::General;
        }
        if size < LARGE_STAYS && lifetime::predicts_long(lifetime::key(site, size)) {
            let n = self.probe_countdown.get();
            if n <= 1 {
                return Predicted::General; // a probe
            }
            self.alloc_clock.set(clock);
            self.probe_countdown.set(n - 1);
            self.bytes_routed_away.add(size as u64);
            self.note_sent_to_next(size);
            return Predicted::Next;
        }
        let countdown = self.sample_countdown.get();
        if zeroed || countdown <= 1 || size >= LINE_ALIGN_FROM || align > MIN_ALIGN {
            return Predicted::General;
        }
        // SAFETY: forwarded obligations; a small block with the usual alignment, so this is the
        // inlined path of `try_alloc_fast`.
        let p = unsafe { self.try_alloc_fast(size, align) };
        if p.is_null() {
            return Predicted::General;
        }
        self.alloc_clock.set(clock);
        self.sample_countdown.set(countdown - 1);
        Predicted::Block(p)
    }

    /// [`Arena::alloc_predicted`] in full: the clock and the sweep, long sites and their probes,
    /// sampling, and the slow path. `on_look` as there.
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    #[inline(never)]
    pub unsafe fn alloc_predicted_general(
        &self,
        size: usize,
        align: usize,
        site: usize,
        zeroed: bool,
        on_look: impl FnOnce(),
    ) -> *mut u8 {
        if self.look_countdown.get() <= 1 {
            self.periodic_look(on_look);
        }
        if self.small_heap_takes(size) {
            return ptr::null_mut(); // the small-block heap's (see `try_alloc_predicted_fast`)
        }
        let key = lifetime::key(site, size);
        // The clock counts every request of a size the arena may serve, wherever the predictor
        // sends it: ages are in bytes the program allocated, not bytes the arena served.
        self.alloc_clock.add(clock_bytes(size));
        if self.alloc_clock.get() >= self.next_sweep.get() {
            // Here, not only when sampling: a closed arena samples nothing, and its survivors
            // are exactly the evidence it needs.
            self.sweep();
        }
        let mut probe = false;
        if size < LARGE_STAYS && lifetime::predicts_long(key) {
            let n = self.probe_countdown.get();
            if n > 1 {
                self.probe_countdown.set(n - 1);
                self.bytes_routed_away.add(size as u64);
                self.note_sent_to_next(size);
                return ptr::null_mut();
            }
            self.probe_countdown.set(lifetime::probe_interval(key));
            probe = true;
        }
        // SAFETY: forwarded obligations.
        let p = unsafe {
            if zeroed {
                self.alloc_zeroed(size, align)
            } else {
                self.alloc(size, align)
            }
        };
        if p.is_null() {
            return p;
        }
        let n = self.sample_countdown.get();
        if probe || n <= 1 {
            if !probe {
                self.sample_countdown.set(self.next_sample_gap());
            }
            self.sample(p as usize, size, key, probe);
        } else {
            self.sample_countdown.set(n - 1);
        }
        p
    }

    /// Process mode sends every small request to the small-block heap
    /// (`router::alloc_routed_away`, [`Predicted::Small`]), short-lived or not, and the
    /// predictor decides only for larger ones. A free list reuses the block freed last, still
    /// in the cache, where a bump arena walks its whole lap (192 KiB for a window of 32
    /// temporaries of up to 1 KiB freed in random order, one L1 miss per allocation): such a
    /// thread ran at half glibc's speed in the arena and at 1.3x through the heap, which also
    /// skips the predictor's work and holds less memory (`scripts/mem_bench.sh`).
    #[inline(always)]
    fn small_heap_takes(&self, size: usize) -> bool {
        self.recycle && size <= MAX_SMALL
    }

    /// Counts `size` bytes sent to the next allocator, published process-wide in batches. A
    /// request the small-block heap takes is not counted: counted, the heap's allocations made
    /// a freed glibc phase look reused, and it was never given back.
    #[inline]
    pub(super) fn note_sent_to_next(&self, size: usize) {
        if self.small_heap_takes(size) {
            return;
        }
        let n = self.sent_unpublished.get() + size as u64;
        if n >= SENT_BATCH {
            SENT_TO_NEXT.fetch_add(n, Ordering::Relaxed);
            self.sent_unpublished.set(0);
        } else {
            self.sent_unpublished.set(n);
        }
    }

    /// Markers mode: whether this arena's regions allocate through the predictor.
    pub fn predicting(&self) -> bool {
        self.predicting.get()
    }
}
