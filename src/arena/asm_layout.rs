//! What the assembly entry points of `malloc` and `free` (preload/src/entry_x86_64.rs, x86-64 Linux)
//! need to run the commonest paths inline: the byte offsets of the owner-only words of
//! [`Arena`] they read and write (it is `repr(C)`), and the header's layout.
//!
//! `malloc` does what [`Arena::try_alloc_fast_small`], or [`Arena::try_alloc_fast_aligned`] at a
//! cache line's alignment, does with `Arena::bump`; `free` does what the LIFO branch of
//! [`Arena::try_free_local_fast`] does with `Arena::release_top`, when the link's word does not
//! say "freed" and that is the whole release (not the last live block of a carried range), or
//! with `Arena::rewind_uncounted` for the last live block of a range whose other blocks lie
//! below it (not carried, and a release under [`LOOK_SOON_BYTES`]), and what the uncounted
//! branch of [`Arena::try_free_local_other`] does with `Arena::free_uncounted` when that
//! releases nothing (a tag flip). Both serve the owner thread only, and leave every other case
//! to those functions.
//! A change to any of them must be made there too: the preload tests' `fast_paths` program
//! checks what the two do, and `scripts/test.sh` runs the preload tests once more with the
//! arena's invariants checked after every operation of the Rust paths. Why assembly: each taken
//! branch on the way from `malloc` or `free` into a Rust function cost the Bumper loop about 3 %
//! (measured with `scripts/bench.sh`).

use core::mem::{offset_of, size_of};

use super::{Arena, HEADER, LINE, LINE_ALIGN_FROM, MIN_ALIGN};

/// `Arena::top` (`Cell<usize>`).
pub const TOP: usize = offset_of!(Arena, top);
/// `Arena::limit` (`Cell<usize>`).
pub const LIMIT: usize = offset_of!(Arena, limit);
/// `Arena::uncounted` (`Cell<usize>`).
pub const UNCOUNTED: usize = offset_of!(Arena, uncounted);
/// `Arena::below_top` (`Cell<usize>`).
pub const BELOW_TOP: usize = offset_of!(Arena, below_top);
/// `Arena::peak_top` (`Cell<usize>`).
pub const PEAK_TOP: usize = offset_of!(Arena, peak_top);
/// `Arena::region_allocs` (`OwnerCounter`: a `u64`).
pub const REGION_ALLOCS: usize = offset_of!(Arena, region_allocs);
/// `Arena::live_uncounted` (`Cell<usize>`).
pub const LIVE_UNCOUNTED: usize = offset_of!(Arena, live_uncounted);
/// `Arena::carried` (`Cell<bool>`: one byte).
pub const CARRIED: usize = offset_of!(Arena, carried);
/// The release from which `Arena::note_release` may ask process mode's bound for a look: `free`
/// leaves a rewind of the uncounted range this large to the Rust path.
pub const LOOK_SOON_BYTES: usize = super::bound::LOOK_SOON_BYTES;
/// Offset of the link in a block's header (after its size-and-tag word, `size << TAG_BITS |
/// tag`, see [`super::TAG_BITS`]).
pub const LINK: usize = 8;

const _: () = {
    // The words the assembly uses with 8-byte operands are 8 bytes.
    assert!(size_of::<core::cell::Cell<usize>>() == 8 && size_of::<super::OwnerCounter>() == 8);
    // `carried` is read as a byte.
    assert!(size_of::<core::cell::Cell<bool>>() == 1);
    // A header is two words, the size-and-tag word and the link: `bump` writes them so.
    assert!(HEADER == 2 * size_of::<usize>() && LINK == size_of::<usize>());
    // The assembly's paths: below a page at `MIN_ALIGN`, from a page on at a cache line.
    assert!(super::block_align(LINE_ALIGN_FROM - 1, MIN_ALIGN) == MIN_ALIGN);
    assert!(super::block_align(LINE_ALIGN_FROM, MIN_ALIGN) == LINE);
    // `free` compares a release with it as a 32-bit immediate.
    assert!(LOOK_SOON_BYTES < 1 << 31);
    // `-MIN_ALIGN` and `-LINE` as masks.
    assert!(MIN_ALIGN.is_power_of_two() && LINE.is_power_of_two());
    // `malloc` stores the line gap as a 32-bit immediate, and puts the header of a block aligned
    // to a line where the gap says it is: at the first line start with room for the header in
    // front, less the header (its `line_rounding` and mask), from each position `top` may hold.
    assert!(super::LINE_GAP < 1 << 31);
    let mut top = 0;
    while top < 2 * LINE {
        assert!(
            super::header::line_gap_end(top) == ((top + HEADER + LINE - 1) & !(LINE - 1)) - HEADER
        );
        top += MIN_ALIGN;
    }
};
