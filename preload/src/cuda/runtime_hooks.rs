//! The runtime API hooks (`cudaMalloc`, `cudaFree`, `cudaMallocAsync`, `cudaFreeAsync` and their
//! `_ptsz` forms), for programs that link the shared cudart: they reach the pools without
//! cudart's own overhead. Programs with a static cudart reach the same pools one level down,
//! through the driver hooks that cudart's `cuGetProcAddress` lookups hand it.
//!
//! An allocation is answered here only when the pool serves it. Everything else (no current
//! context yet, a null out pointer, size 0, out of memory) goes to the real cudart, so the
//! program gets exactly its answer and `cudaGetLastError` records it as usual; cudart's own
//! driver calls land in the driver hooks, so what it allocates is pooled too. A free of a
//! pointer inside a pool is answered here, errors included (a double free gets
//! `cudaErrorInvalidValue`, as from cudart, but `cudaGetLastError` does not see it): handing
//! it to cudart could reach a driver that frees the whole segment under the pool's feet.
//! Pointers that are not the pool's go to cudart.
//!
//! `cudaDeviceSynchronize` tells the pools about the synchronisation, and `cudaDeviceReset`
//! drops the pool of the primary context it destroys.

use core::ffi::c_void;

use super::driver::{
    self as drv, CUcontext, CUdevice, CUstream, CudaError, RtFreeAsyncFn, RtMallocAsyncFn,
    CUDA_SUCCESS,
};
use super::driver_hooks::{async_context, pool_alloc, pool_free, primary_context_of, FreeKind};
use super::pools::{self, pooled, stream_id, SYNC_STREAM};

/// `cudaMalloc`.
#[no_mangle]
pub extern "C" fn cudaMalloc(dev_ptr: *mut *mut c_void, size: usize) -> CudaError {
    if pooled() {
        let out = dev_ptr.cast::<u64>();
        if pool_alloc(out, size, drv::current_context(), SYNC_STREAM) == Some(CUDA_SUCCESS) {
            return CUDA_SUCCESS;
        }
    }
    match drv::cuda_malloc() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dev_ptr, size) },
        None => drv::no_runtime(),
    }
}

/// `cudaFree`: a pool block is reusable after the next synchronisation. `cudaFree(NULL)` (often
/// used to create the context) and pointers that are not the pool's go to cudart.
#[no_mangle]
pub extern "C" fn cudaFree(dev_ptr: *mut c_void) -> CudaError {
    if !dev_ptr.is_null() {
        if let Some(r) = pool_free(dev_ptr as u64, FreeKind::Sync) {
            return r;
        }
    }
    match drv::cuda_free() {
        // SAFETY: forwarded argument.
        Some(f) => unsafe { f(dev_ptr) },
        None => drv::no_runtime(),
    }
}

fn malloc_async(
    dev_ptr: *mut *mut c_void,
    size: usize,
    stream: CUstream,
    ptsz: bool,
    real: Option<RtMallocAsyncFn>,
) -> CudaError {
    if pooled() {
        let out = dev_ptr.cast::<u64>();
        let id = stream_id(stream, ptsz);
        if pool_alloc(out, size, async_context(stream, ptsz), id) == Some(CUDA_SUCCESS) {
            return CUDA_SUCCESS;
        }
    }
    match real {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dev_ptr, size, stream) },
        None => drv::no_runtime(),
    }
}

fn free_async(
    dev_ptr: *mut c_void,
    stream: CUstream,
    ptsz: bool,
    real: Option<RtFreeAsyncFn>,
) -> CudaError {
    if !dev_ptr.is_null() {
        if let Some(r) = pool_free(dev_ptr as u64, FreeKind::Async(stream, ptsz)) {
            return r;
        }
    }
    match real {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dev_ptr, stream) },
        None => drv::no_runtime(),
    }
}

/// `cudaMallocAsync`: from the pool of the stream's context.
#[no_mangle]
pub extern "C" fn cudaMallocAsync(
    dev_ptr: *mut *mut c_void,
    size: usize,
    stream: CUstream,
) -> CudaError {
    malloc_async(dev_ptr, size, stream, false, drv::cuda_malloc_async())
}

/// `cudaMallocAsync_ptsz` (code compiled with per-thread default streams).
#[no_mangle]
pub extern "C" fn cudaMallocAsync_ptsz(
    dev_ptr: *mut *mut c_void,
    size: usize,
    stream: CUstream,
) -> CudaError {
    malloc_async(dev_ptr, size, stream, true, drv::cuda_malloc_async_ptsz())
}

/// `cudaFreeAsync`: a pool block is reusable at once on `stream`, elsewhere after a sync.
#[no_mangle]
pub extern "C" fn cudaFreeAsync(dev_ptr: *mut c_void, stream: CUstream) -> CudaError {
    free_async(dev_ptr, stream, false, drv::cuda_free_async())
}

/// `cudaFreeAsync_ptsz`.
#[no_mangle]
pub extern "C" fn cudaFreeAsync_ptsz(dev_ptr: *mut c_void, stream: CUstream) -> CudaError {
    free_async(dev_ptr, stream, true, drv::cuda_free_async_ptsz())
}

/// `cudaDeviceSynchronize`: after the real one, everything freed before it started is reusable.
#[no_mangle]
pub extern "C" fn cudaDeviceSynchronize() -> CudaError {
    let Some(f) = drv::cuda_device_synchronize() else {
        return drv::no_runtime();
    };
    // SAFETY: the real cudaDeviceSynchronize.
    pools::observe_sync(drv::current_context(), || unsafe { f() })
}

/// `cudaDeviceReset`: destroys the current device's primary context and its memory, so the
/// pool of that context goes too (cudart's own driver call is hooked as well; whichever comes
/// first takes the pool out).
#[no_mangle]
pub extern "C" fn cudaDeviceReset() -> CudaError {
    let Some(f) = drv::cuda_device_reset() else {
        return drv::no_runtime();
    };
    let ctx: CUcontext = current_device().map_or(core::ptr::null_mut(), primary_context_of);
    // SAFETY: the real cudaDeviceReset.
    pools::around_teardown(ctx, || unsafe { f() })
}

/// The device of the current context, if there is one.
fn current_device() -> Option<CUdevice> {
    let f = drv::cu_ctx_get_device()?;
    let mut dev: CUdevice = 0;
    // SAFETY: valid out pointer.
    (unsafe { f(&mut dev) } == CUDA_SUCCESS).then_some(dev)
}
