//! The device pools behind the hooks: [`DevicePool`]s per CUDA context, each behind its own
//! lock, the rules for when an allocation is pooled, stream identities, and what region
//! markers, synchronisations, memory pressure and context teardown do to the pools.
//!
//! # Shards
//! A context has up to [`SHARDS`] pools; each thread allocates from the one of its shard
//! (threads get shards round-robin), so threads that allocate and free do not contend for one
//! lock (or its cache line). A block is freed into the pool that owns its segment, whichever
//! thread frees it; the freeing thread's own pool is asked first. The price is memory: each
//! shard that allocates holds at least one segment of its own.
//!
//! # Locking
//! Each pool has its own lock, held for its bookkeeping and the driver calls that allocate or
//! free a segment, but never across a synchronisation: when a pool needs one of its own, the
//! caller takes the pool's mark, drops the lock, synchronises, and hands the result back
//! ([`DevicePool::alloc_without_sync`]). The pools are found through a fixed table of slots
//! read without a lock; `REGISTRY` (creation, teardown, region counting, fork) is taken before
//! any pool lock, never after one.

use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use resizealloc::device::pool::{DevicePool, PoolError, PoolStats};
use resizealloc::device::{Backend, Capture, DevPtr, StreamId};
use resizealloc::options::{self, RegionMode};

use super::capture;
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
        in_context(self.ctx, f)
    }
}

/// Runs `f` with `ctx` current on the calling thread, restoring the caller's context (the
/// plug-in entry points use it too).
pub(super) fn in_context(ctx: CUcontext, f: impl FnOnce() -> CUresult) -> CUresult {
    if drv::current_context() == ctx {
        return f();
    }
    let (Some(push), Some(pop)) = (drv::cu_ctx_push_current_v2(), drv::cu_ctx_pop_current_v2())
    else {
        return drv::no_driver();
    };
    // SAFETY: `ctx` is a live context: a pool's own (a teardown takes the pool out first) or
    // the plug-ins' current or retained primary one. The push and the pop pair up, so the
    // caller's current context is restored.
    unsafe {
        let r = push(ctx);
        if r != CUDA_SUCCESS {
            return r;
        }
        let result = f();
        let mut popped: CUcontext = core::ptr::null_mut();
        pop(&mut popped);
        result
    }
}

/// `cuCtxSynchronize` in context `ctx`.
fn sync_context(ctx: CUcontext) -> CUresult {
    in_context(ctx, drv::sync_now)
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
        match sync_context(self.ctx) {
            CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn is_out_of_memory(&self, e: &CUresult) -> bool {
        *e == drv::CUDA_ERROR_OUT_OF_MEMORY
    }

    fn capture(&mut self) -> Capture {
        capture::state(self.ctx)
    }

    fn synchronize_domain(&mut self, domain: u64) -> Result<(), CUresult> {
        if capture::state(domain as CUcontext) != Capture::None {
            return Err(drv::CUDA_ERROR_NOT_SUPPORTED);
        }
        match sync_context(domain as CUcontext) {
            CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }
}

type PoolLock = spin::mutex::SpinMutex<DevicePool<Driver>, spin::relax::Yield>;

/// One context's pool. Cells are never freed (a context torn down leaves its empty cell
/// behind), so a reference read from a slot stays valid.
pub struct PoolCell {
    ctx: usize,
    shard: u32,
    slot: usize,
    pool: PoolLock,
}

impl PoolCell {
    /// Runs `f` on the locked pool. The pool's own bookkeeping is allocated outside any region
    /// arena: it outlives the regions that cause it.
    pub fn with<R>(&self, f: impl FnOnce(&mut DevicePool<Driver>) -> R) -> R {
        resizealloc::region::outside_regions(|| f(&mut self.pool.lock()))
    }

    pub fn context(&self) -> CUcontext {
        self.ctx as CUcontext
    }

    /// A number no other pool's blocks use in their buffer ids.
    pub fn slot(&self) -> usize {
        self.slot
    }
}

/// Most pools at once (contexts times shards); allocations in further contexts go to the
/// driver.
const MAX_POOLS: usize = 256;
/// Pools per context at most: threads are spread over them.
pub const SHARDS: u32 = 8;

static NEXT_SHARD: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
/// Bumped whenever a pool leaves the table, so that the threads' cached pools are looked up
/// again.
static GENERATION: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

thread_local! {
    /// The calling thread's shard, plus one (0: not chosen yet).
    static SHARD: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    /// The pool the calling thread used last, and the generation it was found in.
    static LAST: core::cell::Cell<(*const PoolCell, u64)> =
        const { core::cell::Cell::new((core::ptr::null(), u64::MAX)) };
}

fn my_shard() -> u32 {
    SHARD.with(|s| {
        if s.get() == 0 {
            s.set(NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS + 1);
        }
        s.get() - 1
    })
}

/// The pool the calling thread used last, if it is still in the table.
#[inline]
fn last_cell() -> Option<&'static PoolCell> {
    let (cell, generation) = LAST.with(|l| l.get());
    if generation != GENERATION.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: a cell pointer cached from the table; cells are never freed.
    unsafe { cell.as_ref() }
}

fn remember(cell: &'static PoolCell, generation: u64) {
    LAST.with(|l| l.set((cell, generation)));
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: AtomicPtr<PoolCell> = AtomicPtr::new(core::ptr::null_mut());
/// The pools, found without a lock.
static SLOTS: [AtomicPtr<PoolCell>; MAX_POOLS] = [EMPTY_SLOT; MAX_POOLS];
/// One past the highest slot ever used: walks of the table stop there.
static SLOTS_USED: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// The part of the table that may hold pools.
#[inline]
fn used_slots() -> &'static [AtomicPtr<PoolCell>] {
    &SLOTS[..SLOTS_USED.load(Ordering::Acquire).min(MAX_POOLS)]
}

/// Creation, teardown and region counting. Invariant: every pool's region depth equals
/// `threads_in_regions` (a pool created while threads are inside regions starts at that
/// depth), so a pool resizes when the last thread leaves its outermost region.
struct Registry {
    threads_in_regions: u32,
}

static REGISTRY: spin::mutex::SpinMutex<Registry, spin::relax::Yield> =
    spin::mutex::SpinMutex::new(Registry {
        threads_in_regions: 0,
    });

/// Set once a pool exists: until then frees and queries do not look.
static ANY_POOL: AtomicBool = AtomicBool::new(false);
/// Set once a block was freed on another context's stream: from then on every
/// synchronisation tells every pool.
static ANY_FOREIGN: AtomicBool = AtomicBool::new(false);

/// Looks up every driver function the pools use, so that no lookup (which may take the
/// dynamic loader's lock) ever happens while a pool lock is held.
fn resolve_driver() {
    let _ = (
        drv::cu_mem_alloc_v2(),
        drv::cu_mem_free_v2(),
        drv::cu_ctx_synchronize(),
        drv::cu_ctx_get_current(),
        drv::cu_ctx_push_current_v2(),
        drv::cu_ctx_pop_current_v2(),
        drv::cu_stream_get_capture_info_v2(),
        drv::cu_stream_is_capturing(),
    );
}

/// The pools that exist now.
fn cells() -> impl Iterator<Item = &'static PoolCell> {
    used_slots().iter().filter_map(|s| {
        // SAFETY: a non-null slot points at a leaked cell, which is never freed.
        unsafe { s.load(Ordering::Acquire).as_ref() }
    })
}

/// The calling thread's pool of context `ctx`, created when `create` is set (None when there
/// is no room). Without `create`, any pool of the context will do.
#[inline]
pub fn cell_of(ctx: CUcontext, create: bool) -> Option<&'static PoolCell> {
    if !create && !any_pool() {
        return None;
    }
    let key = ctx as usize;
    if let Some(c) = last_cell() {
        if c.ctx == key {
            return Some(c);
        }
    }
    find_cell(key, create)
}

#[cold]
#[inline(never)]
fn find_cell(key: usize, create: bool) -> Option<&'static PoolCell> {
    let generation = GENERATION.load(Ordering::Acquire);
    let shard = my_shard();
    if let Some(c) = cells().find(|c| c.ctx == key && c.shard == shard) {
        remember(c, generation);
        return Some(c);
    }
    if !create {
        return cells().find(|c| c.ctx == key);
    }
    let c = create_cell(key, shard)?;
    remember(c, generation);
    Some(c)
}

#[cold]
#[inline(never)]
fn create_cell(key: usize, shard: u32) -> Option<&'static PoolCell> {
    resolve_driver();
    register_fork_handlers();
    let registry = REGISTRY.lock();
    if let Some(c) = cells().find(|c| c.ctx == key && c.shard == shard) {
        return Some(c);
    }
    let slot = SLOTS
        .iter()
        .position(|s| s.load(Ordering::Acquire).is_null())?;
    let cell = resizealloc::region::outside_regions(|| {
        let mut pool = DevicePool::new(Driver {
            ctx: key as CUcontext,
        });
        for _ in 0..registry.threads_in_regions {
            pool.region_begin();
        }
        let max_cached = options::get().cuda_max_cached;
        if max_cached != usize::MAX {
            pool.set_max_cached(max_cached);
        }
        Box::leak(Box::new(PoolCell {
            ctx: key,
            shard,
            slot,
            pool: PoolLock::new(pool),
        }))
    });
    SLOTS[slot].store(cell, Ordering::Release);
    SLOTS_USED.fetch_max(slot + 1, Ordering::AcqRel);
    ANY_POOL.store(true, Ordering::Release);
    Some(cell)
}

/// The pool holding `ptr` in one of its segments, if any (any context).
pub fn owner_of(ptr: DevPtr) -> Option<&'static PoolCell> {
    if !ANY_POOL.load(Ordering::Acquire) {
        return None;
    }
    cells().find(|c| c.with(|p| p.owns(ptr)))
}

/// Runs `f` on the pool holding `ptr` in one of its segments, if any (any context), under the
/// same lock acquisition as the ownership test.
pub fn with_owner<R>(ptr: DevPtr, f: impl FnOnce(&mut DevicePool<Driver>) -> R) -> Option<R> {
    with_owner_cell(ptr, |_, p| f(p))
}

/// As [`with_owner`], with the owner's cell.
pub fn with_owner_cell<R>(
    ptr: DevPtr,
    f: impl FnOnce(&PoolCell, &mut DevicePool<Driver>) -> R,
) -> Option<R> {
    if !ANY_POOL.load(Ordering::Acquire) {
        return None;
    }
    let mut f = Some(f);
    // The calling thread's own pool first: most blocks are freed by the thread that got them.
    let first = last_cell();
    if let Some(c) = first {
        let r = c.with(|p| {
            if p.owns(ptr) {
                f.take().map(|f| f(c, p))
            } else {
                None
            }
        });
        if r.is_some() {
            return r;
        }
    }
    for c in cells().filter(|c| !first.is_some_and(|f| core::ptr::eq(*c, f))) {
        let r = c.with(|p| {
            if p.owns(ptr) {
                f.take().map(|f| f(c, p))
            } else {
                None
            }
        });
        if r.is_some() {
            return r;
        }
    }
    None
}

/// Allocates `size` bytes for `stream` from the pool of `ctx` (created if needed). The pool's
/// own synchronisation, when it needs one, runs without its lock. `None`: no room for another
/// pool.
pub fn alloc_in(
    ctx: CUcontext,
    size: usize,
    stream: StreamId,
) -> Option<Result<DevPtr, PoolError<CUresult>>> {
    let cell = cell_of(ctx, true)?;
    let r = cell.with(|p| p.alloc_without_sync(size, stream, false));
    if r != Err(PoolError::NeedsSync) {
        return Some(r);
    }
    Some(alloc_after_sync(cell, size, stream))
}

#[cold]
#[inline(never)]
fn alloc_after_sync(
    cell: &PoolCell,
    size: usize,
    stream: StreamId,
) -> Result<DevPtr, PoolError<CUresult>> {
    own_sync(cell)?;
    cell.with(|p| p.alloc_without_sync(size, stream, true))
}

/// The pool's own synchronisation, without its lock: its context, then each context whose
/// streams hold blocks freed from it.
fn own_sync(cell: &PoolCell) -> Result<(), PoolError<CUresult>> {
    let (mark, domains) = cell.with(|p| (p.sync_mark(), p.foreign_domains()));
    if capture::state(cell.context()) != Capture::None {
        return Ok(()); // the pool then grows (or refuses) as it would without frees
    }
    let r = sync_context(cell.context());
    if r != CUDA_SUCCESS {
        return Err(PoolError::Backend(r));
    }
    let mut synced = [0u64; 8];
    let mut n = 0;
    for d in domains.iter().take(synced.len()) {
        if capture::state(*d as CUcontext) == Capture::None
            && sync_context(*d as CUcontext) == CUDA_SUCCESS
        {
            synced[n] = *d;
            n += 1;
        }
    }
    cell.with(|p| {
        p.own_sync_done(mark);
        for &d in &synced[..n] {
            p.on_domain_synchronized(d, mark);
        }
    });
    Ok(())
}

/// A pool block was freed on a stream of another context.
pub fn note_foreign_free() {
    if !ANY_FOREIGN.load(Ordering::Relaxed) {
        ANY_FOREIGN.store(true, Ordering::Release);
    }
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
        // Not answered to the program (the hooks let the driver answer instead); a plug-in
        // caller gets "the pool could not serve it now".
        PoolError::Capturing => drv::CUDA_ERROR_NOT_SUPPORTED,
        PoolError::NeedsSync => drv::CUDA_ERROR_OUT_OF_MEMORY,
    }
}

/// A synchronisation the program does (`sync`, the real call) on context `ctx`: everything
/// freed before it started becomes reusable once it succeeds, in the context's own pool and,
/// for blocks freed on this context's streams, in the other pools. Frees made by other threads
/// while it runs are not covered by it, hence the marks. Idle pools release their cache here.
pub fn observe_sync(ctx: CUcontext, sync: impl FnOnce() -> CUresult) -> CUresult {
    if !any_pool() {
        return sync();
    }
    // On the stack for the usual few pools; the table is walked only up to its used part.
    let used = used_slots().len();
    if used <= 16 {
        let mut marks = [(core::ptr::null(), 0); 16];
        observe_sync_with(&mut marks[..used], ctx, sync)
    } else {
        let mut marks = resizealloc::region::outside_regions(|| vec![(core::ptr::null(), 0); used]);
        let r = observe_sync_with(&mut marks, ctx, sync);
        resizealloc::region::outside_regions(|| drop(marks));
        r
    }
}

/// [`observe_sync`] with room for one (pool, mark) per used slot.
fn observe_sync_with(
    marks: &mut [(*const PoolCell, u64)],
    ctx: CUcontext,
    sync: impl FnOnce() -> CUresult,
) -> CUresult {
    let foreign = ANY_FOREIGN.load(Ordering::Acquire);
    for (slot, mark) in SLOTS.iter().zip(marks.iter_mut()) {
        // SAFETY: a non-null slot points at a leaked cell, which is never freed.
        if let Some(c) = unsafe { slot.load(Ordering::Acquire).as_ref() } {
            if c.ctx == ctx as usize || foreign {
                *mark = (c, c.with(|p| p.sync_mark()));
            }
        }
    }
    let r = sync();
    if r != CUDA_SUCCESS {
        return r;
    }
    let idle_ms = options::cuda_idle_ms();
    let now = if idle_ms == 0 { 0 } else { now_ms() };
    for &(cell, mark) in marks.iter() {
        // SAFETY: null or a cell from the table; cells are never freed (one taken out of the
        // table since only forgot its segments: the reclaim finds nothing to do).
        let Some(c) = (unsafe { cell.as_ref() }) else {
            continue;
        };
        c.with(|p| {
            if c.ctx == ctx as usize {
                p.on_synchronize_since(mark);
                if idle_ms != 0 {
                    p.release_if_idle(now, idle_ms as u64);
                }
            } else {
                p.on_domain_synchronized(ctx as u64, mark);
            }
        });
    }
    r
}

/// Milliseconds on a monotonic clock (the coarse one: a few nanoseconds, no system call).
fn now_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// Takes the pools of `ctx` out of the table (so nobody is handed memory that is about to
/// vanish).
fn take_out(ctx: CUcontext) -> Vec<&'static PoolCell> {
    resizealloc::region::outside_regions(|| {
        let _registry = REGISTRY.lock();
        let key = ctx as usize;
        let mut taken = Vec::new();
        for slot in used_slots() {
            let p = slot.load(Ordering::Acquire);
            // SAFETY: a non-null slot points at a leaked cell, which is never freed.
            if let Some(c) = unsafe { p.as_ref() }.filter(|c| c.ctx == key) {
                slot.store(core::ptr::null_mut(), Ordering::Release);
                taken.push(c);
            }
        }
        if !taken.is_empty() {
            GENERATION.fetch_add(1, Ordering::AcqRel);
        }
        taken
    })
}

/// The context `ctx` is about to be destroyed or reset by `teardown` (the real call), which
/// frees all of its memory: its pool is taken out first, so that nobody is handed memory that
/// is about to vanish, and forgotten (its segments are the driver's to free) once the call
/// succeeds. A failed call puts the pool back.
pub fn around_teardown(ctx: CUcontext, teardown: impl FnOnce() -> CUresult) -> CUresult {
    let taken = if any_pool() {
        take_out(ctx)
    } else {
        Vec::new()
    };
    let r = teardown();
    if r == CUDA_SUCCESS {
        // The driver freed the segments with the context: forget them (a dropped pool would
        // free them again). A pool created for the dying context while the call ran goes too.
        for cell in &taken {
            cell.with(|p| p.forget_segments());
        }
        drop_pools_of(ctx);
    } else if !taken.is_empty() {
        let _registry = REGISTRY.lock();
        for cell in &taken {
            if let Some(slot) = SLOTS.iter().find(|s| s.load(Ordering::Acquire).is_null()) {
                slot.store(*cell as *const PoolCell as *mut PoolCell, Ordering::Release);
            }
        }
    }
    resizealloc::region::outside_regions(|| drop(taken));
    r
}

/// Forgets the pool of context `ctx`, whose memory the driver has freed (so the segments are
/// forgotten, not freed).
pub fn drop_pools_of(ctx: CUcontext) {
    if !any_pool() {
        return;
    }
    let taken = take_out(ctx);
    for cell in &taken {
        cell.with(|p| p.forget_segments());
    }
    resizealloc::region::outside_regions(|| drop(taken));
}

/// The calling thread entered a region and allocates device memory: every pool's region begins.
fn thread_region_begin() {
    let mut registry = REGISTRY.lock();
    registry.threads_in_regions += 1;
    for c in cells() {
        c.with(|p| p.region_begin());
    }
}

/// The calling thread left its outermost region: every pool's region ends, and a pool resizes
/// to its region's peak when no thread is inside a region any more.
#[cold]
#[inline(never)]
fn thread_region_end() {
    let mut registry = REGISTRY.lock();
    if registry.threads_in_regions == 0 {
        return;
    }
    registry.threads_in_regions -= 1;
    for c in cells() {
        c.with(|p| p.region_end());
    }
}

/// `stream` is being destroyed: in every pool, the blocks freed on it wait for a sync.
pub fn forget_stream(stream: CUstream) {
    capture::note_end(stream);
    if !any_pool() || (stream as u64) <= CU_STREAM_PER_THREAD {
        return;
    }
    let id = stream_id(stream, false);
    for c in cells() {
        c.with(|p| p.forget_stream(id));
    }
}

/// True once any pool exists.
pub fn any_pool() -> bool {
    ANY_POOL.load(Ordering::Acquire)
}

/// Trims every pool: waits for frees in flight (one synchronisation per pool that has any,
/// without its lock), then gives every empty segment back. Returns the first driver error,
/// after trying every pool.
pub fn trim_all() -> CUresult {
    let mut r = CUDA_SUCCESS;
    for c in cells() {
        if c.with(|p| p.has_pending_frees()) {
            if let Err(e) = own_sync(c) {
                if r == CUDA_SUCCESS {
                    r = code(e);
                }
            }
        }
        c.with(|p| p.release_cached());
    }
    r
}

/// Memory pressure: an allocation outside the pools (`cuMemCreate`, managed or pinned host
/// memory, a pass-through `cuMemAlloc`) ran out of memory. Every pool gives back what it
/// caches; frees in flight are synchronised first, but only when nothing was cached. Returns
/// whether anything went back (the caller then retries once).
#[cold]
#[inline(never)]
pub fn release_for_pressure() -> bool {
    let mut released = 0;
    for c in cells() {
        released += c.with(|p| p.release_for_pressure());
    }
    if released == 0 {
        for c in cells() {
            if c.with(|p| p.has_pending_frees()) && own_sync(c).is_ok() {
                released += c.with(|p| p.release_for_pressure());
            }
        }
    }
    released > 0
}

/// The sum of every pool's figures, and the number of contexts with a pool.
pub fn stats_total() -> (PoolStats, u64) {
    let mut t = PoolStats::default();
    let mut n = 0;
    for c in cells() {
        let s = c.with(|p| p.stats());
        if !cells()
            .take_while(|o| !core::ptr::eq(*o, c))
            .any(|o| o.ctx == c.ctx)
        {
            n += 1;
        }
        t.reserved += s.reserved;
        t.in_use += s.in_use;
        t.high_water += s.high_water;
        t.overflow_blocks += s.overflow_blocks;
        t.segments += s.segments;
        t.own_syncs += s.own_syncs;
        t.observed_syncs += s.observed_syncs;
        t.driver_allocs += s.driver_allocs;
        t.pressure_releases += s.pressure_releases;
        t.capture_refusals += s.capture_refusals;
    }
    (t, n)
}

// ------------------------------------------------------------------------------ fork

/// The gate of the device pools' fork handlers (see the core's `fork.rs`).
static FORK_GATE: resizealloc::fork::Gate = resizealloc::fork::Gate::new();
static FORK_HANDLERS: AtomicBool = AtomicBool::new(false);

/// Registers the pools' fork handlers (which hold the capture list too), once: called before
/// the first pool is made and before a capture the hooks see begins (never with a lock of ours
/// held), so a program that never touches the device never runs them.
pub(super) fn register_fork_handlers() {
    if FORK_HANDLERS.load(Ordering::Acquire) || FORK_HANDLERS.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: handlers with the right signatures, which never unwind.
    if unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) } != 0
    {
        FORK_HANDLERS.store(false, Ordering::Release); // out of memory: the next pool tries again
    }
}

/// Takes `lock`, waiting at most the core's fork wait (its guard forgotten).
fn hold<T>(lock: &spin::mutex::SpinMutex<T, spin::relax::Yield>) -> bool {
    resizealloc::fork::wait_for(|| lock.try_lock().map(core::mem::forget).is_some())
}

/// Fork support: hold the registry, every pool lock and the capture list across `fork`, in
/// that order (the order every other path takes them in), unless the gate says to take
/// nothing; on a lock that cannot be had in time, release what was taken.
extern "C" fn fork_prepare() {
    if !FORK_GATE.enter() {
        return;
    }
    let registry_held = hold(&REGISTRY);
    let mut all = registry_held;
    let mut pools_held = 0;
    if all {
        for c in cells() {
            if !hold(&c.pool) {
                all = false;
                break;
            }
            pools_held += 1;
        }
    }
    if all && !capture::fork_prepare() {
        all = false;
    }
    if !all && registry_held {
        // SAFETY: this thread took the registry and the first `pools_held` pool locks above.
        unsafe { release(pools_held, false) };
    }
    FORK_GATE.took(all);
}

/// Releases the registry and the first `pools` pool locks (and the capture list's with
/// `capture`).
///
/// # Safety
/// This thread holds them (or its copy does, in the child), or the caller is a child resetting
/// them.
unsafe fn release(pools: usize, capture: bool) {
    if capture {
        // SAFETY: the caller's obligation.
        unsafe { capture::fork_finish() };
    }
    // SAFETY: the caller's obligation; the registry is held (or reset in a child with one
    // thread), so the set of pools has not changed since they were taken.
    unsafe {
        for c in cells().take(pools) {
            c.pool.force_unlock();
        }
        REGISTRY.force_unlock();
    }
}

/// Fork support, in the parent: release what [`fork_prepare`] took.
extern "C" fn fork_parent() {
    if FORK_GATE.leave(false) == resizealloc::fork::Leave::Release {
        // SAFETY: `fork_prepare` took every lock in this thread.
        unsafe { release(usize::MAX, true) };
    }
}

/// Fork support, in the child: release what [`fork_prepare`] took, or reset every lock where
/// it gave up on one (the child has one thread).
extern "C" fn fork_child() {
    if FORK_GATE.leave(true) != resizealloc::fork::Leave::Nothing {
        // SAFETY: `fork_prepare` took every lock in this thread (whose copy this is), or it gave
        // up and no other thread is left to hold one.
        unsafe { release(usize::MAX, true) };
    }
}

thread_local! {
    /// Whether the calling thread is counted in `threads_in_regions`: from its first pooled
    /// allocation inside a region to the end of its outermost region.
    static COUNTED: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Set once any thread was counted: until then a region end (every one, in a program that never
/// touches the device) skips the thread-local lookup, which in this shared library is a
/// `__tls_get_addr` call.
static ANY_COUNTED: AtomicBool = AtomicBool::new(false);

/// Called before a pooled allocation: a thread inside a region is counted in the pools'
/// region depth from its first device allocation on.
pub fn note_thread_in_region() {
    if resizealloc::region_depth() > 0 && !COUNTED.with(|c| c.replace(true)) {
        // This thread's later region end reads the flag after this store (program order).
        ANY_COUNTED.store(true, Ordering::Relaxed);
        thread_region_begin();
    }
}

/// Called when the calling thread leaves its outermost region (`resize_region_end`).
#[inline(always)]
pub fn note_thread_left_region() {
    if ANY_COUNTED.load(Ordering::Relaxed) {
        left_region_counted();
    }
}

/// [`note_thread_left_region`] once some thread used the device pools: out of line, so that
/// the region end of a program that never does makes no call (and needs no stack frame).
#[cold]
#[inline(never)]
fn left_region_counted() {
    if COUNTED.with(|c| c.replace(false)) {
        thread_region_end();
    }
}
