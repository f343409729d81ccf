//! Lifetime prediction by allocation site: which allocations are short-lived enough for a bump
//! arena, learned from what survives.
//!
//! In process mode the program has marked nothing, so the allocator has to find out which
//! allocations die young. The allocation site (the return address of `malloc`) together with the
//! size class predicts it well (Barrett & Zorn, PLDI 1993; LLAMA, ASPLOS 2020): a site that
//! builds a long-lived table keeps doing so, a site that makes temporaries keeps making them.
//!
//! * **Table.** One score per `(site, size class)` hash, shared by all threads (4096 bytes).
//!   Score 0 means "short-lived" (the arena serves it); at [`LONG`] or above the site is routed to
//!   the next allocator, which reuses holes. Reads and writes are relaxed: a lost update only
//!   delays learning.
//! * **Evidence.** One allocation in [`SAMPLE_EVERY`] (at random gaps) is *sampled*: its header records its site and
//!   its birth on the arena's allocation clock (bytes allocated since the arena started; a region
//!   end counts as a whole lap). A sampled block freed within a lap of the arena is short
//!   evidence; one freed later, or found still alive a lap after its birth by the arena's
//!   survivor sweep, is long evidence. A block that outlives the lap pins its granule when the
//!   bump pointer comes round again: exactly what the arena cannot afford.
//! * **Asymmetry.** One long-lived block in a granule pins it, so long evidence counts far more
//!   than short: it sets the score to [`MAX`], and only [`MAX`] − [`LONG`] + 1 weighted short
//!   samples bring the site back.
//! * **Probes.** A site routed away sends one allocation in [`PROBE_EVERY`] to the arena anyway,
//!   sampled, so that a site whose behaviour changes is learned again. Each probe that turns out
//!   long-lived doubles the site's interval, up to [`PROBE_EVERY`] × 2^[`PROBE_BACKOFF_MAX`]: a
//!   probe that lives long pins a granule, and a loader's table would otherwise pin one per
//!   [`PROBE_EVERY`] records.
//!
//! Requests of 1 MiB or more are not predicted (see `LARGE_STAYS` in arena/predict.rs): they stay
//! in the arena.
//!
//! A wrong guess costs memory (bounded by footprint.rs) or speed, never correctness: every block
//! is freed to whoever served it, whatever the table says by then.
//!
//! **Where it applies.** Always in process mode. Inside explicit regions the markers keep their
//! meaning and the arena's fast path stays a bare bump: an arena turns prediction on for its
//! regions only once regions keep leaving blocks behind (escapes), and turns it off again after
//! a run of regions that leave nothing (see `Arena::reset`), and only where the front end
//! passes allocation sites ([`sites_known`]).

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// log2 of the number of table entries.
pub const SITE_BITS: u32 = 12;
const SITES: usize = 1 << SITE_BITS;
/// Scores at or above this route the site to the next allocator.
pub const LONG: u8 = 128;
/// The score long evidence sets.
pub const MAX: u8 = 255;
/// One allocation in this many is sampled.
pub const SAMPLE_EVERY: u32 = 8;
/// A site routed away sends one allocation in this many to the arena as a probe.
pub const PROBE_EVERY: u32 = 256;
/// Probe intervals double at most this many times.
pub const PROBE_BACKOFF_MAX: u8 = 4;
/// Short evidence from a probe weighs this many ordinary samples (it stands for
/// `PROBE_EVERY` allocations that went elsewhere).
pub const PROBE_WEIGHT: u8 = 8;

static SCORES: [AtomicU8; SITES] = [const { AtomicU8::new(0) }; SITES];
/// Per site: how many times its probe interval has doubled.
static PROBE_BACKOFF: [AtomicU8; SITES] = [const { AtomicU8::new(0) }; SITES];
static BECAME_LONG: AtomicU64 = AtomicU64::new(0);
static BECAME_SHORT: AtomicU64 = AtomicU64::new(0);

/// Whether the front end passes allocation sites: the preload library's entry points do (the
/// return address of `malloc`); a Rust `GlobalAlloc` cannot see its caller, so `ResizeAlloc`
/// passes 0 for every request.
static SITES_KNOWN: AtomicBool = AtomicBool::new(false);

/// Says that the front end passes allocation sites (the preload library, at load time).
pub fn set_sites_known() {
    SITES_KNOWN.store(true, Ordering::Relaxed);
}

/// True when allocation sites are known. Regions predict only then: with every site 0 the
/// table tells blocks apart by size class alone, and a class that a few escaped blocks made
/// long sends every temporary of that class to the next allocator, through the predictor's
/// slow path (a Rust cache filled from inside requests would run 1.3x slower, and 1.25x with
/// `ResizeAlloc::wrap(MiMalloc)`); without prediction the arena steps over the granules the
/// escapes pin, under the memory bound (footprint.rs).
#[inline]
pub fn sites_known() -> bool {
    SITES_KNOWN.load(Ordering::Relaxed)
}

/// The table entry of an allocation site (`site`: the caller's return address, or 0 when the
/// front end cannot see it) and a request size.
#[inline(always)]
pub fn key(site: usize, size: usize) -> u32 {
    let class = (usize::BITS - size.leading_zeros()) as usize;
    let h = (site ^ class.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (h >> (usize::BITS - SITE_BITS)) as u32
}

/// True when the site's blocks should go to the next allocator.
#[inline(always)]
pub fn predicts_long(key: u32) -> bool {
    SCORES[key as usize & (SITES - 1)].load(Ordering::Relaxed) >= LONG
}

/// Allocations of a long site between two probes.
#[inline]
pub fn probe_interval(key: u32) -> u32 {
    PROBE_EVERY << PROBE_BACKOFF[key as usize & (SITES - 1)].load(Ordering::Relaxed)
}

/// A sampled block of this site outlived the arena's lap; `probe` when it was a probe.
pub fn learn_long(key: u32, probe: bool) {
    let k = key as usize & (SITES - 1);
    if SCORES[k].swap(MAX, Ordering::Relaxed) < LONG {
        BECAME_LONG.fetch_add(1, Ordering::Relaxed);
    }
    if probe {
        let b = PROBE_BACKOFF[k].load(Ordering::Relaxed);
        if b < PROBE_BACKOFF_MAX {
            PROBE_BACKOFF[k].store(b + 1, Ordering::Relaxed);
        }
    }
}

/// A sampled block of this site died within the arena's lap; `weight` samples' worth.
pub fn learn_short(key: u32, weight: u8) {
    let s = &SCORES[key as usize & (SITES - 1)];
    let old = s.load(Ordering::Relaxed);
    if old == 0 {
        return;
    }
    let new = old.saturating_sub(weight);
    s.store(new, Ordering::Relaxed);
    if old >= LONG && new < LONG {
        BECAME_SHORT.fetch_add(1, Ordering::Relaxed);
        PROBE_BACKOFF[key as usize & (SITES - 1)].store(0, Ordering::Relaxed);
    }
}

/// `(times a site was learned long, times a site was learned short again, sites long now)`.
pub fn counts() -> (u64, u64, u64) {
    let now = SCORES
        .iter()
        .filter(|s| s.load(Ordering::Relaxed) >= LONG)
        .count() as u64;
    (
        BECAME_LONG.load(Ordering::Relaxed),
        BECAME_SHORT.load(Ordering::Relaxed),
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_evidence_outweighs_short() {
        let k = key(0x1234_5678, 100);
        assert!(!predicts_long(k));
        learn_long(k, false);
        assert!(predicts_long(k));
        for _ in 0..(MAX - LONG) {
            learn_short(k, 1);
        }
        assert!(
            predicts_long(k),
            "one short sample per point, MAX - LONG points still long"
        );
        learn_short(k, 1);
        assert!(!predicts_long(k));
    }

    #[test]
    fn long_probes_back_off_and_a_short_site_starts_over() {
        let k = key(0x7777_0000, 64);
        assert_eq!(probe_interval(k), PROBE_EVERY);
        for i in 1..=PROBE_BACKOFF_MAX as u32 + 2 {
            learn_long(k, true);
            let want = PROBE_EVERY << i.min(PROBE_BACKOFF_MAX as u32);
            assert_eq!(probe_interval(k), want);
        }
        for _ in 0..=(MAX - LONG) {
            learn_short(k, 1);
        }
        assert!(!predicts_long(k));
        assert_eq!(probe_interval(k), PROBE_EVERY);
    }

    #[test]
    fn size_class_separates_one_site() {
        assert_ne!(key(0x4000_1000, 16), key(0x4000_1000, 1 << 20));
        assert_eq!(key(0x4000_1000, 17), key(0x4000_1000, 31));
    }
}
