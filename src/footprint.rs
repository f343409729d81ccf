//! The memory bound: how much resident memory an arena may hold for the blocks it keeps alive.
//!
//! A bump arena reuses memory a granule at a time, so one survivor pins 16 KiB. Left alone,
//! long-tailed lifetimes (a cached result per region, a long-lived table built between
//! temporaries, random-lifetime slots) make almost every granule hold one survivor, and the arena
//! grows without bound. The bound below holds whatever the lifetimes:
//!
//! ```text
//! resident ≤ planned + 5/4 × live + SLACK
//! ```
//!
//! * `resident`: granules the bump pointer has entered since they were last given back to the
//!   kernel (the arena's share of RSS; it keeps an exact count, see `Arena::touched`);
//! * `planned`: the capacity the resize policy planned for the next region (markers mode: the
//!   region's peak, Bumper.jl's contract; process mode: the small initial capacity only);
//! * `live`: the bytes of the arena's live blocks, headers included;
//! * `5/4` ([`FACTOR_NUM`] / [`FACTOR_DEN`]) and [`SLACK`] = 2 MiB per arena: at most a quarter
//!   more than the live bytes,
//!   about the fragmentation a size-class allocator such as glibc's carries.
//!
//! The arena enforces it where resident memory grows: before its bump pointer enters a granule
//! that is not resident. Over the bound it first gives back every free granule (`purge`, at most
//! once per [`PURGE_SPACING`] allowances of allocation); if that leaves less than an eighth of the
//! allowance free, the arena *closes*: it keeps serving from memory it already holds, and every
//! request that would need more goes to the next allocator, until frees bring it back under
//! 7/8 of the allowance. A closed arena costs speed, never memory or correctness.
//!
//! The same allowance decides when freed memory goes back: when frees leave more resident memory
//! than the allowance (a big phase is over), the free granules are discarded at once.

use crate::layout::GRANULE;

/// Resident bytes allowed per live byte, above the plan: `FACTOR_NUM / FACTOR_DEN` = 5/4.
pub const FACTOR_NUM: usize = 5;
pub const FACTOR_DEN: usize = 4;
/// Resident bytes every arena may hold whatever is live (per arena).
pub const SLACK: usize = 2 << 20;

/// How many resident bytes an arena may hold with `live` live bytes and `planned` bytes of
/// planned capacity.
#[inline]
pub fn allowance(planned: usize, live: usize) -> usize {
    planned
        .saturating_add(live.saturating_mul(FACTOR_NUM) / FACTOR_DEN)
        .saturating_add(SLACK)
}

/// Requests from this size on are large for [`holes_allowance`].
pub const LARGE: usize = 1 << 20;

/// Resident bytes process mode's arena may hold beyond [`allowance`] for holes between large
/// blocks, once it has served a request of [`LARGE`] or more: half of `live`. Its laps place a
/// block in the first run of free granules that holds it, so where large blocks of mixed sizes
/// come and go at random, part of the free memory is holes too small for the next one, as in
/// any first-fit or best-fit heap: in equilibrium such a heap has about one hole for every two
/// blocks (Knuth's fifty-percent rule), and glibc's held 1.6x the live bytes on 20 slots of
/// 5-25 MB replaced at random (`bigslots` of `scripts/mem_bench.sh`). Held to less, the arena
/// gives those holes back and faults them in again: with twice the largest block as the room
/// (50 MB at 300 MB live) it took 1.5x glibc's page faults and 1.15-1.3x its time; with half
/// of `live`, 0.95x its page faults, its time, and 1.04x its peak RSS.
#[inline]
pub fn holes_allowance(largest_large: usize, live: usize) -> usize {
    if largest_large == 0 {
        0
    } else {
        live / 2
    }
}

/// True when one more granule keeps the arena within `allowance`.
#[inline]
pub fn may_enter(resident_granules: usize, allowance: usize) -> bool {
    (resident_granules + 1).saturating_mul(GRANULE) <= allowance
}

/// True when `n` more granules keep the arena within `allowance`.
#[inline]
pub fn may_enter_many(resident_granules: usize, n: usize, allowance: usize) -> bool {
    resident_granules.saturating_add(n).saturating_mul(GRANULE) <= allowance
}

/// After a purge the arena stays open only with an eighth of its allowance free, so that the
/// next stop is some growth away (purges are also spaced by [`PURGE_SPACING`]). Memory pinned
/// by long-lived blocks counts; the room left still serves a ring of short-lived ones.
#[inline]
pub fn stays_open(resident_granules: usize, allowance: usize) -> bool {
    resident_granules.saturating_mul(GRANULE) <= allowance / 8 * 7
}

/// A closed arena reopens under the same headroom.
#[inline]
pub fn may_reopen(resident_granules: usize, allowance: usize) -> bool {
    stays_open(resident_granules, allowance)
}

/// Growth stops purge at most once per this many allowances of allocation; in between, a stop
/// closes the arena. Purging costs a scan and, when the memory is used again, page faults: this
/// keeps both amortised below one fault per `PURGE_SPACING` bytes allocated per byte given back.
pub const PURGE_SPACING: u64 = 4;

/// Closed arenas look again after this many requests they turned away (each look is a scan of
/// the arena's granules).
pub const RECHECK_EVERY: u32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_allowance_is_half_of_live_once_a_large_block_was_served() {
        assert_eq!(holes_allowance(0, 1 << 30), 0);
        assert_eq!(holes_allowance(25 << 20, 300 << 20), 150 << 20);
        assert_eq!(holes_allowance(256 << 20, 4 << 20), 2 << 20);
        assert_eq!(holes_allowance(usize::MAX, usize::MAX), usize::MAX / 2);
    }

    #[test]
    fn allowance_is_plan_plus_factor_times_live_plus_slack() {
        assert_eq!(allowance(0, 0), SLACK);
        assert_eq!(allowance(GRANULE, 100), GRANULE + 125 + SLACK);
        assert_eq!(allowance(usize::MAX, 1), usize::MAX);
    }

    #[test]
    fn thresholds_nest() {
        let a = allowance(0, 1 << 20);
        let g = a / GRANULE;
        assert!(may_enter(g - 1, a) && !may_enter(g, a));
        assert!(stays_open(g * 7 / 8 - 1, a) && !stays_open(g * 7 / 8 + 1, a));
        assert!(may_reopen(g * 7 / 8 - 1, a) && !may_reopen(g, a));
    }
}
