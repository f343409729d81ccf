//! The `realloc` family. Above `free` in the library's layers: `realloc(p, 0)` frees as `free`
//! does ([`free_any`]: not through the exported symbol, which a wrapper preloaded in front of
//! the library would take).

use core::ffi::c_void;
use core::ptr;

use resizealloc::router;

use crate::malloc::{free_any, malloc_at, set_errno, MIN_ALIGN};
use crate::real;

pub(crate) extern "C" fn realloc_at(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    if cfg!(feature = "heap-debug") {
        return crate::debug_heap::realloc(p, size, site);
    }
    plain_realloc_at(p, size, site)
}

/// What `realloc` does without the `heap-debug` build's guards.
#[inline(always)]
pub(crate) fn plain_realloc_at(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    if p.is_null() {
        return malloc_at(size, site);
    }
    if size == 0 {
        return realloc_to_zero(p);
    }
    if let router::Route::Arena(a) = router::route() {
        // SAFETY: the thread's own active arena; `p` is a live block (the caller's contract)
        // and size >= 1.
        if unsafe {
            (*a).try_resize_last(p as *mut u8, size) || (*a).fits_as_it_is(p as *mut u8, size)
        } {
            return p;
        }
    }
    realloc_moving(p, size, site)
}

/// `realloc(p, 0)`: frees `p` and returns NULL (glibc's behaviour). Out of line, as is
/// [`realloc_moving`], so that `realloc_at`'s in-place path makes no call and needs no stack
/// frame (it saved and restored five registers on every call).
#[cold]
#[inline(never)]
fn realloc_to_zero(p: *mut c_void) -> *mut c_void {
    free_any(p);
    ptr::null_mut()
}

/// `realloc` of a non-null `p` to `size >= 1` where the arena's in-place path did not serve it:
/// a move, or the small-block heap's or the next allocator's `realloc`.
#[inline(never)]
fn realloc_moving(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    if router::owns(p as *mut u8) {
        // SAFETY: a live arena block; size >= 1; MIN_ALIGN is a power of two.
        let q = unsafe {
            router::realloc_owned(p as *mut u8, size, MIN_ALIGN, site, |s, _| {
                real::malloc(s) as *mut u8
            })
        };
        if q.is_null() {
            set_errno(libc::ENOMEM);
        }
        return q as *mut c_void;
    }
    if router::owns_small(p as *mut u8) {
        return realloc_small(p, size, site);
    }
    if real::is_boot(p) {
        let q = malloc_at(size, site);
        if !q.is_null() {
            // SAFETY: both blocks are live and at least `min(old, size)` long.
            unsafe {
                ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, real::boot_size(p).min(size))
            };
        }
        return q;
    }
    if resizealloc::profile::enabled() {
        return resizealloc::profile::foreign_realloc(p as *mut u8, size, || {
            realloc_next(p, size) as *mut u8
        }) as *mut c_void;
    }
    realloc_next(p, size)
}

/// Blocks of the next allocator from this size on grow with slack.
const SLACK_FROM: usize = 128 << 10;

/// The next allocator's `realloc` of its block `p`. A large block that grows gets half as much
/// again, and one that still fits stays, so that a buffer appended to a
/// little at a time moves a logarithmic number of times: glibc's `mremap` grows it in place
/// only while the address space above it is free, and otherwise moved it at every page (up to
/// ninety times for 2 MiB, depending on where the kernel put the mappings around it, the
/// library's reservations among them).
fn realloc_next(p: *mut c_void, size: usize) -> *mut c_void {
    if size < SLACK_FROM {
        return real::realloc(p, size);
    }
    let usable = real::usable_size(p);
    if size <= usable && size >= usable / 2 {
        return p;
    }
    if size > usable {
        let roomy = real::realloc(p, size.saturating_add(size / 2));
        if !roomy.is_null() {
            return roomy;
        }
    }
    real::realloc(p, size)
}

/// `realloc` of a small-block heap block (`router::realloc_small`), moved to wherever `malloc`
/// sends the new size.
fn realloc_small(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    // SAFETY: a live small-block heap block the program gives up on success (the caller's
    // contract); `malloc_at` returns null or a fresh block.
    let q = unsafe { router::realloc_small(p as *mut u8, size, |n| malloc_at(n, site) as *mut u8) };
    if q.is_null() {
        set_errno(libc::ENOMEM);
    }
    q as *mut c_void
}

/// `reallocarray(3)`: overflow gives NULL with `ENOMEM` and leaves `p` alone.
#[no_mangle]
pub extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => realloc_at(p, total, 0),
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}
