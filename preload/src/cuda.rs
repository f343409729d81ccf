//! CUDA driver hooks: `cuMemAlloc_v2`, `cuMemFree_v2`, `cuMemAllocAsync`/`cuMemFreeAsync` (and
//! their `_ptsz` variants) are served by the device pool inside regions (or always, with
//! `RESIZEALLOC_REGION=process`); `cuCtxSynchronize` tells the pool when freed blocks are safe
//! to reuse; `cuMemGetAddressRange_v2` and the range attributes of `cuPointerGetAttribute`
//! answer for suballocated blocks.
//!
//! How the hooks reach a program:
//! * by symbol interposition, for programs that link `libcuda` (these exports);
//! * through `dlsym`, which is overridden (a naked function, so glibc's `RTLD_NEXT` logic still
//!   sees the real caller) for the hooked names only;
//! * through `cuGetProcAddress`/`_v2`, whose answers are swapped for the hooked names. This is
//!   the route of cudart >= 12 and cuda-python.
//!
//! The pool's own driver calls go to the real driver, found with the real `dlsym` on the loaded
//! `libcuda.so.1`, never through these hooks. `RESIZEALLOC_CUDA=off` makes every hook a plain
//! pass-through. `cuMemAllocFromPoolAsync` is served too, except for driver pools created
//! exportable for IPC (tracked through `cuMemPoolCreate`). The runtime API is reached through
//! cudart's own `cuGetProcAddress` lookups; there are no `cudaMalloc` exports.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicPtr, Ordering};

use resizealloc::device::pool::{DevicePool, PoolError};
use resizealloc::device::{Backend, DevPtr};
use resizealloc::options::{self, RegionMode};

type CUresult = c_int;
type CUdeviceptr = u64;
type CUstream = *mut c_void;
type CUcontext = *mut c_void;

const CUDA_SUCCESS: CUresult = 0;
const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
const CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: c_int = 11;
const CU_POINTER_ATTRIBUTE_RANGE_SIZE: c_int = 12;
const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 2;

// ------------------------------------------------------------------------------ the real driver

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// The real `dlsym`, found with `dlvsym` (glibc exports two versions of it).
static RESIZEALLOC_REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

fn real_dlsym() -> DlsymFn {
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

/// The real driver function `name`: looked up in the loaded `libcuda.so.1` (which may have been
/// opened with `RTLD_LOCAL`, as cudart does), else in the objects after this one.
fn real_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: NUL-terminated names; RTLD_NOLOAD only finds an object that is already loaded.
    unsafe {
        let handle = libc::dlopen(
            c"libcuda.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        );
        let mut p = core::ptr::null_mut();
        if !handle.is_null() {
            p = real_dlsym()(handle, name.as_ptr());
            libc::dlclose(handle);
        }
        if p.is_null() {
            p = real_dlsym()(libc::RTLD_NEXT, name.as_ptr());
        }
        p
    }
}

macro_rules! real_fn {
    ($cache:ident, $name:literal, $ty:ty) => {{
        static $cache: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
        let mut p = $cache.load(Ordering::Acquire);
        if p.is_null() {
            p = real_symbol($name);
            $cache.store(p, Ordering::Release);
        }
        // SAFETY: `p` is null or the driver's function of this name and signature.
        unsafe { core::mem::transmute::<*mut c_void, Option<$ty>>(p) }
    }};
}

type AllocFn = unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult;
type FreeFn = unsafe extern "C" fn(CUdeviceptr) -> CUresult;
type AllocAsyncFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult;
type FreeAsyncFn = unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult;
type SyncFn = unsafe extern "C" fn() -> CUresult;
type CtxFn = unsafe extern "C" fn(*mut CUcontext) -> CUresult;
type PoolAllocFn = unsafe extern "C" fn(*mut CUdeviceptr, usize, *mut c_void, CUstream) -> CUresult;
type PoolCreateFn = unsafe extern "C" fn(*mut *mut c_void, *const c_void) -> CUresult;
type RangeFn = unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult;
type AttrFn = unsafe extern "C" fn(*mut c_void, c_int, CUdeviceptr) -> CUresult;
type ProcFn = unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64) -> CUresult;
type ProcV2Fn =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> CUresult;

/// The driver's functions, each looked up once (see `real_symbol`).
fn drv_cuctxgetcurrent() -> Option<CtxFn> {
    real_fn!(REAL, c"cuCtxGetCurrent", CtxFn)
}

fn drv_cuctxsynchronize() -> Option<SyncFn> {
    real_fn!(REAL, c"cuCtxSynchronize", SyncFn)
}

fn drv_cugetprocaddress() -> Option<ProcFn> {
    real_fn!(REAL, c"cuGetProcAddress", ProcFn)
}

fn drv_cugetprocaddress_v2() -> Option<ProcV2Fn> {
    real_fn!(REAL, c"cuGetProcAddress_v2", ProcV2Fn)
}

fn drv_cumemallocasync() -> Option<AllocAsyncFn> {
    real_fn!(REAL, c"cuMemAllocAsync", AllocAsyncFn)
}

fn drv_cumemallocasync_ptsz() -> Option<AllocAsyncFn> {
    real_fn!(REAL, c"cuMemAllocAsync_ptsz", AllocAsyncFn)
}

fn drv_cumemalloc_v2() -> Option<AllocFn> {
    real_fn!(REAL, c"cuMemAlloc_v2", AllocFn)
}

fn drv_cumemfreeasync() -> Option<FreeAsyncFn> {
    real_fn!(REAL, c"cuMemFreeAsync", FreeAsyncFn)
}

fn drv_cumemfreeasync_ptsz() -> Option<FreeAsyncFn> {
    real_fn!(REAL, c"cuMemFreeAsync_ptsz", FreeAsyncFn)
}

fn drv_cumemfree_v2() -> Option<FreeFn> {
    real_fn!(REAL, c"cuMemFree_v2", FreeFn)
}

fn drv_cumemgetaddressrange_v2() -> Option<RangeFn> {
    real_fn!(REAL, c"cuMemGetAddressRange_v2", RangeFn)
}

fn drv_cupointergetattribute() -> Option<AttrFn> {
    real_fn!(REAL, c"cuPointerGetAttribute", AttrFn)
}

fn drv_cumemallocfrompoolasync() -> Option<PoolAllocFn> {
    real_fn!(REAL, c"cuMemAllocFromPoolAsync", PoolAllocFn)
}

fn drv_cumemallocfrompoolasync_ptsz() -> Option<PoolAllocFn> {
    real_fn!(REAL, c"cuMemAllocFromPoolAsync_ptsz", PoolAllocFn)
}

fn drv_cumempoolcreate() -> Option<PoolCreateFn> {
    real_fn!(REAL, c"cuMemPoolCreate", PoolCreateFn)
}

/// A driver call that could not be found answers like a driver that is not there.
const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;

// ------------------------------------------------------------------------------ pools

/// The pool's backing calls: the real driver, never the hooks.
struct Driver;

impl Backend for Driver {
    type Error = CUresult;

    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, CUresult> {
        let Some(f) = drv_cumemalloc_v2() else {
            return Err(CUDA_ERROR_NOT_INITIALIZED);
        };
        let mut p: CUdeviceptr = 0;
        // SAFETY: valid out pointer.
        match unsafe { f(&mut p, bytes) } {
            CUDA_SUCCESS => Ok(p),
            e => Err(e),
        }
    }

    fn free(&mut self, ptr: DevPtr) -> Result<(), CUresult> {
        let Some(f) = drv_cumemfree_v2() else {
            return Err(CUDA_ERROR_NOT_INITIALIZED);
        };
        // SAFETY: `ptr` is a segment the pool got from the real driver.
        match unsafe { f(ptr) } {
            CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn synchronize(&mut self) -> Result<(), CUresult> {
        match real_sync() {
            CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn is_out_of_memory(&self, e: &CUresult) -> bool {
        *e == CUDA_ERROR_OUT_OF_MEMORY
    }
}

fn real_sync() -> CUresult {
    match drv_cuctxsynchronize() {
        // SAFETY: the driver's cuCtxSynchronize.
        Some(f) => unsafe { f() },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

/// One pool per context, keyed by the context handle. A spin lock that yields (threads may
/// wait here for a driver call), which the fork handlers can take and force open.
static POOLS: spin::mutex::SpinMutex<Vec<(usize, DevicePool<Driver>)>, spin::relax::Yield> =
    spin::mutex::SpinMutex::new(Vec::new());

/// Looks up every driver function the pool uses, so that no lookup (which may take the dynamic
/// loader's lock) ever happens while `POOLS` is held.
fn resolve_driver() {
    let _ = (
        drv_cumemalloc_v2(),
        drv_cumemfree_v2(),
        drv_cuctxsynchronize(),
        drv_cuctxgetcurrent(),
    );
}

/// Fork support: hold the pool lock across `fork` (see `lib.rs`).
pub fn fork_prepare() {
    core::mem::forget(POOLS.lock());
}

/// Fork support: release the lock taken by [`fork_prepare`], in the parent and in the child.
pub fn fork_finish() {
    // SAFETY: `fork_prepare` took the lock in this thread (or its copy in the child).
    unsafe { POOLS.force_unlock() };
}

fn current_context() -> usize {
    let mut ctx: CUcontext = core::ptr::null_mut();
    if let Some(f) = drv_cuctxgetcurrent() {
        // SAFETY: valid out pointer.
        unsafe { f(&mut ctx) };
    }
    ctx as usize
}

fn with_pool<R>(f: impl FnOnce(&mut DevicePool<Driver>) -> R) -> R {
    resolve_driver();
    let ctx = current_context();
    let mut pools = POOLS.lock();
    let i = match pools.iter().position(|(c, _)| *c == ctx) {
        Some(i) => i,
        None => {
            pools.push((ctx, DevicePool::new(Driver)));
            pools.len() - 1
        }
    };
    f(&mut pools[i].1)
}

/// The pool holding `ptr` in one of its segments, if any (any context).
fn with_owner<R>(ptr: DevPtr, f: impl FnOnce(&mut DevicePool<Driver>) -> R) -> Option<R> {
    resolve_driver();
    let mut pools = POOLS.lock();
    let pool = pools
        .iter_mut()
        .find(|(_, p)| p.owns(ptr))
        .map(|(_, p)| p)?;
    Some(f(pool))
}

/// Whether new allocations go to the pool now.
fn pooled() -> bool {
    let o = options::get();
    o.cuda
        && (o.region == RegionMode::Process
            || (o.region == RegionMode::Markers && resizealloc::region_depth() > 0))
}

/// Stream identity for the pool's reuse rule ("reusable at once on the same stream"):
/// * synchronous allocations (`cuMemAlloc`) never match an async-freed block;
/// * `CU_STREAM_LEGACY` (1) is the legacy default stream, like 0 in the plain variants;
/// * `CU_STREAM_PER_THREAD` (2), and 0 in the `_ptsz` variants, are the calling thread's own
///   per-thread stream, which differs between threads although the handle is the same.
const SYNC_STREAM: u64 = u64::MAX;
const CU_STREAM_LEGACY: u64 = 1;
const CU_STREAM_PER_THREAD: u64 = 2;

fn stream_id(stream: CUstream, per_thread_default: bool) -> u64 {
    let handle = stream as u64;
    let per_thread = handle == CU_STREAM_PER_THREAD || (handle == 0 && per_thread_default);
    if per_thread {
        // The thread's own state block: unique among running threads.
        (1 << 62) | resizealloc::region::state() as *const _ as u64
    } else if handle == CU_STREAM_LEGACY {
        0
    } else {
        handle
    }
}

fn code(e: PoolError<CUresult>) -> CUresult {
    match e {
        PoolError::ZeroSize | PoolError::InvalidPointer => CUDA_ERROR_INVALID_VALUE,
        PoolError::Backend(e) => e,
    }
}

// ------------------------------------------------------------------------------ the hooks

fn pool_alloc(dptr: *mut CUdeviceptr, size: usize, stream: u64) -> CUresult {
    if dptr.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    match with_pool(|p| p.alloc(size, stream)) {
        Ok(ptr) => {
            // SAFETY: non-null out pointer from the caller.
            unsafe { *dptr = ptr };
            CUDA_SUCCESS
        }
        Err(e) => code(e),
    }
}

/// `cuMemAlloc_v2`.
#[no_mangle]
pub extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize) -> CUresult {
    if pooled() {
        return pool_alloc(dptr, size, SYNC_STREAM);
    }
    match drv_cumemalloc_v2() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dptr, size) },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

/// `cuMemFree_v2`: pool blocks go back to the pool (reusable after the next sync).
#[no_mangle]
pub extern "C" fn cuMemFree_v2(ptr: CUdeviceptr) -> CUresult {
    if let Some(r) = with_owner(ptr, |p| p.free(ptr)) {
        return r.map_or_else(code, |()| CUDA_SUCCESS);
    }
    match drv_cumemfree_v2() {
        // SAFETY: not ours: forwarded.
        Some(f) => unsafe { f(ptr) },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

fn alloc_async(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
    ptsz: bool,
    real: Option<AllocAsyncFn>,
) -> CUresult {
    if pooled() {
        return pool_alloc(dptr, size, stream_id(stream, ptsz));
    }
    match real {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dptr, size, stream) },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

fn free_async(
    ptr: CUdeviceptr,
    stream: CUstream,
    ptsz: bool,
    real: Option<FreeAsyncFn>,
) -> CUresult {
    let id = stream_id(stream, ptsz);
    if let Some(r) = with_owner(ptr, |p| p.free_async(ptr, id)) {
        return r.map_or_else(code, |()| CUDA_SUCCESS);
    }
    match real {
        // SAFETY: not ours: forwarded.
        Some(f) => unsafe { f(ptr, stream) },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

/// `cuMemAllocAsync`.
#[no_mangle]
pub extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    alloc_async(dptr, size, stream, false, drv_cumemallocasync())
}

/// `cuMemAllocAsync_ptsz` (per-thread default stream).
#[no_mangle]
pub extern "C" fn cuMemAllocAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    alloc_async(dptr, size, stream, true, drv_cumemallocasync_ptsz())
}

/// `cuMemFreeAsync`.
#[no_mangle]
pub extern "C" fn cuMemFreeAsync(ptr: CUdeviceptr, stream: CUstream) -> CUresult {
    free_async(ptr, stream, false, drv_cumemfreeasync())
}

/// `cuMemFreeAsync_ptsz`.
#[no_mangle]
pub extern "C" fn cuMemFreeAsync_ptsz(ptr: CUdeviceptr, stream: CUstream) -> CUresult {
    free_async(ptr, stream, true, drv_cumemfreeasync_ptsz())
}

/// `cuCtxSynchronize`: after the real one, everything freed before is safe to reuse.
#[no_mangle]
pub extern "C" fn cuCtxSynchronize() -> CUresult {
    // Frees made by other threads while the sync runs are not covered by it: only what was
    // freed before the mark becomes reusable.
    let mark = with_pool(|p| p.sync_mark());
    let r = real_sync();
    if r == CUDA_SUCCESS {
        with_pool(|p| p.on_synchronize_since(mark));
    }
    r
}

/// `cuMemGetAddressRange_v2`: a pool block answers with its own start and size.
#[no_mangle]
pub extern "C" fn cuMemGetAddressRange_v2(
    base: *mut CUdeviceptr,
    size: *mut usize,
    ptr: CUdeviceptr,
) -> CUresult {
    if let Some(Some((start, len))) = with_owner(ptr, |p| p.find(ptr)) {
        // SAFETY: the driver's contract: each out pointer is null or writable.
        unsafe {
            if !base.is_null() {
                *base = start;
            }
            if !size.is_null() {
                *size = len;
            }
        }
        return CUDA_SUCCESS;
    }
    match drv_cumemgetaddressrange_v2() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(base, size, ptr) },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

/// `cuPointerGetAttribute`: the range attributes answer for pool blocks.
#[no_mangle]
pub extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    if !data.is_null()
        && (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
            || attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
    {
        if let Some(Some((start, len))) = with_owner(ptr, |p| p.find(ptr)) {
            // SAFETY: the attribute's documented type: CUdeviceptr or size_t, both 8 bytes here.
            unsafe {
                if attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR {
                    *(data as *mut CUdeviceptr) = start;
                } else {
                    *(data as *mut usize) = len;
                }
            }
            return CUDA_SUCCESS;
        }
    }
    match drv_cupointergetattribute() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(data, attr, ptr) },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

// ------------------------------------------------------------------------------ memory pools

/// Driver memory pools created exportable for IPC (`handleTypes != 0`): their allocations must
/// stay the driver's, since another process may map them. Every other pool (the device's
/// default pool included) is served from our pool inside regions.
static IPC_POOLS: spin::mutex::SpinMutex<Vec<usize>, spin::relax::Yield> =
    spin::mutex::SpinMutex::new(Vec::new());

/// Offset of `handleTypes` in `CUmemPoolProps` (after `CUmemAllocationType allocType`).
const POOL_PROPS_HANDLE_TYPES: usize = 4;

/// `cuMemPoolCreate`: the driver's, noting pools that are exportable for IPC.
#[no_mangle]
pub extern "C" fn cuMemPoolCreate(pool: *mut *mut c_void, props: *const c_void) -> CUresult {
    let Some(f) = drv_cumempoolcreate() else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: forwarded arguments.
    let r = unsafe { f(pool, props) };
    if r == CUDA_SUCCESS && !pool.is_null() && !props.is_null() {
        // SAFETY: the driver accepted `props` as a CUmemPoolProps and wrote `*pool`.
        let (handle_types, handle) = unsafe {
            (
                *((props as *const u8).add(POOL_PROPS_HANDLE_TYPES) as *const c_int),
                *pool,
            )
        };
        if handle_types != 0 {
            IPC_POOLS.lock().push(handle as usize);
        }
    }
    r
}

fn alloc_from_pool(
    dptr: *mut CUdeviceptr,
    size: usize,
    mem_pool: *mut c_void,
    stream: CUstream,
    ptsz: bool,
    real: Option<PoolAllocFn>,
) -> CUresult {
    if pooled() && !IPC_POOLS.lock().contains(&(mem_pool as usize)) {
        return pool_alloc(dptr, size, stream_id(stream, ptsz));
    }
    match real {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dptr, size, mem_pool, stream) },
        None => CUDA_ERROR_NOT_INITIALIZED,
    }
}

/// `cuMemAllocFromPoolAsync` (the route of cuda.core's `DeviceMemoryResource`): served by our
/// pool unless the driver pool is exportable for IPC. The block is freed with
/// `cuMemFreeAsync`, which recognises it.
#[no_mangle]
pub extern "C" fn cuMemAllocFromPoolAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    mem_pool: *mut c_void,
    stream: CUstream,
) -> CUresult {
    alloc_from_pool(
        dptr,
        size,
        mem_pool,
        stream,
        false,
        drv_cumemallocfrompoolasync(),
    )
}

/// `cuMemAllocFromPoolAsync_ptsz`.
#[no_mangle]
pub extern "C" fn cuMemAllocFromPoolAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    mem_pool: *mut c_void,
    stream: CUstream,
) -> CUresult {
    alloc_from_pool(
        dptr,
        size,
        mem_pool,
        stream,
        true,
        drv_cumemallocfrompoolasync_ptsz(),
    )
}

/// Our hook for a driver entry point, by exact symbol name (as `dlsym` sees it).
fn hook_by_symbol(name: &[u8]) -> *mut c_void {
    let f: *const () = match name {
        b"cuMemAlloc_v2" => cuMemAlloc_v2 as *const (),
        b"cuMemFree_v2" => cuMemFree_v2 as *const (),
        b"cuMemAllocAsync" => cuMemAllocAsync as *const (),
        b"cuMemAllocAsync_ptsz" => cuMemAllocAsync_ptsz as *const (),
        b"cuMemFreeAsync" => cuMemFreeAsync as *const (),
        b"cuMemFreeAsync_ptsz" => cuMemFreeAsync_ptsz as *const (),
        b"cuCtxSynchronize" => cuCtxSynchronize as *const (),
        b"cuMemGetAddressRange_v2" => cuMemGetAddressRange_v2 as *const (),
        b"cuPointerGetAttribute" => cuPointerGetAttribute as *const (),
        b"cuGetProcAddress" => cuGetProcAddress as *const (),
        b"cuGetProcAddress_v2" => cuGetProcAddress_v2 as *const (),
        b"cuMemPoolCreate" => cuMemPoolCreate as *const (),
        b"cuMemAllocFromPoolAsync" => cuMemAllocFromPoolAsync as *const (),
        b"cuMemAllocFromPoolAsync_ptsz" => cuMemAllocFromPoolAsync_ptsz as *const (),
        _ => core::ptr::null(),
    };
    f as *mut c_void
}

/// Our hook for a base name as `cuGetProcAddress` is asked for it, when the requested CUDA
/// version gets the ABI our hook implements (older versions keep the driver's answer).
fn hook_by_base_name(name: &[u8], version: c_int, flags: u64) -> *mut c_void {
    let ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0;
    let (symbol, since): (&[u8], c_int) = match name {
        b"cuMemAlloc" => (b"cuMemAlloc_v2", 3020),
        b"cuMemFree" => (b"cuMemFree_v2", 3020),
        b"cuMemGetAddressRange" => (b"cuMemGetAddressRange_v2", 3020),
        b"cuMemAllocAsync" if ptds => (b"cuMemAllocAsync_ptsz", 11020),
        b"cuMemFreeAsync" if ptds => (b"cuMemFreeAsync_ptsz", 11020),
        b"cuMemAllocAsync" => (b"cuMemAllocAsync", 11020),
        b"cuMemFreeAsync" => (b"cuMemFreeAsync", 11020),
        b"cuGetProcAddress" if version >= 12000 => (b"cuGetProcAddress_v2", 12000),
        b"cuGetProcAddress" => (b"cuGetProcAddress", 11030),
        b"cuMemAllocFromPoolAsync" if ptds => (b"cuMemAllocFromPoolAsync_ptsz", 11020),
        b"cuMemAllocFromPoolAsync" => (b"cuMemAllocFromPoolAsync", 11020),
        b"cuMemPoolCreate" => (b"cuMemPoolCreate", 11020),
        b"cuCtxSynchronize" => (b"cuCtxSynchronize", 0),
        b"cuPointerGetAttribute" => (b"cuPointerGetAttribute", 0),
        _ => return core::ptr::null_mut(),
    };
    if version < since {
        return core::ptr::null_mut();
    }
    hook_by_symbol(symbol)
}

fn swap_proc(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) {
    if symbol.is_null() || pfn.is_null() || !options::get().cuda {
        return;
    }
    // SAFETY: the driver just answered for this NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let hook = hook_by_base_name(name, version, flags);
    if !hook.is_null() {
        // SAFETY: `pfn` is the caller's out pointer, just written by the driver.
        unsafe { *pfn = hook };
    }
}

/// `cuGetProcAddress`: the driver's answer, with our hooks for the allocation names.
#[no_mangle]
pub extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    let r = match drv_cugetprocaddress() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(symbol, pfn, version, flags) },
        None => return CUDA_ERROR_NOT_INITIALIZED,
    };
    if r == CUDA_SUCCESS {
        swap_proc(symbol, pfn, version, flags);
    }
    r
}

/// `cuGetProcAddress_v2` (CUDA 12): as `cuGetProcAddress`.
#[no_mangle]
pub extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    let r = match drv_cugetprocaddress_v2() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(symbol, pfn, version, flags, status) },
        None => return CUDA_ERROR_NOT_INITIALIZED,
    };
    if r == CUDA_SUCCESS {
        swap_proc(symbol, pfn, version, flags);
    }
    r
}

// ------------------------------------------------------------------------------ dlsym

/// Decides whether `dlsym(handle, name)` should answer with one of our hooks; null means "ask
/// the real dlsym". Called from the naked `dlsym` below, so it must not call `dlsym` itself.
extern "C" fn dlsym_filter(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    real_dlsym(); // make sure the jump target exists
    if name.is_null() || handle == libc::RTLD_NEXT {
        return core::ptr::null_mut();
    }
    // SAFETY: dlsym's contract: a NUL-terminated name. Only the first bytes are read before the
    // cheap reject.
    let (c0, c1) = unsafe { (*name as u8, if *name == 0 { 0 } else { *name.add(1) as u8 }) };
    if c0 != b'c' || c1 != b'u' || !options::get().cuda {
        return core::ptr::null_mut();
    }
    // SAFETY: as above.
    hook_by_symbol(unsafe { CStr::from_ptr(name) }.to_bytes())
}

/// `dlsym`: our hooks for the hooked driver names, the real `dlsym` for everything else. Naked,
/// and the real one is reached with a jump, so glibc still sees the caller's return address
/// (which `RTLD_NEXT` depends on).
///
/// # Safety
/// As `dlsym(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {filter}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jnz 2f",
        "jmp qword ptr [rip + {real}]",
        "2:",
        "ret",
        filter = sym dlsym_filter,
        real = sym RESIZEALLOC_REAL_DLSYM,
    )
}
