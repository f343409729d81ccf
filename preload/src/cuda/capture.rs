//! Stream capture (CUDA graphs): which contexts have a capture in progress, and in which mode.
//!
//! While a stream captures, the driver records work into a graph instead of running it. Three
//! things the pool does would break that: a stream-ordered allocation served from the pool is a
//! plain address, so the graph records no memory node and a replay can write into a block the
//! pool has handed out again since; the pool's own `cuCtxSynchronize` syncs the capturing
//! stream, which the driver refuses and which invalidates the capture; and in global (or
//! thread-local) mode a `cuMemAlloc`/`cuMemFree` from any thread is a "potentially unsafe" call
//! that invalidates it too.
//!
//! So: stream-ordered calls on a capturing stream go to the driver ([`stream_capturing`], asked
//! with `cuStreamGetCaptureInfo`), and the pools ask [`state`] before each of their own
//! synchronisations, segment allocations and segment frees. The list of captures is filled by
//! the `cuStreamBeginCapture` hooks (which know the mode) and by [`stream_capturing`] (which does
//! not: such captures count as global), and every entry is checked against the driver when it is
//! read, so a capture that ended where no hook saw it (a route we do not hook, or a library
//! loaded with `dlopen` rather than preloaded) drops out by itself.

use core::ffi::c_int;
use core::sync::atomic::{AtomicUsize, Ordering};

use resizealloc::device::Capture;

use super::driver::{self as drv, CUcontext, CUstream, CUDA_SUCCESS};

/// `CUstreamCaptureMode`: global (0) and thread-local (1) are both treated as global.
pub const CU_STREAM_CAPTURE_MODE_GLOBAL: c_int = 0;
pub const CU_STREAM_CAPTURE_MODE_RELAXED: c_int = 2;
/// `CUstreamCaptureStatus`: `NONE` is 0; `ACTIVE` (1) and `INVALIDATED` (2) both mean the
/// stream is still in capture mode until `cuStreamEndCapture`.
const CU_STREAM_CAPTURE_STATUS_NONE: c_int = 0;

/// A capture the library knows of.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Entry {
    ctx: usize,
    stream: usize,
    relaxed: bool,
}

const MAX_CAPTURES: usize = 64;

/// The known captures (a fixed table: no allocation under the lock) and how many there are,
/// readable without the lock.
static LIST: spin::mutex::SpinMutex<([Option<Entry>; MAX_CAPTURES], usize), spin::relax::Yield> =
    spin::mutex::SpinMutex::new(([None; MAX_CAPTURES], 0));
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// The capture status of `stream` as the driver reports it: `Some(true)` while it captures,
/// `None` when the driver cannot say (no such function, or an error such as a destroyed
/// stream).
fn query(stream: CUstream) -> Option<bool> {
    let mut status: c_int = CU_STREAM_CAPTURE_STATUS_NONE;
    let r = if let Some(f) = drv::cu_stream_get_capture_info_v2() {
        let null = core::ptr::null_mut();
        // SAFETY: a valid status out pointer; the optional outputs may be null (driver API).
        unsafe { f(stream, &mut status, core::ptr::null_mut(), null, null, null) }
    } else if let Some(f) = drv::cu_stream_is_capturing() {
        // SAFETY: a valid status out pointer.
        unsafe { f(stream, &mut status) }
    } else {
        return None;
    };
    (r == CUDA_SUCCESS).then_some(status != CU_STREAM_CAPTURE_STATUS_NONE)
}

/// The handle to ask the driver about: the per-thread default stream for 0 in the `_ptsz`
/// variants.
fn query_handle(stream: CUstream, ptsz: bool) -> CUstream {
    if ptsz && stream.is_null() {
        2 as CUstream // CU_STREAM_PER_THREAD
    } else {
        stream
    }
}

/// Whether `stream` is capturing now (asked of the driver every time: a capture can begin
/// where no hook sees it). A capturing stream is remembered, so the pools of its context stop
/// synchronising and (its mode being unknown) stop calling the driver until it ends.
pub fn stream_capturing(stream: CUstream, ptsz: bool, ctx: CUcontext) -> bool {
    let handle = query_handle(stream, ptsz);
    // The legacy default stream cannot capture.
    if handle as usize == 1 || (handle.is_null() && !ptsz) {
        return false;
    }
    if query(handle) != Some(true) {
        return false;
    }
    note_begin(ctx, handle, CU_STREAM_CAPTURE_MODE_GLOBAL);
    true
}

/// A capture began on `stream` of context `ctx` in `mode`.
pub fn note_begin(ctx: CUcontext, stream: CUstream, mode: c_int) {
    let e = Entry {
        ctx: ctx as usize,
        stream: stream as usize,
        relaxed: mode == CU_STREAM_CAPTURE_MODE_RELAXED,
    };
    let mut list = LIST.lock();
    let (table, count) = &mut *list;
    if let Some(old) = table
        .iter_mut()
        .flatten()
        .find(|x| x.stream == e.stream && x.ctx == e.ctx)
    {
        // Known from a query (mode unknown) and now from a hook, or begun again: the newest.
        *old = e;
        return;
    }
    if let Some(free) = table.iter_mut().find(|x| x.is_none()) {
        *free = Some(e);
        *count += 1;
        ACTIVE.store(*count, Ordering::Release);
    }
    // A full table forgets the capture: the pools may then sync during it, as if it had not
    // been seen. 64 concurrent captures are far beyond what programs do.
}

/// The capture on `stream` ended (`cuStreamEndCapture`, successful or not: either way the
/// stream leaves capture mode), or the stream was destroyed.
pub fn note_end(stream: CUstream) {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut list = LIST.lock();
    let (table, count) = &mut *list;
    for slot in table.iter_mut() {
        if slot.is_some_and(|e| e.stream == stream as usize) {
            *slot = None;
            *count -= 1;
        }
    }
    ACTIVE.store(*count, Ordering::Release);
}

/// Fork support: holds the capture list across `fork` (taken after the pools' locks). False
/// when it could not be had in time (then it is not held).
pub fn fork_prepare() -> bool {
    resizealloc::fork::wait_for(|| LIST.try_lock().map(core::mem::forget).is_some())
}

/// Fork support: releases what [`fork_prepare`] took, in the parent and in the child.
///
/// # Safety
/// `fork_prepare` took the lock in this thread (or its copy, in the child), or the caller is a
/// child with one thread resetting it.
pub unsafe fn fork_finish() {
    // SAFETY: the caller's obligation.
    unsafe { LIST.force_unlock() };
}

/// What the pools of context `ctx` may do now, given the captures in progress: a global (or
/// thread-local, or unknown) capture anywhere in the process forbids every thread's potentially
/// unsafe calls, synchronisations and `cuMemAlloc`/`cuMemFree` included, in any context; a
/// relaxed capture forbids synchronising its own context. One atomic load when no capture is
/// known anywhere.
pub fn state(ctx: CUcontext) -> Capture {
    if ACTIVE.load(Ordering::Acquire) == 0 {
        return Capture::None;
    }
    state_slow(ctx as usize)
}

#[cold]
#[inline(never)]
fn state_slow(ctx: usize) -> Capture {
    let mut relevant = [None; MAX_CAPTURES];
    {
        let list = LIST.lock();
        for (out, e) in relevant.iter_mut().zip(list.0.iter()) {
            *out = e.filter(|e| e.ctx == ctx || !e.relaxed);
        }
    }
    let mut result = Capture::None;
    // Asked of the driver outside the lock: entries whose capture ended where no hook saw it
    // (or whose stream is gone) drop out.
    for e in relevant.iter().flatten() {
        if query(e.stream as CUstream) == Some(true) {
            result = result.max(if e.relaxed {
                Capture::Relaxed
            } else {
                Capture::Global
            });
        } else {
            note_end(e.stream as CUstream);
        }
    }
    result
}
