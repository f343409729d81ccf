//! The driver API hooks. Allocation calls are served by the pools when [`pooled`] says so and
//! the request is one the pool can answer (a writable out pointer, a size above 0, a context);
//! everything else goes to the real driver, which gives its own answer and error code. Frees,
//! address queries and synchronisations recognise pool blocks whatever the mode.

use core::ffi::{c_int, c_uint, c_void};

use resizealloc::device::StreamId;

use super::driver::{
    self as drv, AllocAsyncFn, CUcontext, CUdevice, CUdeviceptr, CUresult, CUstream, FreeAsyncFn,
    PoolAllocFn, CUDA_ERROR_NOT_FOUND, CUDA_SUCCESS, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
};
use super::pools::{self, pooled, stream_context, stream_id, with_owner, with_pool, SYNC_STREAM};

/// Serves an allocation of `size` bytes in context `ctx` from its pool, if the pool can:
/// `None` means "let the real call answer" (no context, null out pointer, size 0).
pub(super) fn pool_alloc(
    dptr: *mut CUdeviceptr,
    size: usize,
    ctx: CUcontext,
    stream: StreamId,
) -> Option<CUresult> {
    if dptr.is_null() || size == 0 || ctx.is_null() {
        return None;
    }
    pools::note_thread_in_region();
    let r = with_pool(ctx, true, |p| p.alloc(size, stream))?;
    Some(match r {
        Ok(ptr) => {
            // SAFETY: non-null out pointer from the caller.
            unsafe { *dptr = ptr };
            CUDA_SUCCESS
        }
        Err(e) => pools::code(e),
    })
}

/// Frees a pool block: `None` when `ptr` is not in any pool.
pub(super) fn pool_free(ptr: CUdeviceptr, stream: Option<StreamId>) -> Option<CUresult> {
    let r = with_owner(ptr, |p| match stream {
        None => p.free(ptr),
        Some(s) => p.free_async(ptr, s),
    })?;
    Some(r.map_or_else(pools::code, |()| CUDA_SUCCESS))
}

/// `cuInit`: the driver's. Without a driver in the process, `CUDA_ERROR_NO_DEVICE`, as a
/// driver that finds no GPU answers, and every driver hook answers the same from then on.
#[no_mangle]
pub extern "C" fn cuInit(flags: c_uint) -> CUresult {
    match drv::cu_init() {
        // SAFETY: forwarded argument.
        Some(f) => unsafe { f(flags) },
        None => drv::init_without_driver(),
    }
}

/// `cuMemAlloc_v2`.
#[no_mangle]
pub extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize) -> CUresult {
    if pooled() {
        if let Some(r) = pool_alloc(dptr, size, drv::current_context(), SYNC_STREAM) {
            return r;
        }
    }
    match drv::cu_mem_alloc_v2() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dptr, size) },
        None => drv::no_driver(),
    }
}

/// `cuMemFree_v2`: pool blocks go back to the pool (reusable after the next sync).
#[no_mangle]
pub extern "C" fn cuMemFree_v2(ptr: CUdeviceptr) -> CUresult {
    if let Some(r) = pool_free(ptr, None) {
        return r;
    }
    match drv::cu_mem_free_v2() {
        // SAFETY: not ours: forwarded.
        Some(f) => unsafe { f(ptr) },
        None => drv::no_driver(),
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
        let id = stream_id(stream, ptsz);
        if let Some(r) = pool_alloc(dptr, size, stream_context(stream), id) {
            return r;
        }
    }
    match real {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dptr, size, stream) },
        None => drv::no_driver(),
    }
}

fn free_async(
    ptr: CUdeviceptr,
    stream: CUstream,
    ptsz: bool,
    real: Option<FreeAsyncFn>,
) -> CUresult {
    if let Some(r) = pool_free(ptr, Some(stream_id(stream, ptsz))) {
        return r;
    }
    match real {
        // SAFETY: not ours: forwarded.
        Some(f) => unsafe { f(ptr, stream) },
        None => drv::no_driver(),
    }
}

/// `cuMemAllocAsync`: from the pool of the stream's context.
#[no_mangle]
pub extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    alloc_async(dptr, size, stream, false, drv::cu_mem_alloc_async())
}

/// `cuMemAllocAsync_ptsz` (per-thread default stream).
#[no_mangle]
pub extern "C" fn cuMemAllocAsync_ptsz(
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    alloc_async(dptr, size, stream, true, drv::cu_mem_alloc_async_ptsz())
}

/// `cuMemFreeAsync`: a pool block is reusable at once on `stream`, elsewhere after a sync.
#[no_mangle]
pub extern "C" fn cuMemFreeAsync(ptr: CUdeviceptr, stream: CUstream) -> CUresult {
    free_async(ptr, stream, false, drv::cu_mem_free_async())
}

/// `cuMemFreeAsync_ptsz`.
#[no_mangle]
pub extern "C" fn cuMemFreeAsync_ptsz(ptr: CUdeviceptr, stream: CUstream) -> CUresult {
    free_async(ptr, stream, true, drv::cu_mem_free_async_ptsz())
}

/// `cuCtxSynchronize`: after the real one, everything freed before it started is reusable.
#[no_mangle]
pub extern "C" fn cuCtxSynchronize() -> CUresult {
    pools::observe_sync(drv::current_context(), drv::sync_now)
}

/// `cuStreamDestroy_v2` (what `cudaStreamDestroy` does): the handle may come back for a new
/// stream while the old one's work still runs, so the blocks freed on it wait for a sync.
#[no_mangle]
pub extern "C" fn cuStreamDestroy_v2(stream: CUstream) -> CUresult {
    let Some(f) = drv::cu_stream_destroy_v2() else {
        return drv::no_driver();
    };
    pools::forget_stream(stream);
    // SAFETY: forwarded argument.
    unsafe { f(stream) }
}

/// `cuCtxDestroy_v2`: the context's memory vanishes with it, so its pool goes too.
#[no_mangle]
pub extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    let Some(f) = drv::cu_ctx_destroy_v2() else {
        return drv::no_driver();
    };
    // SAFETY: forwarded argument.
    pools::around_teardown(ctx, || unsafe { f(ctx) })
}

/// The handle of `dev`'s primary context if it is active (null otherwise), without creating
/// it: retained and released again.
pub(super) fn primary_context_of(dev: CUdevice) -> CUcontext {
    let (Some(state), Some(retain), Some(release)) = (
        drv::cu_device_primary_ctx_get_state(),
        drv::cu_device_primary_ctx_retain(),
        drv::cu_device_primary_ctx_release_v2(),
    ) else {
        return core::ptr::null_mut();
    };
    let (mut flags, mut active): (c_uint, c_int) = (0, 0);
    let mut ctx: CUcontext = core::ptr::null_mut();
    // SAFETY: valid out pointers; retain and release pair up.
    unsafe {
        if state(dev, &mut flags, &mut active) != CUDA_SUCCESS || active == 0 {
            return core::ptr::null_mut();
        }
        if retain(&mut ctx, dev) != CUDA_SUCCESS {
            return core::ptr::null_mut();
        }
        release(dev);
    }
    ctx
}

/// `cuDevicePrimaryCtxReset_v2` (what `cudaDeviceReset` does): the primary context's memory is
/// freed, so its pool goes too.
#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) -> CUresult {
    let Some(f) = drv::cu_device_primary_ctx_reset_v2() else {
        return drv::no_driver();
    };
    let ctx = primary_context_of(dev);
    // SAFETY: forwarded argument.
    pools::around_teardown(ctx, || unsafe { f(dev) })
}

/// `cuDevicePrimaryCtxRelease_v2`: the release that drops the count to zero destroys the
/// primary context and its memory, so its pool goes too.
#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    let Some(f) = drv::cu_device_primary_ctx_release_v2() else {
        return drv::no_driver();
    };
    let ctx = primary_context_of(dev);
    // SAFETY: forwarded argument.
    let r = unsafe { f(dev) };
    if r == CUDA_SUCCESS && !ctx.is_null() && primary_context_of(dev).is_null() {
        pools::drop_pools_of(ctx);
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
    match with_owner(ptr, |p| p.find(ptr)) {
        Some(Some((start, len))) => {
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
        // Inside a pool segment but not in a live block: not allocated, as far as the program
        // is concerned (the driver would answer for the whole segment).
        Some(None) => return CUDA_ERROR_NOT_FOUND,
        None => {}
    }
    match drv::cu_mem_get_address_range_v2() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(base, size, ptr) },
        None => drv::no_driver(),
    }
}

/// Writes the range attribute `attr` of the pool block `(start, len)` to `data`; false for
/// other attributes.
///
/// # Safety
/// `data` is writable for the attribute's type (CUdeviceptr or size_t, both 8 bytes).
unsafe fn write_range_attribute(
    data: *mut c_void,
    attr: c_int,
    (start, len): (u64, usize),
) -> bool {
    match attr {
        // SAFETY: the caller's obligation: `data` is writable for the attribute's 8-byte type.
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR => unsafe { *(data as *mut CUdeviceptr) = start },
        // SAFETY: as above.
        CU_POINTER_ATTRIBUTE_RANGE_SIZE => unsafe { *(data as *mut usize) = len },
        _ => return false,
    }
    true
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
        match with_owner(ptr, |p| p.find(ptr)) {
            Some(Some(block)) => {
                // SAFETY: the driver's contract: `data` holds the attribute's type.
                unsafe { write_range_attribute(data, attr, block) };
                return CUDA_SUCCESS;
            }
            // A pool address outside any live block has no allocation to describe.
            Some(None) => return drv::CUDA_ERROR_INVALID_VALUE,
            None => {}
        }
    }
    match drv::cu_pointer_get_attribute() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(data, attr, ptr) },
        None => drv::no_driver(),
    }
}

/// `cuPointerGetAttributes`: the driver answers every attribute (and validates the call); for a
/// pool block the range attributes are then replaced by the block's own.
#[no_mangle]
pub extern "C" fn cuPointerGetAttributes(
    count: c_uint,
    attrs: *mut c_int,
    data: *mut *mut c_void,
    ptr: CUdeviceptr,
) -> CUresult {
    let r = match drv::cu_pointer_get_attributes() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(count, attrs, data, ptr) },
        None => return drv::no_driver(),
    };
    if r != CUDA_SUCCESS || attrs.is_null() || data.is_null() {
        return r;
    }
    if let Some(found) = with_owner(ptr, |p| p.find(ptr)) {
        // A pool address outside any live block has an empty range.
        let block = found.unwrap_or((0, 0));
        for i in 0..count as usize {
            // SAFETY: the driver accepted `count` entries in both arrays; a null slot is one
            // the caller did not ask to be written.
            unsafe {
                let slot = *data.add(i);
                if !slot.is_null() {
                    write_range_attribute(slot, *attrs.add(i), block);
                }
            }
        }
    }
    r
}

// ------------------------------------------------------------------------------ memory pools

/// Driver memory pools whose allocations must stay the driver's: pools created exportable for
/// IPC (another process may map them), pools whose memory is not plain device memory (a host
/// location), and pools given access rights for other devices with `cuMemPoolSetAccess` (our
/// segments would not carry them). Every other pool (the device's default pool included) is
/// served from ours when allocations are pooled.
static FOREIGN_POOLS: spin::mutex::SpinMutex<Vec<usize>, spin::relax::Yield> =
    spin::mutex::SpinMutex::new(Vec::new());

/// Offsets in `CUmemPoolProps`: `allocType` (int), `handleTypes` (int), then `location`
/// (`type`, `id`).
const POOL_PROPS_HANDLE_TYPES: usize = 4;
const POOL_PROPS_LOCATION_TYPE: usize = 8;
const CU_MEM_LOCATION_TYPE_DEVICE: c_int = 1;

fn mark_foreign(pool: *mut c_void) {
    resizealloc::region::outside_regions(|| {
        let mut foreign = FOREIGN_POOLS.lock();
        if !foreign.contains(&(pool as usize)) {
            foreign.push(pool as usize);
        }
    });
}

/// `cuMemPoolCreate`: the driver's, noting pools that must stay the driver's.
#[no_mangle]
pub extern "C" fn cuMemPoolCreate(pool: *mut *mut c_void, props: *const c_void) -> CUresult {
    let Some(f) = drv::cu_mem_pool_create() else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    let r = unsafe { f(pool, props) };
    if r == CUDA_SUCCESS && !pool.is_null() && !props.is_null() {
        // SAFETY: the driver accepted `props` as a CUmemPoolProps and wrote `*pool`.
        let (handle_types, location, handle) = unsafe {
            let at = |off: usize| *((props as *const u8).add(off) as *const c_int);
            (
                at(POOL_PROPS_HANDLE_TYPES),
                at(POOL_PROPS_LOCATION_TYPE),
                *pool,
            )
        };
        if handle_types != 0 || location != CU_MEM_LOCATION_TYPE_DEVICE {
            mark_foreign(handle);
        }
    }
    r
}

/// `cuMemPoolSetAccess`: a pool shared with other devices stays the driver's from now on.
#[no_mangle]
pub extern "C" fn cuMemPoolSetAccess(
    pool: *mut c_void,
    map: *const c_void,
    count: usize,
) -> CUresult {
    let Some(f) = drv::cu_mem_pool_set_access() else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    let r = unsafe { f(pool, map, count) };
    if r == CUDA_SUCCESS {
        mark_foreign(pool);
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
    if pooled() && !FOREIGN_POOLS.lock().contains(&(mem_pool as usize)) {
        let id = stream_id(stream, ptsz);
        if let Some(r) = pool_alloc(dptr, size, stream_context(stream), id) {
            return r;
        }
    }
    match real {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dptr, size, mem_pool, stream) },
        None => drv::no_driver(),
    }
}

/// `cuMemAllocFromPoolAsync` (the route of cuda.core's `DeviceMemoryResource`): served by our
/// pool unless the driver pool must stay the driver's (see `FOREIGN_POOLS`). The block is freed with
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
        drv::cu_mem_alloc_from_pool_async(),
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
        drv::cu_mem_alloc_from_pool_async_ptsz(),
    )
}
