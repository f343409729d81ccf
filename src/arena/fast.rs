//! The allocation fast paths: a bump of `top` within `[top, limit)` and a header store. The
//! assembly entry points of `malloc` mirror `try_alloc_fast_small` and `try_alloc_fast_aligned`
//! (see [`super::asm_layout`]).

use core::ptr;

use super::counts::MAX_SLOT;
use super::header::{header_word, LINE_GAP, TAG_GAP, TAG_LIVE};
use super::Arena;
use crate::layout::{
    align_up, block_align, is_small_request, HEADER, LINE, LINE_ALIGN_FROM, MIN_ALIGN,
};

impl Arena {
    /// Allocates `size` bytes aligned to `align` (a power of two). Null means "not served here":
    /// the request is outside the size bounds, or memory ran out; the caller uses the next
    /// allocator.
    ///
    /// # Safety
    /// Called by the owner thread. `size >= 1`, `align` a power of two.
    #[inline(always)]
    pub unsafe fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        // SAFETY: forwarded obligations.
        let p = unsafe { self.try_alloc_fast(size, align) };
        if !p.is_null() {
            return p;
        }
        self.alloc_slow(size, align.max(MIN_ALIGN))
    }

    /// The fast path alone: a block from the checked run, or null when the caller must take
    /// [`Arena::alloc_slow`]. Calls nothing, so a caller that inlines it needs no stack frame;
    /// a block of a page or more, or with a larger alignment, takes
    /// [`Arena::try_alloc_fast_aligned`] (inlined too: as a call it cost about 13 more
    /// instructions per such block and its callers a frame).
    ///
    /// `size` may be 0 here (unlike [`Arena::alloc`]): such a request goes to the aligned path,
    /// which declines it, so that `malloc`'s fast path needs no `max(1)` (three instructions;
    /// the slow path gives it a block of 1).
    ///
    /// # Safety
    /// As [`Arena::alloc`], except that `size` may be 0.
    #[inline(always)]
    pub unsafe fn try_alloc_fast(&self, size: usize, align: usize) -> *mut u8 {
        debug_assert!(align.is_power_of_two());
        if is_small_request(size) && align <= MIN_ALIGN {
            // SAFETY: forwarded obligations; `size` is 1 to a page less one.
            return unsafe { self.try_alloc_fast_small(size) };
        }
        // SAFETY: forwarded obligations.
        unsafe { self.try_alloc_fast_aligned(size, align) }
    }

    /// [`Arena::try_alloc_fast`] for a block of `size` bytes, 1 up to a page less one, at the
    /// minimum alignment. Public for `malloc`'s entry point, which calls the two paths itself:
    /// in one function the compiler joins them at their common tail, and the small one then
    /// jumps to it. `malloc`'s assembly entry point (x86-64 Linux) does what this and
    /// [`Arena::bump`] do itself: see [`asm_layout`].
    ///
    /// # Safety
    /// As [`Arena::alloc`], and `size < LINE_ALIGN_FROM`.
    #[inline(always)]
    pub unsafe fn try_alloc_fast_small(&self, size: usize) -> *mut u8 {
        debug_assert!((1..LINE_ALIGN_FROM).contains(&size));
        // `top` is 16-byte aligned, so the block needs no rounding; `size` is below a page, so
        // its end cannot wrap (`top` lies below 2^47). `limit` is 16-byte aligned too, so the
        // rounded end is tested: the same test, and the new `top` computed once.
        let top = self.top.get();
        let p = top + HEADER;
        let new_top = align_up(p + size, MIN_ALIGN);
        if new_top > self.limit.get() {
            return ptr::null_mut();
        }
        // SAFETY: `[top, new_top)` lies in `[top, limit)`, which the invariants say is committed
        // and unused.
        let block = unsafe { self.bump(p, size, new_top) };
        // Nothing, for the compiler only: it tells this path's tail from the aligned one's,
        // which it would otherwise join, having this path, the common one, jump to the other's
        // (a taken branch on every small allocation of `__rust_alloc`).
        // SAFETY: an empty assembly block.
        unsafe { core::arch::asm!("", options(nomem, nostack, preserves_flags)) };
        block
    }

    /// [`Arena::try_alloc_fast`] for a block of a page or more, or a larger alignment: it starts
    /// where [`block_align`] says, and alignment padding gets a gap header.
    ///
    /// # Safety
    /// As [`Arena::alloc`], except that `size` may be 0 (declined, as by
    /// [`Arena::try_alloc_fast`]).
    #[inline(always)]
    pub unsafe fn try_alloc_fast_aligned(&self, size: usize, align: usize) -> *mut u8 {
        // `size - 1` wraps for 0: declined (see `try_alloc_fast`); a size beyond the slot too.
        // Tested first: after it, `malloc`'s caller knows the size is a page or more, so the
        // alignment below is a constant (tested later, it cost seven instructions to pick).
        // As a shift (`MAX_SLOT` is a power of two): as a compare, the compiler built the
        // 64-bit bound in a register and moved the subtraction into it (five instructions).
        if size.wrapping_sub(1) >> MAX_SLOT.trailing_zeros() != 0 {
            return ptr::null_mut();
        }
        let top = self.top.get();
        let align = block_align(size, align);
        // `top` lies below 2^47, so `p` cannot wrap, and the size is below the slot's, so `end`
        // cannot either; an alignment beyond the slot makes `p` exceed the limit.
        let p = (top + HEADER + align - 1) & !(align - 1);
        // As in `try_alloc_fast_small`: `limit` is 16-byte aligned.
        let new_top = align_up(p + size, MIN_ALIGN);
        if new_top > self.limit.get() {
            return ptr::null_mut();
        }
        let hdr = p - HEADER;
        if hdr != top {
            // Alignment padding: a walk of the uncounted range must be able to step over it.
            // At a cache line's alignment, `hdr` is `line_gap_end(top)`: the constant word.
            let gap = if align == LINE {
                LINE_GAP
            } else {
                header_word(hdr - top, TAG_GAP)
            };
            // SAFETY: `[top, hdr)` is at least 16 bytes of the checked run ahead of the bump
            // pointer.
            unsafe { (top as *mut usize).write(gap) };
        }
        // SAFETY: `[hdr, new_top)` lies in `[top, limit)`, checked above.
        unsafe { self.bump(p, size, new_top) }
    }

    /// Hands out the block of `size` bytes at `p` (header at `p - HEADER`, at or past `top`):
    /// the bump pointer moves to `new_top`, its end rounded up to 16 bytes, and the block joins
    /// the uncounted range `[uncounted, top)` just by that. Mirrored in `malloc`'s assembly entry
    /// point ([`asm_layout`]).
    ///
    /// # Safety
    /// `[p - HEADER, new_top)` lies in `[top, limit)`, committed and unused;
    /// `new_top == align_up(p + size, MIN_ALIGN)`; any padding in `[top, p - HEADER)` has a
    /// gap header.
    #[inline(always)]
    unsafe fn bump(&self, p: usize, size: usize, new_top: usize) -> *mut u8 {
        debug_assert!(p - HEADER >= self.top.get() && new_top == align_up(p + size, MIN_ALIGN));
        self.top.set(new_top);
        let hdr = (p - HEADER) as *mut usize;
        // SAFETY: caller's obligation (the header is 16 bytes: its word and the link).
        unsafe {
            hdr.write(header_word(size, TAG_LIVE));
            hdr.add(1).write(self.below_top.get());
        }
        self.below_top.set(hdr as usize);
        self.region_allocs.add(1);
        self.live_uncounted.set(self.live_uncounted.get() + 1);
        // Its bytes join `live_local_bytes` when it is counted (`count_range`).
        self.debug_check();
        let p = p as *mut u8;
        if p.is_null() {
            // SAFETY: `p = top + HEADER` (at least) and `top` is an address in our slot.
            unsafe { core::hint::unreachable_unchecked() }
        }
        p
    }

    #[inline(always)]
    pub(super) fn note_peak(&self) {
        if self.top.get() > self.peak_top.get() {
            self.peak_top.set(self.top.get());
        }
    }
}
