//! The driver API hooks. Allocation calls are served by the pools when [`pooled`] says so and
//! the request is one the pool can answer (a writable out pointer, a size above 0, a context);
//! everything else goes to the real driver, which gives its own answer and error code. Frees,
//! address queries and synchronisations recognise pool blocks whatever the mode.

use core::ffi::{c_int, c_uint, c_void};

use resizealloc::device::StreamId;

use super::capture;
use super::driver::{
    self as drv, AllocAsyncFn, CUcontext, CUdevice, CUdeviceptr, CUresult, CUstream, FreeAsyncFn,
    PoolAllocFn, CUDA_ERROR_NOT_FOUND, CUDA_SUCCESS, CU_POINTER_ATTRIBUTE_BUFFER_ID,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
};
use super::pools::{self, pooled, stream_context, stream_id, with_owner, SYNC_STREAM};
use resizealloc::device::pool::PoolError;

/// Serves an allocation of `size` bytes in context `ctx` from its pool, if the pool can:
/// `None` means "let the real call answer" (no context, null out pointer, size 0, a stream
/// capture that the pool cannot serve without a driver call, no room for another pool).
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
    match pools::alloc_in(ctx, size, stream)? {
        Ok(ptr) => {
            // SAFETY: non-null out pointer from the caller.
            unsafe { *dptr = ptr };
            Some(CUDA_SUCCESS)
        }
        Err(PoolError::Capturing) => None,
        Err(e) => Some(pools::code(e)),
    }
}

/// How a pool block is freed.
#[derive(Clone, Copy)]
pub(super) enum FreeKind {
    /// `cuMemFree`/`cudaFree`: reusable after a synchronisation of the block's context.
    Sync,
    /// `cuMemFreeAsync(p, stream)`: the raw handle, whether it is a `_ptsz` call.
    Async(CUstream, bool),
}

/// Frees a pool block: `None` when `ptr` is not in any pool. An async free on a capturing
/// stream is treated as a synchronous one (the graph may touch the block at any replay before
/// the program's next synchronisation); one on a stream of another context waits for that
/// context's synchronisation.
pub(super) fn pool_free(ptr: CUdeviceptr, kind: FreeKind) -> Option<CUresult> {
    if !pools::any_pool() {
        return None;
    }
    // The stream's context and capture state are asked of the driver before any pool lock.
    let stream = match kind {
        FreeKind::Sync => None,
        FreeKind::Async(stream, ptsz) => {
            let ctx = stream_context(stream);
            let capturing = capture::stream_capturing(stream, ptsz, ctx);
            Some((stream_id(stream, ptsz), ctx, capturing))
        }
    };
    let r = pools::with_owner_cell(ptr, |cell, p| match stream {
        None | Some((_, _, true)) => p.free(ptr),
        Some((_, ctx, false)) if !ctx.is_null() && ctx != cell.context() => {
            pools::note_foreign_free();
            p.free_async_foreign(ptr, ctx as u64)
        }
        Some((id, _, false)) => p.free_async(ptr, id),
    })?;
    Some(r.map_or_else(pools::code, |()| CUDA_SUCCESS))
}

/// The context a stream-ordered allocation on `stream` is pooled in, or null when it must go
/// to the driver (no context, or the stream is capturing: the graph needs its memory node).
pub(super) fn async_context(stream: CUstream, ptsz: bool) -> CUcontext {
    let ctx = stream_context(stream);
    if ctx.is_null() || capture::stream_capturing(stream, ptsz, ctx) {
        return core::ptr::null_mut();
    }
    ctx
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
    with_pressure_retry(|| match drv::cu_mem_alloc_v2() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(dptr, size) },
        None => drv::no_driver(),
    })
}

/// Runs a driver allocation; when it fails with out-of-memory and the pools cached something,
/// they give it back and the allocation runs once more.
#[inline]
pub(super) fn with_pressure_retry(mut alloc: impl FnMut() -> CUresult) -> CUresult {
    let r = alloc();
    if r == drv::CUDA_ERROR_OUT_OF_MEMORY && pools::any_pool() && pools::release_for_pressure() {
        return alloc();
    }
    r
}

/// `cuMemFree_v2`: pool blocks go back to the pool (reusable after the next sync).
#[no_mangle]
pub extern "C" fn cuMemFree_v2(ptr: CUdeviceptr) -> CUresult {
    if let Some(r) = pool_free(ptr, FreeKind::Sync) {
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
        if let Some(r) = pool_alloc(dptr, size, async_context(stream, ptsz), id) {
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
    if let Some(r) = pool_free(ptr, FreeKind::Async(stream, ptsz)) {
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

/// The pool block containing `ptr`: `None` when `ptr` is in no pool, `Some(None)` when it is
/// in a pool but in no live block, else its start, size and buffer id. Buffer ids have the top
/// bit set (the driver's count from 1) and the pool's slot below it, so no two blocks handed
/// out share one, in any pool, and none equals a driver allocation's.
fn block_of(ptr: CUdeviceptr) -> Option<Option<(u64, usize, u64)>> {
    let cell = pools::owner_of(ptr)?;
    let slot = cell.slot() as u64;
    Some(cell.with(|p| {
        let (start, len) = p.find(ptr)?;
        let id = p.buffer_id(ptr)?;
        Some((
            start,
            len,
            (1 << 63) | (slot << 52) | (id & ((1 << 52) - 1)),
        ))
    }))
}

/// Writes the attribute `attr` (range start, range size or buffer id) of the pool block
/// `(start, len, buffer_id)` to `data`; false for other attributes.
///
/// # Safety
/// `data` is writable for the attribute's type (CUdeviceptr or size_t, both 8 bytes).
unsafe fn write_range_attribute(
    data: *mut c_void,
    attr: c_int,
    (start, len, buffer_id): (u64, usize, u64),
) -> bool {
    match attr {
        // SAFETY: the caller's obligation: `data` is writable for the attribute's 8-byte type.
        CU_POINTER_ATTRIBUTE_BUFFER_ID => unsafe { *(data as *mut u64) = buffer_id },
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
            || attr == CU_POINTER_ATTRIBUTE_RANGE_SIZE
            || attr == CU_POINTER_ATTRIBUTE_BUFFER_ID)
    {
        match block_of(ptr) {
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
    if let Some(found) = block_of(ptr) {
        // A pool address outside any live block has an empty range.
        let block = found.unwrap_or((0, 0, 0));
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
        if let Some(r) = pool_alloc(dptr, size, async_context(stream, ptsz), id) {
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

// ------------------------------------------------------------------------------ stream capture

fn begin_capture(
    stream: CUstream,
    mode: c_int,
    ptsz: bool,
    real: Option<drv::BeginCaptureFn>,
) -> CUresult {
    let Some(f) = real else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    let r = unsafe { f(stream, mode) };
    if r == CUDA_SUCCESS {
        let handle = if ptsz && stream.is_null() {
            2 as CUstream
        } else {
            stream
        };
        pools::register_fork_handlers(); // they hold the capture list across fork
        capture::note_begin(stream_context(stream), handle, mode);
    }
    r
}

fn end_capture(
    stream: CUstream,
    graph: *mut *mut c_void,
    ptsz: bool,
    real: Option<drv::EndCaptureFn>,
) -> CUresult {
    let Some(f) = real else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    let r = unsafe { f(stream, graph) };
    // Successful or not (an invalidated capture), the stream has left capture mode.
    capture::note_end(if ptsz && stream.is_null() {
        2 as CUstream
    } else {
        stream
    });
    r
}

/// `cuStreamBeginCapture_v2` (what `cudaStreamBeginCapture` calls): the pools of the stream's
/// context stop synchronising (and, unless the mode is relaxed, calling the driver) until the
/// capture ends.
#[no_mangle]
pub extern "C" fn cuStreamBeginCapture_v2(stream: CUstream, mode: c_int) -> CUresult {
    begin_capture(stream, mode, false, drv::cu_stream_begin_capture_v2())
}

/// `cuStreamBeginCapture_ptsz`.
#[no_mangle]
pub extern "C" fn cuStreamBeginCapture_ptsz(stream: CUstream, mode: c_int) -> CUresult {
    begin_capture(stream, mode, true, drv::cu_stream_begin_capture_ptsz())
}

/// `cuStreamEndCapture`.
#[no_mangle]
pub extern "C" fn cuStreamEndCapture(stream: CUstream, graph: *mut *mut c_void) -> CUresult {
    end_capture(stream, graph, false, drv::cu_stream_end_capture())
}

/// `cuStreamEndCapture_ptsz`.
#[no_mangle]
pub extern "C" fn cuStreamEndCapture_ptsz(stream: CUstream, graph: *mut *mut c_void) -> CUresult {
    end_capture(stream, graph, true, drv::cu_stream_end_capture_ptsz())
}

// ------------------------------------------------------------------------------------ IPC

/// `cuIpcGetMemHandle` (what `cudaIpcGetMemHandle` calls): a handle describes a whole driver
/// allocation, which for a pool block is the segment, while `cuMemGetAddressRange` answers
/// with the block: a process that maps the handle and adds the block's offset would read the
/// wrong bytes. So a pool block gets `CUDA_ERROR_NOT_SUPPORTED` (docs/gpu.md: allocate memory to be
/// shared outside regions, or with `RESIZEALLOC_CUDA=off`, or from an IPC-exportable driver
/// pool); other memory gets the driver's handle.
#[no_mangle]
pub extern "C" fn cuIpcGetMemHandle(handle: *mut c_void, ptr: CUdeviceptr) -> CUresult {
    if pools::owner_of(ptr).is_some() {
        return drv::CUDA_ERROR_NOT_SUPPORTED;
    }
    match drv::cu_ipc_get_mem_handle() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(handle, ptr) },
        None => drv::no_driver(),
    }
}

// --------------------------------------------------------------------------- memory pressure

/// `cuMemCreate` (PyTorch's expandable segments, and every virtual-memory allocator): out of
/// memory while the pools cache free segments gets them back first, and one more try.
#[no_mangle]
pub extern "C" fn cuMemCreate(
    handle: *mut u64,
    size: usize,
    prop: *const c_void,
    flags: u64,
) -> CUresult {
    let Some(f) = drv::cu_mem_create() else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    with_pressure_retry(|| unsafe { f(handle, size, prop, flags) })
}

/// `cuMemAllocManaged`: as `cuMemCreate`.
#[no_mangle]
pub extern "C" fn cuMemAllocManaged(
    dptr: *mut CUdeviceptr,
    size: usize,
    flags: c_uint,
) -> CUresult {
    let Some(f) = drv::cu_mem_alloc_managed() else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    with_pressure_retry(|| unsafe { f(dptr, size, flags) })
}

/// `cuMemHostAlloc` (what `cudaHostAlloc` and `cudaMallocHost` call): as `cuMemCreate`.
#[no_mangle]
pub extern "C" fn cuMemHostAlloc(pp: *mut *mut c_void, size: usize, flags: c_uint) -> CUresult {
    let Some(f) = drv::cu_mem_host_alloc() else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    with_pressure_retry(|| unsafe { f(pp, size, flags) })
}

/// `cuMemAllocHost_v2` (pinned host memory, which device memory pressure can also starve): as
/// `cuMemCreate`.
#[no_mangle]
pub extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) -> CUresult {
    let Some(f) = drv::cu_mem_alloc_host_v2() else {
        return drv::no_driver();
    };
    // SAFETY: forwarded arguments.
    with_pressure_retry(|| unsafe { f(pp, size) })
}
