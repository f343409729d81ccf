//! Plug-in entry points: the device pools for frameworks that take an allocator as a pair of C
//! functions, without `LD_PRELOAD` (the library may be opened with `dlopen`/ctypes only):
//!
//! * PyTorch `CUDAPluggableAllocator`: [`resize_torch_alloc`], [`resize_torch_free`];
//! * CuPy `CFunctionAllocator`: [`resize_cupy_malloc`], [`resize_cupy_free`];
//! * cuda.core `MemoryResource` and Numba's external memory manager (their Python classes live
//!   in the `python/` package): [`resize_device_allocate`], [`resize_device_deallocate`].
//!
//! Every call is pooled whatever the region state (the framework chose the allocator), unless
//! `RESIZEALLOC_CUDA=off`, which makes them plain driver calls. The driver is found and
//! initialised by the first call (`libcuda.so.1` is opened if nobody has yet). The block comes
//! from the pool of the device's context: the current one when it belongs to that device, else
//! the device's primary context (retained once, for the life of the process, as cudart does).
//! During a stream capture the allocation goes to the driver, as in the hooks. Nothing here
//! panics; bad input gets a CUDA error code (or NULL where the framework expects a pointer).

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use resizealloc::device::pool::PoolError;
use resizealloc::options;

use super::capture;
use super::driver::{
    self as drv, CUcontext, CUdeviceptr, CUresult, CUstream, CUDA_ERROR_INVALID_DEVICE,
    CUDA_ERROR_INVALID_VALUE, CUDA_SUCCESS,
};
use super::driver_hooks::{pool_free, FreeKind};
use super::pools::{self, stream_id, SYNC_STREAM};

/// Devices a plug-in call may name.
const MAX_DEVICES: usize = 64;

#[allow(clippy::declare_interior_mutable_const)]
const NO_CONTEXT: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
/// Each device's primary context, retained by the first call that needed it.
static PRIMARY: [AtomicPtr<c_void>; MAX_DEVICES] = [NO_CONTEXT; MAX_DEVICES];

/// 0: not tried, 1: the driver is initialised, 2: no driver.
static DRIVER: AtomicU8 = AtomicU8::new(0);

/// Finds and initialises the driver once; the error the call answers when there is none.
fn driver_ready() -> Result<(), CUresult> {
    match DRIVER.load(Ordering::Acquire) {
        1 => Ok(()),
        2 => Err(drv::no_driver()),
        _ => init_driver(),
    }
}

#[cold]
#[inline(never)]
fn init_driver() -> Result<(), CUresult> {
    if drv::cu_init().is_none() {
        // Opened, never closed: the driver stays for the life of the process anyway.
        // SAFETY: a NUL-terminated name; dlopen has no other precondition.
        unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    }
    let Some(init) = drv::cu_init() else {
        DRIVER.store(2, Ordering::Release);
        return Err(drv::init_without_driver());
    };
    // SAFETY: the real cuInit; it may be called any number of times.
    let r = unsafe { init(0) };
    if r != CUDA_SUCCESS {
        return Err(r);
    }
    DRIVER.store(1, Ordering::Release);
    Ok(())
}

/// The context whose pool serves `device`: the current one if it is that device's, else the
/// device's primary context. An error code for an unknown device.
fn device_context(device: c_int) -> Result<CUcontext, CUresult> {
    driver_ready()?;
    let Ok(index) = usize::try_from(device) else {
        return Err(CUDA_ERROR_INVALID_DEVICE);
    };
    if index >= MAX_DEVICES {
        return Err(CUDA_ERROR_INVALID_DEVICE);
    }
    let current = drv::current_context();
    if !current.is_null() {
        if let Some(get_device) = drv::cu_ctx_get_device() {
            let mut dev: c_int = -1;
            // SAFETY: a valid out pointer.
            if unsafe { get_device(&mut dev) } == CUDA_SUCCESS && dev == device {
                return Ok(current);
            }
        }
    }
    let ctx = PRIMARY[index].load(Ordering::Acquire);
    if !ctx.is_null() {
        return Ok(ctx);
    }
    retain_primary(device, index)
}

#[cold]
#[inline(never)]
fn retain_primary(device: c_int, index: usize) -> Result<CUcontext, CUresult> {
    let Some(retain) = drv::cu_device_primary_ctx_retain() else {
        return Err(drv::no_driver());
    };
    let mut ctx: CUcontext = core::ptr::null_mut();
    // SAFETY: a valid out pointer; the driver checks the device number.
    let r = unsafe { retain(&mut ctx, device) };
    if r != CUDA_SUCCESS {
        return Err(if r == CUDA_ERROR_INVALID_VALUE {
            CUDA_ERROR_INVALID_DEVICE
        } else {
            r
        });
    }
    match PRIMARY[index].compare_exchange(
        core::ptr::null_mut(),
        ctx,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => Ok(ctx),
        Err(first) => {
            // Another thread retained it first: give this reference back.
            if let Some(release) = drv::cu_device_primary_ctx_release_v2() {
                // SAFETY: pairs with the retain above.
                unsafe { release(device) };
            }
            Ok(first)
        }
    }
}

/// The driver's own allocation, for what the pool does not serve (capture, `RESIZEALLOC_CUDA`
/// off, no room for another pool): stream-ordered when `stream` is given.
#[cold]
#[inline(never)]
fn driver_alloc(
    ctx: CUcontext,
    size: usize,
    stream: Option<CUstream>,
    out: &mut CUdeviceptr,
) -> CUresult {
    match stream {
        Some(s) => match drv::cu_mem_alloc_async() {
            // SAFETY: a valid out pointer; the stream is the caller's.
            Some(f) => pools::in_context(ctx, || unsafe { f(out, size, s) }),
            None => drv::no_driver(),
        },
        None => match drv::cu_mem_alloc_v2() {
            // SAFETY: a valid out pointer.
            Some(f) => pools::in_context(ctx, || unsafe { f(out, size) }),
            None => drv::no_driver(),
        },
    }
}

/// Allocates `size` bytes on `device` for `stream` (`None`: not stream-ordered).
fn allocate(size: usize, device: c_int, stream: Option<CUstream>) -> Result<CUdeviceptr, CUresult> {
    let ctx = device_context(device)?;
    let mut out: CUdeviceptr = 0;
    let pooled =
        options::get().cuda && !stream.is_some_and(|s| capture::stream_capturing(s, false, ctx));
    if pooled {
        let id = stream.map_or(SYNC_STREAM, |s| stream_id(s, false));
        match pools::alloc_in(ctx, size, id) {
            Some(Ok(p)) => return Ok(p),
            Some(Err(PoolError::Capturing)) | None => {}
            Some(Err(e)) => return Err(pools::code(e)),
        }
    }
    match driver_alloc(ctx, size, stream, &mut out) {
        CUDA_SUCCESS => Ok(out),
        e => Err(e),
    }
}

/// Frees `ptr` (from [`allocate`]): stream-ordered on `stream` when given.
fn deallocate(ptr: CUdeviceptr, stream: Option<CUstream>) -> CUresult {
    if let Err(e) = driver_ready() {
        return e;
    }
    let kind = stream.map_or(FreeKind::Sync, |s| FreeKind::Async(s, false));
    if let Some(r) = pool_free(ptr, kind) {
        return r;
    }
    // Not a pool block: the driver's (served during a capture, or with pooling off).
    match stream {
        Some(s) => match drv::cu_mem_free_async() {
            // SAFETY: forwarded arguments.
            Some(f) => unsafe { f(ptr, s) },
            None => drv::no_driver(),
        },
        None => match drv::cu_mem_free_v2() {
            // SAFETY: forwarded argument.
            Some(f) => unsafe { f(ptr) },
            None => drv::no_driver(),
        },
    }
}

/// cuda.core / Numba: allocates `size` bytes on `device`, stream-ordered on `stream` (NULL is
/// the legacy default stream), into `*out`. Returns 0, or a CUDA error code:
/// `CUDA_ERROR_INVALID_VALUE` (1) for a NULL `out`, `CUDA_ERROR_INVALID_DEVICE` (101) for an
/// unknown device, the driver's code otherwise (2 for out of memory). Size 0 gives NULL and 0.
#[no_mangle]
pub extern "C" fn resize_device_allocate(
    size: usize,
    device: c_int,
    stream: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    if out.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if size == 0 {
        // SAFETY: non-null out pointer from the caller.
        unsafe { *out = core::ptr::null_mut() };
        return CUDA_SUCCESS;
    }
    match allocate(size, device, Some(stream)) {
        Ok(p) => {
            // SAFETY: non-null out pointer from the caller.
            unsafe { *out = p as *mut c_void };
            CUDA_SUCCESS
        }
        Err(e) => e,
    }
}

/// cuda.core / Numba: frees a block from [`resize_device_allocate`], stream-ordered on
/// `stream` (reusable at once on that stream, elsewhere after a synchronisation). NULL is a
/// no-op. Returns 0, or a CUDA error code (`CUDA_ERROR_INVALID_VALUE` for a pointer that is
/// not a live block, `CUDA_ERROR_INVALID_DEVICE` for an unknown device).
#[no_mangle]
pub extern "C" fn resize_device_deallocate(
    ptr: *mut c_void,
    size: usize,
    device: c_int,
    stream: *mut c_void,
) -> c_int {
    let _ = size;
    if !(0..MAX_DEVICES as c_int).contains(&device) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if ptr.is_null() {
        return CUDA_SUCCESS;
    }
    deallocate(ptr as CUdeviceptr, Some(stream))
}

/// PyTorch `CUDAPluggableAllocator` `alloc`: NULL on failure (PyTorch then raises its
/// out-of-memory error), and for a negative size or an unknown device.
#[no_mangle]
pub extern "C" fn resize_torch_alloc(
    size: isize,
    device: c_int,
    stream: *mut c_void,
) -> *mut c_void {
    let Ok(size) = usize::try_from(size) else {
        return core::ptr::null_mut();
    };
    if size == 0 {
        return core::ptr::null_mut();
    }
    allocate(size, device, Some(stream)).map_or(core::ptr::null_mut(), |p| p as *mut c_void)
}

/// PyTorch `CUDAPluggableAllocator` `free`: stream-ordered on the block's stream (PyTorch
/// passes the stream it allocated on; its own `record_stream` events delay the call until other
/// streams are done with the block).
#[no_mangle]
pub extern "C" fn resize_torch_free(
    ptr: *mut c_void,
    size: isize,
    device: c_int,
    stream: *mut c_void,
) {
    let _ = (size, device);
    if !ptr.is_null() {
        let _ = deallocate(ptr as CUdeviceptr, Some(stream));
    }
}

/// CuPy `CFunctionAllocator` `malloc` (`param` is CuPy's opaque argument, unused): NULL on
/// failure. CuPy passes no stream, so the block is not stream-ordered: its free makes it
/// reusable after a synchronisation (the pool's own, once per batch, when nobody else syncs).
#[no_mangle]
pub extern "C" fn resize_cupy_malloc(
    param: *mut c_void,
    size: usize,
    device: c_int,
) -> *mut c_void {
    let _ = param;
    if size == 0 {
        return core::ptr::null_mut();
    }
    allocate(size, device, None).map_or(core::ptr::null_mut(), |p| p as *mut c_void)
}

/// CuPy `CFunctionAllocator` `free`.
#[no_mangle]
pub extern "C" fn resize_cupy_free(param: *mut c_void, ptr: *mut c_void, device: c_int) {
    let _ = (param, device);
    if !ptr.is_null() {
        let _ = deallocate(ptr as CUdeviceptr, None);
    }
}
