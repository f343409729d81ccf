//! The device pools behind the hooks: one [`DevicePool`] per CUDA context, their lock, the
//! rules for when an allocation is pooled, stream identities, and what region markers,
//! synchronisations and context teardown do to the pools.

use core::sync::atomic::{AtomicBool, Ordering};

use resizealloc::device::pool::{DevicePool, PoolError, PoolStats};
use resizealloc::device::{Backend, DevPtr, StreamId};
use resizealloc::options::{self, RegionMode};

use super::driver::{self as drv, CUcontext, CUresult, CUstream, CUDA_SUCCESS};

/// The pool's backing calls for one context: the real driver, never the hooks, with the pool's
/// context made current around each call (a stream-ordered allocation may come from a thread
/// whose current context is another one).
pub struct Driver {
    ctx: CUcontext,
}

// SAFETY: the context handle is an opaque driver handle, usable from any thread.
unsafe impl Send for Driver {}

impl Driver {
    /// Runs `f` with the pool's context current on the calling thread.
    fn in_context(&self, f: impl FnOnce() -> CUresult) -> CUresult {
        if drv::current_context() == self.ctx {
            return f();
        }
        let (Some(push), Some(pop)) = (drv::cu_ctx_push_current_v2(), drv::cu_ctx_pop_current_v2())
        else {
            return drv::no_driver();
        };
        // SAFETY: the pool's own context (alive: a teardown takes the pool out first); the push
        // and the pop pair up, so the caller's current context is restored.
        unsafe {
            let r = push(self.ctx);
            if r != CUDA_SUCCESS {
                return r;
            }
            let result = f();
            let mut popped: CUcontext = core::ptr::null_mut();
            pop(&mut popped);
            result
        }
    }
}

impl Backend for Driver {
    type Error = CUresult;

    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, CUresult> {
        let Some(f) = drv::cu_mem_alloc_v2() else {
            return Err(drv::no_driver());
        };
        let mut p: DevPtr = 0;
        // SAFETY: valid out pointer.
        match self.in_context(|| unsafe { f(&mut p, bytes) }) {
            CUDA_SUCCESS => Ok(p),
            e => Err(e),
        }
    }

    fn free(&mut self, ptr: DevPtr) -> Result<(), CUresult> {
        let Some(f) = drv::cu_mem_free_v2() else {
            return Err(drv::no_driver());
        };
        // SAFETY: `ptr` is a segment the pool got from the real driver.
        match self.in_context(|| unsafe { f(ptr) }) {
            CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn synchronize(&mut self) -> Result<(), CUresult> {
        match self.in_context(drv::sync_now) {
            CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn is_out_of_memory(&self, e: &CUresult) -> bool {
        *e == drv::CUDA_ERROR_OUT_OF_MEMORY
    }
}

/// Every pool, keyed by its context handle, and how many threads are inside a region now.
///
/// Invariant: every pool's region depth equals `threads_in_regions` (a pool created while
/// threads are inside regions starts at that depth), so a pool resizes when the last thread
/// leaves its outermost region.
struct Pools {
    list: Vec<(usize, DevicePool<Driver>)>,
    threads_in_regions: u32,
}

/// A spin lock that yields (threads may wait here for a driver call), which the fork handlers
/// take and force open.
static POOLS: spin::mutex::SpinMutex<Pools, spin::relax::Yield> =
    spin::mutex::SpinMutex::new(Pools {
        list: Vec::new(),
        threads_in_regions: 0,
    });

/// Set once a pool exists: until then frees and queries do not take the lock.
static ANY_POOL: AtomicBool = AtomicBool::new(false);

/// Looks up every driver function the pool uses, so that no lookup (which may take the dynamic
/// loader's lock) ever happens while `POOLS` is held.
fn resolve_driver() {
    let _ = (
        drv::cu_mem_alloc_v2(),
        drv::cu_mem_free_v2(),
        drv::cu_ctx_synchronize(),
        drv::cu_ctx_get_current(),
        drv::cu_ctx_push_current_v2(),
        drv::cu_ctx_pop_current_v2(),
    );
}

/// Runs `f` on the locked pools. The pools' own bookkeeping is allocated outside any region
/// arena: it outlives the regions that cause it.
fn locked<R>(f: impl FnOnce(&mut Pools) -> R) -> R {
    resolve_driver();
    resizealloc::region::outside_regions(|| f(&mut POOLS.lock()))
}

/// Runs `f` on the pool of context `ctx`, creating it when `create` is set.
pub fn with_pool<R>(
    ctx: CUcontext,
    create: bool,
    f: impl FnOnce(&mut DevicePool<Driver>) -> R,
) -> Option<R> {
    if !create && !any_pool() {
        return None;
    }
    let key = ctx as usize;
    locked(|pools| {
        let i = match pools.list.iter().position(|(c, _)| *c == key) {
            Some(i) => i,
            None if create => {
                let mut pool = DevicePool::new(Driver { ctx });
                for _ in 0..pools.threads_in_regions {
                    pool.region_begin();
                }
                pools.list.push((key, pool));
                ANY_POOL.store(true, Ordering::Release);
                pools.list.len() - 1
            }
            None => return None,
        };
        Some(f(&mut pools.list[i].1))
    })
}

/// Runs `f` on the pool holding `ptr` in one of its segments, if any (any context).
pub fn with_owner<R>(ptr: DevPtr, f: impl FnOnce(&mut DevicePool<Driver>) -> R) -> Option<R> {
    if !ANY_POOL.load(Ordering::Acquire) {
        return None;
    }
    locked(|pools| {
        let pool = pools
            .list
            .iter_mut()
            .find(|(_, p)| p.owns(ptr))
            .map(|(_, p)| p)?;
        Some(f(pool))
    })
}

/// Whether new allocations go to the pools now: CUDA pooling on, and inside a region (or
/// process mode).
pub fn pooled() -> bool {
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
pub const SYNC_STREAM: StreamId = u64::MAX;
const CU_STREAM_LEGACY: u64 = 1;
const CU_STREAM_PER_THREAD: u64 = 2;

static NEXT_THREAD_STREAM: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

thread_local! {
    /// This thread's per-thread default stream identity (0 until first used).
    static PER_THREAD_STREAM: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

pub fn stream_id(stream: CUstream, per_thread_default: bool) -> StreamId {
    let handle = stream as u64;
    let per_thread = handle == CU_STREAM_PER_THREAD || (handle == 0 && per_thread_default);
    if per_thread {
        // A number no other thread, running or future, ever gets: a new thread must not
        // inherit blocks freed on an exited thread's stream while its work may still run.
        (1 << 62)
            | PER_THREAD_STREAM.with(|id| {
                if id.get() == 0 {
                    id.set(NEXT_THREAD_STREAM.fetch_add(1, Ordering::Relaxed));
                }
                id.get()
            })
    } else if handle == CU_STREAM_LEGACY {
        0
    } else {
        handle
    }
}

/// The context whose memory a stream-ordered allocation on `stream` comes from: the stream's
/// own (streams belong to one context), the current one for the default-stream handles. Null
/// when there is none (the hooks then let the driver answer).
pub fn stream_context(stream: CUstream) -> CUcontext {
    if stream as u64 <= CU_STREAM_PER_THREAD {
        return drv::current_context();
    }
    let mut ctx: CUcontext = core::ptr::null_mut();
    if let Some(f) = drv::cu_stream_get_ctx() {
        // SAFETY: valid out pointer; a bad stream handle is the driver's to reject.
        if unsafe { f(stream, &mut ctx) } != CUDA_SUCCESS {
            ctx = core::ptr::null_mut();
        }
    }
    ctx
}

/// The driver's error code for a pool error.
pub fn code(e: PoolError<CUresult>) -> CUresult {
    match e {
        PoolError::ZeroSize | PoolError::InvalidPointer => drv::CUDA_ERROR_INVALID_VALUE,
        PoolError::Backend(e) => e,
    }
}

/// A synchronisation the program does (`sync`, the real call) on context `ctx`: everything
/// freed before it started becomes reusable once it succeeds. Frees made by other threads
/// while it runs are not covered by it, hence the mark.
pub fn observe_sync(ctx: CUcontext, sync: impl FnOnce() -> CUresult) -> CUresult {
    let mark = with_pool(ctx, false, |p| p.sync_mark());
    let r = sync();
    if let (CUDA_SUCCESS, Some(mark)) = (r, mark) {
        with_pool(ctx, false, |p| p.on_synchronize_since(mark));
    }
    r
}

/// The context `ctx` is about to be destroyed or reset by `teardown` (the real call), which
/// frees all of its memory: its pool is taken out first, so that nobody is handed memory that
/// is about to vanish, and forgotten (its segments are the driver's to free) once the call
/// succeeds. A failed call puts the pool back.
pub fn around_teardown(ctx: CUcontext, teardown: impl FnOnce() -> CUresult) -> CUresult {
    let key = ctx as usize;
    let taken = locked(|pools| {
        let i = pools.list.iter().position(|(c, _)| *c == key)?;
        Some(pools.list.swap_remove(i))
    });
    let r = teardown();
    if r == CUDA_SUCCESS {
        // The driver freed the segments with the context: forget them (a dropped pool would
        // free them again). A pool created for the dying context while the call ran goes too.
        if let Some((_, mut pool)) = taken {
            pool.forget_segments();
        }
        drop_pools_of(ctx);
    } else if let Some(entry) = taken {
        locked(|pools| pools.list.push(entry));
    }
    r
}

/// Forgets every pool of context `ctx`, whose memory the driver has freed (so the segments are
/// forgotten, not freed).
pub fn drop_pools_of(ctx: CUcontext) {
    if !any_pool() {
        return;
    }
    let key = ctx as usize;
    let gone: Vec<(usize, DevicePool<Driver>)> = locked(|pools| {
        let (gone, kept) = core::mem::take(&mut pools.list)
            .into_iter()
            .partition(|(c, _)| *c == key);
        pools.list = kept;
        gone
    });
    for (_, mut pool) in gone {
        pool.forget_segments();
    }
}

/// The calling thread entered a region and allocates device memory: every pool's region begins.
fn thread_region_begin() {
    locked(|pools| {
        pools.threads_in_regions += 1;
        for (_, p) in &mut pools.list {
            p.region_begin();
        }
    });
}

/// The calling thread left its outermost region: every pool's region ends, and a pool resizes
/// to its region's peak when no thread is inside a region any more.
fn thread_region_end() {
    locked(|pools| {
        if pools.threads_in_regions == 0 {
            return;
        }
        pools.threads_in_regions -= 1;
        for (_, p) in &mut pools.list {
            p.region_end();
        }
    });
}

/// `stream` is being destroyed: in every pool, the blocks freed on it wait for a sync.
pub fn forget_stream(stream: CUstream) {
    if !any_pool() || (stream as u64) <= CU_STREAM_PER_THREAD {
        return;
    }
    let id = stream_id(stream, false);
    locked(|pools| {
        for (_, p) in &mut pools.list {
            p.forget_stream(id);
        }
    });
}

/// True once any pool exists.
pub fn any_pool() -> bool {
    ANY_POOL.load(Ordering::Acquire)
}

/// Trims every pool: waits for frees in flight, then gives every empty segment back. Returns
/// the first driver error, after trying every pool.
pub fn trim_all() -> CUresult {
    if !any_pool() {
        return CUDA_SUCCESS;
    }
    locked(|pools| {
        let mut r = CUDA_SUCCESS;
        for (_, p) in &mut pools.list {
            if let Err(e) = p.trim() {
                if r == CUDA_SUCCESS {
                    r = code(e);
                }
            }
        }
        r
    })
}

/// The sum of every pool's figures, and the number of pools.
pub fn stats_total() -> (PoolStats, u64) {
    if !any_pool() {
        return (PoolStats::default(), 0);
    }
    locked(|pools| {
        let mut t = PoolStats::default();
        for (_, p) in &pools.list {
            let s = p.stats();
            t.reserved += s.reserved;
            t.in_use += s.in_use;
            t.high_water += s.high_water;
            t.overflow_blocks += s.overflow_blocks;
            t.segments += s.segments;
            t.own_syncs += s.own_syncs;
            t.observed_syncs += s.observed_syncs;
            t.driver_allocs += s.driver_allocs;
        }
        (t, pools.list.len() as u64)
    })
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

thread_local! {
    /// Whether the calling thread is counted in `threads_in_regions`: from its first pooled
    /// allocation inside a region to the end of its outermost region.
    static COUNTED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Called before a pooled allocation: a thread inside a region is counted in the pools'
/// region depth from its first device allocation on.
pub fn note_thread_in_region() {
    if resizealloc::region_depth() > 0 && !COUNTED.with(|c| c.replace(true)) {
        thread_region_begin();
    }
}

/// Called when the calling thread leaves its outermost region (`resize_region_end`).
pub fn note_thread_left_region() {
    if COUNTED.with(|c| c.replace(false)) {
        thread_region_end();
    }
}
