//! The block layout every heap of the crate shares: the granule, the block header, and the
//! alignments a block gets. A leaf: it imports nothing from the crate.

/// log2 of the granule size. A granule is the unit of reuse: an escaped block pins its granules.
pub const GRANULE_SHIFT: u32 = 14;
/// 16 KiB: the most memory one escaped small block can hold back.
pub const GRANULE: usize = 1 << GRANULE_SHIFT;
/// Bytes of header in front of every block (its size-and-tag word and its link).
pub const HEADER: usize = 16;
/// Every block is aligned to at least this (what `malloc` promises on x86-64).
pub const MIN_ALIGN: usize = 16;
/// Blocks of at least this many bytes start on a cache line ([`block_align`]).
pub const LINE_ALIGN_FROM: usize = 4096;
/// The alignment of such blocks.
pub const LINE: usize = 64;

/// True for a request [`Arena::try_alloc_fast_small`] takes: 1 byte up to a page less one (one
/// compare: 0 wraps to the largest size).
///
/// [`Arena::try_alloc_fast_small`]: crate::arena::Arena::try_alloc_fast_small
#[inline(always)]
pub const fn is_small_request(size: usize) -> bool {
    size.wrapping_sub(1) < LINE_ALIGN_FROM - 1
}

/// The alignment a block of `size` bytes gets for a request of `align`: at least a cache line
/// for blocks of a page or more. A bump allocator with 16-byte headers otherwise puts two
/// consecutive page-multiple blocks exactly 16 bytes apart modulo 4 KiB, and copying one into
/// the other (`np.concatenate`, any `memcpy` between a step's temporaries) then hits the
/// 4K-aliasing trap of `rep movsb`: 38 us instead of 1.6 us for 64 KiB on this machine (see
/// BENCHMARKS.md; glibc's heap has the same trap). At 64 bytes apart it runs at full speed.
#[inline(always)]
pub const fn block_align(size: usize, align: usize) -> usize {
    if size >= LINE_ALIGN_FROM && align < LINE {
        LINE
    } else {
        align
    }
}

#[inline(always)]
pub(crate) const fn align_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

/// Largest request the small-block heap (`slab`) serves.
pub const MAX_SMALL: usize = 1024;
