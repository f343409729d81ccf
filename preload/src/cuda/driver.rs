//! The real CUDA driver and runtime: their types, the error codes the hooks return, and each
//! real function looked up once, never through our own hooks.
//!
//! Driver functions are looked up in the loaded `libcuda.so.1` (which cudart opens with
//! `RTLD_LOCAL`), else in the objects after this library. Runtime functions (`cudaMalloc`, …)
//! are the next definition after this library (`RTLD_NEXT`), i.e. the shared cudart's.
//! Every lookup goes through the real `dlsym`, found with `dlvsym`, since ours is overridden.

use core::ffi::{c_char, c_int, c_uint, c_void, CStr};
use core::sync::atomic::{AtomicPtr, Ordering};

pub type CUresult = c_int;
pub type CUdeviceptr = u64;
pub type CUstream = *mut c_void;
pub type CUcontext = *mut c_void;
pub type CUdevice = c_int;
/// `cudaError_t`: its values for the cases the hooks produce equal the driver's
/// (`cudaSuccess` 0, `cudaErrorInvalidValue` 1, `cudaErrorMemoryAllocation` 2).
pub type CudaError = c_int;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NOT_FOUND: CUresult = 500;
/// `CUDA_ERROR_NOT_SUPPORTED` / `cudaErrorNotSupported` (same value).
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = 801;
/// `CUDA_ERROR_INVALID_DEVICE` (`cudaErrorInvalidDevice` is 101 too).
pub const CUDA_ERROR_INVALID_DEVICE: CUresult = 101;
/// What the driver API answers before `cuInit`.
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
/// What `cuInit` answers when it finds no GPU, and later driver calls with it.
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
/// `cudaErrorInitializationError`: a runtime hook without a cudart after us, in a process that
/// has a driver.
pub const CUDA_RT_ERROR_INITIALIZATION: CudaError = 3;
/// `cudaErrorInsufficientDriver`: what a real cudart answers on a machine without a driver.
pub const CUDA_RT_ERROR_INSUFFICIENT_DRIVER: CudaError = 35;

/// Set when the program called `cuInit` and no driver was there to answer it.
static INIT_WITHOUT_DRIVER: core::sync::atomic::AtomicBool =
    core::sync::atomic::AtomicBool::new(false);

/// What a driver hook answers when the real function is not in the process: what a driver
/// that finds no GPU answers, `CUDA_ERROR_NOT_INITIALIZED` before `cuInit` and
/// `CUDA_ERROR_NO_DEVICE` after it.
pub fn no_driver() -> CUresult {
    if INIT_WITHOUT_DRIVER.load(Ordering::Relaxed) {
        CUDA_ERROR_NO_DEVICE
    } else {
        CUDA_ERROR_NOT_INITIALIZED
    }
}

/// `cuInit` without a driver: remembered for [`no_driver`].
pub fn init_without_driver() -> CUresult {
    INIT_WITHOUT_DRIVER.store(true, Ordering::Relaxed);
    CUDA_ERROR_NO_DEVICE
}

/// Whether a CUDA driver is in the process (its `cuInit` can be found).
pub fn driver_present() -> bool {
    cu_init().is_some()
}

/// What a runtime hook answers when no cudart follows us: what a real cudart answers on a
/// machine without a driver (`cudaErrorInsufficientDriver`) when there is no driver either,
/// else `cudaErrorInitializationError`.
pub fn no_runtime() -> CudaError {
    if driver_present() {
        CUDA_RT_ERROR_INITIALIZATION
    } else {
        CUDA_RT_ERROR_INSUFFICIENT_DRIVER
    }
}
pub const CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: c_int = 11;
pub const CU_POINTER_ATTRIBUTE_RANGE_SIZE: c_int = 12;
pub const CU_POINTER_ATTRIBUTE_BUFFER_ID: c_int = 7;

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// The real `dlsym`, found with `dlvsym` (glibc exports two versions of it). The naked `dlsym`
/// override jumps through this word.
pub static RESIZEALLOC_REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

pub fn real_dlsym() -> DlsymFn {
    let mut p = RESIZEALLOC_REAL_DLSYM.load(Ordering::Acquire);
    if p.is_null() {
        for version in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
            // SAFETY: NUL-terminated names; RTLD_NEXT lookup from this library.
            p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) };
            if !p.is_null() {
                break;
            }
        }
        if p.is_null() {
            resizealloc::os::fatal(b"resizealloc: cannot find the real dlsym\n");
        }
        RESIZEALLOC_REAL_DLSYM.store(p, Ordering::Release);
    }
    // SAFETY: `p` is glibc's dlsym.
    unsafe { core::mem::transmute::<*mut c_void, DlsymFn>(p) }
}

/// `name` in the already loaded object `soname`, if both exist. Finds objects loaded with
/// `RTLD_LOCAL` too (`RTLD_NOLOAD` only looks, never loads).
fn symbol_in_loaded(soname: &CStr, name: &CStr) -> *mut c_void {
    // SAFETY: NUL-terminated names; RTLD_NOLOAD only finds an object that is already loaded,
    // and the handle is closed again (the object stays loaded: it was before).
    unsafe {
        let handle = libc::dlopen(soname.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return core::ptr::null_mut();
        }
        let p = real_dlsym()(handle, name.as_ptr());
        libc::dlclose(handle);
        p
    }
}

/// The next definition of `name` after this library.
fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: NUL-terminated name; the real dlsym called from this library, so RTLD_NEXT means
    // "after libresizealloc.so".
    unsafe { real_dlsym()(libc::RTLD_NEXT, name.as_ptr()) }
}

/// The real driver function `name` (see the module documentation).
pub fn driver_symbol(name: &CStr) -> *mut c_void {
    let p = symbol_in_loaded(c"libcuda.so.1", name);
    if p.is_null() {
        next_symbol(name)
    } else {
        p
    }
}

/// cudart's sonames, newest first, for a cudart loaded outside the global scope.
const CUDART_SONAMES: [&CStr; 4] = [
    c"libcudart.so.13",
    c"libcudart.so.12",
    c"libcudart.so.11.0",
    c"libcudart.so",
];

/// The real runtime function `name`: the next definition after this library, else the one in
/// a cudart that is loaded but not global (a dependency of a library opened with `RTLD_LOCAL`,
/// as Python extension modules are; its callers still bind to our export first).
pub fn runtime_symbol(name: &CStr) -> *mut c_void {
    let p = next_symbol(name);
    if !p.is_null() {
        return p;
    }
    CUDART_SONAMES
        .iter()
        .map(|soname| symbol_in_loaded(soname, name))
        .find(|p| !p.is_null())
        .unwrap_or(core::ptr::null_mut())
}

/// `fn name() -> Option<Type>`: the real function, looked up with `$lookup` once and cached.
macro_rules! real_fns {
    ($lookup:ident: $($fn_name:ident = $sym:literal as $ty:ty;)*) => {$(
        pub fn $fn_name() -> Option<$ty> {
            static CACHE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
            let mut p = CACHE.load(Ordering::Acquire);
            if p.is_null() {
                p = $lookup($sym);
                CACHE.store(p, Ordering::Release);
            }
            // SAFETY: `p` is null or the real function of this name, which has this signature
            // (the CUDA headers' declaration).
            unsafe { core::mem::transmute::<*mut c_void, Option<$ty>>(p) }
        }
    )*};
}

pub type AllocFn = unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult;
pub type FreeFn = unsafe extern "C" fn(CUdeviceptr) -> CUresult;
pub type AllocAsyncFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
pub type FreeAsyncFn = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult;
pub type SyncFn = unsafe extern "C" fn() -> CUresult;
pub type InitFn = unsafe extern "C" fn(c_uint) -> CUresult;
pub type CtxFn = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
/// `cuCtxDestroy_v2`, `cuCtxPushCurrent_v2`: a context in.
pub type CtxArgFn = unsafe extern "C" fn(CUcontext) -> CUresult;
pub type StreamFn = unsafe extern "C" fn(CUstream) -> CUresult;
pub type PoolSetAccessFn = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> CUresult;
pub type StreamCtxFn = unsafe extern "C" fn(CUstream, *mut CUcontext) -> CUresult;
pub type CtxDeviceFn = unsafe extern "C" fn(*mut CUdevice) -> CUresult;
pub type DeviceFn = unsafe extern "C" fn(CUdevice) -> CUresult;
pub type PrimaryRetainFn = unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult;
pub type PrimaryStateFn = unsafe extern "C" fn(CUdevice, *mut c_uint, *mut c_int) -> CUresult;
pub type PoolAllocFn =
    unsafe extern "C" fn(*mut CUdeviceptr, usize, *mut c_void, CUstream) -> CUresult;
pub type PoolCreateFn = unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CUresult;
pub type RangeFn = unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult;
pub type AttrFn = unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
pub type AttrsFn =
    unsafe extern "C" fn(c_uint, *mut c_int, *mut *mut c_void, CUdeviceptr) -> CUresult;
pub type CaptureInfoFn = unsafe extern "C" fn(
    CUstream,
    *mut c_int,
    *mut u64,
    *mut c_void,
    *mut c_void,
    *mut c_void,
) -> CUresult;
pub type IsCapturingFn = unsafe extern "C" fn(CUstream, *mut c_int) -> CUresult;
pub type BeginCaptureFn = unsafe extern "C" fn(CUstream, c_int) -> CUresult;
pub type EndCaptureFn = unsafe extern "C" fn(CUstream, *mut *mut c_void) -> CUresult;
pub type IpcHandleFn = unsafe extern "C" fn(*mut c_void, CUdeviceptr) -> CUresult;
pub type MemCreateFn = unsafe extern "C" fn(*mut u64, usize, *const c_void, u64) -> CUresult;
pub type AllocManagedFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, c_uint) -> CUresult;
pub type AllocHostFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult;
pub type HostAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CUresult;
pub type ProcFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
pub type ProcV2Fn =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;

real_fns! { driver_symbol:
    cu_init = c"cuInit" as InitFn;
    cu_ctx_get_current = c"cuCtxGetCurrent" as CtxFn;
    cu_ctx_synchronize = c"cuCtxSynchronize" as SyncFn;
    cu_ctx_destroy_v2 = c"cuCtxDestroy_v2" as CtxArgFn;
    cu_ctx_get_device = c"cuCtxGetDevice" as CtxDeviceFn;
    cu_ctx_push_current_v2 = c"cuCtxPushCurrent_v2" as CtxArgFn;
    cu_ctx_pop_current_v2 = c"cuCtxPopCurrent_v2" as CtxFn;
    cu_stream_get_ctx = c"cuStreamGetCtx" as StreamCtxFn;
    cu_stream_destroy_v2 = c"cuStreamDestroy_v2" as StreamFn;
    cu_mem_pool_set_access = c"cuMemPoolSetAccess" as PoolSetAccessFn;
    cu_device_primary_ctx_reset_v2 = c"cuDevicePrimaryCtxReset_v2" as DeviceFn;
    cu_device_primary_ctx_retain = c"cuDevicePrimaryCtxRetain" as PrimaryRetainFn;
    cu_device_primary_ctx_release_v2 = c"cuDevicePrimaryCtxRelease_v2" as DeviceFn;
    cu_device_primary_ctx_get_state = c"cuDevicePrimaryCtxGetState" as PrimaryStateFn;
    cu_get_proc_address = c"cuGetProcAddress" as ProcFn;
    cu_get_proc_address_v2 = c"cuGetProcAddress_v2" as ProcV2Fn;
    cu_mem_alloc_v2 = c"cuMemAlloc_v2" as AllocFn;
    cu_mem_free_v2 = c"cuMemFree_v2" as FreeFn;
    cu_mem_alloc_async = c"cuMemAllocAsync" as AllocAsyncFn;
    cu_mem_alloc_async_ptsz = c"cuMemAllocAsync_ptsz" as AllocAsyncFn;
    cu_mem_free_async = c"cuMemFreeAsync" as FreeAsyncFn;
    cu_mem_free_async_ptsz = c"cuMemFreeAsync_ptsz" as FreeAsyncFn;
    cu_mem_get_address_range_v2 = c"cuMemGetAddressRange_v2" as RangeFn;
    cu_pointer_get_attribute = c"cuPointerGetAttribute" as AttrFn;
    cu_pointer_get_attributes = c"cuPointerGetAttributes" as AttrsFn;
    cu_mem_alloc_from_pool_async = c"cuMemAllocFromPoolAsync" as PoolAllocFn;
    cu_mem_alloc_from_pool_async_ptsz = c"cuMemAllocFromPoolAsync_ptsz" as PoolAllocFn;
    cu_mem_pool_create = c"cuMemPoolCreate" as PoolCreateFn;
    cu_stream_get_capture_info_v2 = c"cuStreamGetCaptureInfo_v2" as CaptureInfoFn;
    cu_stream_is_capturing = c"cuStreamIsCapturing" as IsCapturingFn;
    cu_stream_begin_capture_v2 = c"cuStreamBeginCapture_v2" as BeginCaptureFn;
    cu_stream_begin_capture_ptsz = c"cuStreamBeginCapture_ptsz" as BeginCaptureFn;
    cu_stream_end_capture = c"cuStreamEndCapture" as EndCaptureFn;
    cu_stream_end_capture_ptsz = c"cuStreamEndCapture_ptsz" as EndCaptureFn;
    cu_ipc_get_mem_handle = c"cuIpcGetMemHandle" as IpcHandleFn;
    cu_mem_create = c"cuMemCreate" as MemCreateFn;
    cu_mem_alloc_managed = c"cuMemAllocManaged" as AllocManagedFn;
    cu_mem_alloc_host_v2 = c"cuMemAllocHost_v2" as AllocHostFn;
    cu_mem_host_alloc = c"cuMemHostAlloc" as HostAllocFn;
}

pub type RtMallocFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> CudaError;
pub type RtFreeFn = unsafe extern "C" fn(*mut c_void) -> CudaError;
pub type RtMallocAsyncFn = unsafe extern "C" fn(*mut *mut c_void, usize, CUstream) -> CudaError;
pub type RtFreeAsyncFn = unsafe extern "C" fn(*mut c_void, CUstream) -> CudaError;
pub type RtVoidFn = unsafe extern "C" fn() -> CudaError;

real_fns! { runtime_symbol:
    cuda_malloc = c"cudaMalloc" as RtMallocFn;
    cuda_free = c"cudaFree" as RtFreeFn;
    cuda_malloc_async = c"cudaMallocAsync" as RtMallocAsyncFn;
    cuda_malloc_async_ptsz = c"cudaMallocAsync_ptsz" as RtMallocAsyncFn;
    cuda_free_async = c"cudaFreeAsync" as RtFreeAsyncFn;
    cuda_free_async_ptsz = c"cudaFreeAsync_ptsz" as RtFreeAsyncFn;
    cuda_device_synchronize = c"cudaDeviceSynchronize" as RtVoidFn;
    cuda_device_reset = c"cudaDeviceReset" as RtVoidFn;
}

/// The real `cuCtxSynchronize`, or [`no_driver`]'s answer without a driver.
pub fn sync_now() -> CUresult {
    match cu_ctx_synchronize() {
        // SAFETY: the driver's cuCtxSynchronize.
        Some(f) => unsafe { f() },
        None => no_driver(),
    }
}

/// The calling thread's current context (null when there is none or no driver).
pub fn current_context() -> CUcontext {
    let mut ctx: CUcontext = core::ptr::null_mut();
    if let Some(f) = cu_ctx_get_current() {
        // SAFETY: valid out pointer.
        if unsafe { f(&mut ctx) } != CUDA_SUCCESS {
            ctx = core::ptr::null_mut();
        }
    }
    ctx
}
