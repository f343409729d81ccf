//! The malloc family's Rust paths, with glibc's semantics: 16-byte alignment, `errno` as glibc
//! sets it, bad alignments give `EINVAL`. The exports that take the caller's site are in
//! `entry.rs` (and `entry_x86_64.rs`), the `realloc` family in `realloc.rs`.
//!
//! Each entry point asks the router first (the thread's arena, inside a region) and otherwise
//! calls the next allocator. A pointer is an arena block exactly when it lies in the arena
//! reservation: one range check in `free`, `realloc` and `malloc_usable_size`. Nothing here
//! panics or allocates through itself.
//!
//! In the `heap-debug` build each entry point hands its call to `debug_heap.rs`, which calls
//! the `plain_` functions here for the blocks it guards.

use core::ffi::{c_int, c_void};
use core::ptr;

use resizealloc::router::{self, malloc::Next};

use crate::real;

pub(crate) const MIN_ALIGN: usize = 16;
const PAGE: usize = 4096;

#[inline(always)]
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: glibc's errno location is always valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

#[inline(always)]
fn arena_alloc(size: usize, align: usize) -> *mut c_void {
    // SAFETY: size is at least 1 and align a power of two (callers check).
    unsafe { router::alloc(size.max(1), align) as *mut c_void }
}

/// The library's next allocator (`real.rs`) and its give-back of that allocator's free memory
/// (`give_back.rs`), for the core's decisions ([`router::malloc`]).
pub(crate) enum NextAllocator {}

impl Next for NextAllocator {
    #[inline(always)]
    fn malloc(size: usize) -> *mut u8 {
        real::malloc(size).cast()
    }
    #[inline(always)]
    fn calloc(n: usize, size: usize) -> *mut u8 {
        real::calloc(n, size).cast()
    }
    #[inline(always)]
    unsafe fn free(p: *mut u8) {
        // SAFETY: the caller's obligation: not ours, not a bootstrap block.
        unsafe { real::free_next(p.cast()) }
    }
    #[inline(always)]
    fn is_boot(p: *mut u8) -> bool {
        real::is_boot(p.cast())
    }
    #[inline(always)]
    fn sample_free(p: *mut u8) {
        crate::give_back::sample_next_free(p.cast())
    }
    #[inline(always)]
    fn give_back_pending() -> bool {
        crate::give_back::give_back_pending()
    }
    #[inline(always)]
    fn run_pending_give_back() {
        crate::give_back::run_pending_give_back()
    }
}

/// `malloc` for a caller at `site` (the site stubs jump here).
pub(crate) extern "C" fn malloc_at(size: usize, site: usize) -> *mut c_void {
    if cfg!(feature = "heap-debug") {
        return crate::debug_heap::malloc(size, MIN_ALIGN, site);
    }
    plain_malloc_at(size, site)
}

/// What `malloc` does without the `heap-debug` build's guards.
#[inline(always)]
pub(crate) fn plain_malloc_at(size: usize, site: usize) -> *mut c_void {
    router::malloc::malloc_at::<NextAllocator>(size, site).cast()
}

/// `calloc` for a caller at `site` (the site stubs jump here).
pub(crate) extern "C" fn calloc_at(n: usize, size: usize, site: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        return calloc_overflow();
    };
    if cfg!(feature = "heap-debug") {
        return crate::debug_heap::calloc(total, site);
    }
    router::malloc::calloc_at::<NextAllocator>(n, size, total, site).cast()
}

/// `free(3)`: the Rust twin of the assembly `free` (`entry_x86_64.rs`). The owner thread's
/// single-granule blocks are freed inline; everything else is one cold call.
#[cfg(not(asm_entry_points))]
#[no_mangle]
pub extern "C" fn free(p: *mut c_void) {
    free_any(p)
}

/// What `free` does, as a Rust function: the body of the twin `free`, and what `cfree` and
/// `__libc_free` call in every build. (A call to the exported `free` goes through the symbol
/// table, and so to the first `free` in the process: a wrapper preloaded in front of the
/// library, whose `free` may come back through `__libc_free`.)
#[inline(always)]
pub(crate) fn free_any(p: *mut c_void) {
    if cfg!(feature = "heap-debug") {
        return crate::debug_heap::free(p);
    }
    plain_free(p)
}

/// What `free` does without the `heap-debug` build's guards.
#[inline(always)]
pub(crate) fn plain_free(p: *mut c_void) {
    // Foreign pointers first: outside regions they are nearly all of them, and one range check
    // and one flag send them on (the next allocator takes NULL too).
    if !router::owns(p as *mut u8) {
        if router::foreign_frees_watched() {
            // SAFETY: not in the reservation: a block of the next allocator or the heap.
            return unsafe { router::malloc::free_foreign_watched::<NextAllocator>(p as *mut u8) };
        }
        // SAFETY: not ours, and no bootstrap block was ever handed out (the flag says so).
        return unsafe { real::free_next(p) };
    }
    free_arena_block(p)
}

/// `free` of a pointer in the arena reservation: the owner's blocks inline, the rest one cold
/// call. (The assembly `free` makes these tests itself.)
#[inline(always)]
pub(crate) fn free_arena_block(p: *mut c_void) {
    // SAFETY: `p` is in the reservation, so it is an arena block (or the program's bug).
    if !unsafe { router::free_fast(p as *mut u8) } {
        // SAFETY: as above.
        unsafe { router::malloc::free_slow(p as *mut u8) };
    }
}

/// `calloc` whose `n * size` overflows: NULL with `ENOMEM`. Out of line: the call that finds
/// `errno` made every `calloc` save and restore three registers.
#[cold]
#[inline(never)]
fn calloc_overflow() -> *mut c_void {
    set_errno(libc::ENOMEM);
    ptr::null_mut()
}

/// Aligned allocation shared by every aligned entry point; `align` is a power of two.
fn aligned(align: usize, size: usize) -> *mut c_void {
    if cfg!(feature = "heap-debug") {
        return crate::debug_heap::malloc(size, align, 0);
    }
    plain_aligned(align, size)
}

/// What [`aligned`] does without the `heap-debug` build's guards.
pub(crate) fn plain_aligned(align: usize, size: usize) -> *mut c_void {
    let align = align.max(MIN_ALIGN);
    let p = arena_alloc(size, align);
    if !p.is_null() {
        return p;
    }
    real::memalign(align, size)
}

/// `posix_memalign(3)`: returns `EINVAL` unless `align` is a power of two multiple of
/// `sizeof(void *)` (`errno` untouched), `ENOMEM` when no memory, with `errno` left at
/// `ENOMEM` as glibc's allocation left it (glibc's `tst-malloc-thread-fail` relies on that).
#[no_mangle]
pub extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if out.is_null() {
        return libc::EINVAL;
    }
    if !align.is_power_of_two() || !align.is_multiple_of(core::mem::size_of::<usize>()) {
        return libc::EINVAL;
    }
    let p = aligned(align, size);
    if p.is_null() {
        set_errno(libc::ENOMEM);
        return libc::ENOMEM;
    }
    // SAFETY: `out` is non-null and points to writable storage (the caller's contract).
    unsafe { *out = p };
    0
}

/// `aligned_alloc(3)` (C11): `memalign`, as in glibc 2.36, where it is an alias of
/// `memalign` (a non-power-of-two alignment is rounded up).
#[no_mangle]
pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    memalign_any(align, size)
}

/// `memalign(3)`: like glibc, a non-power-of-two alignment is rounded up; one that cannot be
/// rounded gives NULL with `EINVAL`.
#[no_mangle]
pub extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    memalign_any(align, size)
}

/// What `memalign` does, as a Rust function for `__libc_memalign` (a call to the exported
/// `memalign` would go through the symbol table to the first `memalign` in the process: see
/// [`free_any`]).
#[inline(always)]
pub(crate) fn memalign_any(align: usize, size: usize) -> *mut c_void {
    let Some(align) = align.max(1).checked_next_power_of_two() else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if align > usize::MAX / 2 + 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(align, size)
}

/// `valloc(3)`: page aligned.
#[no_mangle]
pub extern "C" fn valloc(size: usize) -> *mut c_void {
    valloc_any(size)
}

/// What `valloc` does, for `__libc_valloc` (see [`memalign_any`]).
#[inline(always)]
pub(crate) fn valloc_any(size: usize) -> *mut c_void {
    aligned(PAGE, size)
}

/// `pvalloc(3)`: page aligned, size rounded up to whole pages.
#[no_mangle]
pub extern "C" fn pvalloc(size: usize) -> *mut c_void {
    pvalloc_any(size)
}

/// What `pvalloc` does, for `__libc_pvalloc` (see [`memalign_any`]).
#[inline(always)]
pub(crate) fn pvalloc_any(size: usize) -> *mut c_void {
    let Some(rounded) = size.max(1).checked_add(PAGE - 1).map(|s| s & !(PAGE - 1)) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    aligned(PAGE, rounded)
}

/// `malloc_usable_size(3)`.
#[no_mangle]
pub extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if cfg!(feature = "heap-debug") {
        return crate::debug_heap::usable_size(p);
    }
    plain_usable_size(p)
}

/// What `malloc_usable_size` does without the `heap-debug` build's guards.
pub(crate) fn plain_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if router::owns(p as *mut u8) {
        // SAFETY: a live arena block (the caller's contract, as with glibc).
        return unsafe { router::usable_size(p as *mut u8) };
    }
    if router::owns_small(p as *mut u8) {
        // SAFETY: a live small-block heap block (the caller's contract).
        return unsafe { router::usable_size_small(p as *mut u8) };
    }
    if real::is_boot(p) {
        return real::boot_size(p);
    }
    real::usable_size(p)
}
