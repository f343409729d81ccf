//! The C API (`include/resizealloc.h`): region markers, depth, stats and trim, callable from C,
//! Python (ctypes) and Julia (ccall). Every function is total: bad input gets an error code.

use core::ffi::c_int;

use resizealloc::{region, region_depth, Stats};

/// Enters a region on the calling thread (regions nest).
#[no_mangle]
pub extern "C" fn resize_region_begin() {
    // Process mode's markers only nest: counted here with no stack frame (programs mark every
    // step); everything else out of line.
    let ts = region::state();
    if !region::region_begin_if_joined(ts) {
        region_begin_unjoined(ts);
    }
}

#[inline(never)]
fn region_begin_unjoined(ts: &region::ThreadState) {
    region::region_begin_with(ts);
}

#[inline(never)]
fn region_end_unjoined(ts: &region::ThreadState) -> c_int {
    match region::region_end_with(ts) {
        Ok(()) => {
            #[cfg(target_arch = "x86_64")]
            if region_depth() == 0 {
                crate::cuda::note_thread_left_region();
            }
            0
        }
        Err(_) => -1,
    }
}

/// Leaves the innermost region: 0 on success, -1 when the thread is not in a region.
/// The outermost end resets the thread's arena and resizes it to the region's peak; when no
/// thread is in a region any more, the device pools resize to their region's peak too.
#[no_mangle]
pub extern "C" fn resize_region_end() -> c_int {
    // As in `resize_region_begin`.
    let ts = region::state();
    let Some(_depth) = region::region_end_if_joined(ts) else {
        return region_end_unjoined(ts);
    };
    #[cfg(target_arch = "x86_64")]
    if _depth == 0 {
        crate::cuda::note_thread_left_region();
    }
    0
}

/// Region nesting depth of the calling thread (0 outside regions).
#[no_mangle]
pub extern "C" fn resize_region_depth() -> c_int {
    region_depth().min(c_int::MAX as u32) as c_int
}

/// Copies the calling thread's and the process's figures into `out`, at most `out_size` bytes
/// (pass `sizeof(struct resize_stats)`; a smaller, older struct gets its prefix). Returns the
/// number of bytes the library knows about, or -1 when `out` is NULL.
#[no_mangle]
pub extern "C" fn resize_stats_get(out: *mut Stats, out_size: usize) -> c_int {
    if out.is_null() {
        return -1;
    }
    let s = resizealloc::stats();
    let n = out_size.min(core::mem::size_of::<Stats>());
    // SAFETY: `out` is non-null and the caller promises `out_size` writable bytes; we copy at
    // most that many from a local value.
    unsafe { core::ptr::copy_nonoverlapping(&s as *const Stats as *const u8, out as *mut u8, n) };
    core::mem::size_of::<Stats>() as c_int
}

/// Gives memory the calling thread's arena does not need back to the kernel, and the warm
/// memory kept by arenas of exited threads.
#[no_mangle]
pub extern "C" fn resize_trim() {
    resizealloc::trim();
}

/// The library version as "MAJOR.MINOR.PATCH" (static storage).
#[no_mangle]
pub extern "C" fn resize_version() -> *const core::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
