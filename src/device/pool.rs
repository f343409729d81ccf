//! `DevicePool`: suballocation of big driver blocks (*segments*) with a coalescing best fit in
//! 512-byte granules, reuse rules equal to the real API, and ResizeBuffer-style resizing.
//!
//! Two layers. The coalescing structure (`blocks`, `free_index`) tiles every segment and merges
//! free neighbours. In front of it, a reuse cache keeps blocks whole: a synchronously freed block
//! waits in `deferred` until a synchronisation covers its free, then sits in `ready` under its
//! exact size, so a loop that frees and allocates the same sizes is served by two hash lookups
//! and a pop, without touching the trees. Cached blocks go back to the coalescing structure
//! (merged) whenever a request cannot be served otherwise, before the pool would sync or grow,
//! and before trims and resizes.
//!
//! # Invariants
//! * The blocks of a segment tile it exactly, in address order; no two neighbours in the same
//!   segment are both `Free` (they are merged).
//! * `free_index` holds exactly the `Free` blocks of segments that are not retiring.
//! * A `Used` block is held outside the coalescing structure: handed out (then it is in `live`,
//!   with its size), or in the reuse cache (in exactly one of `deferred` and `ready`).
//! * `deferred` is in free order (increasing sequence numbers); `ready` only holds blocks of
//!   segments that are not retiring, each under its own size; `ready_blocks` counts them.
//! * `stream_free` holds exactly the `AsyncFree` blocks, and `freed_at` has the free sequence
//!   number of exactly those blocks.
//! * `Segment::busy` counts the blocks of the segment that are not `Free`.
//! * `in_use` is the sum of the sizes in `live`.
//! * `foreign` holds blocks freed on another context's streams (`Used`, outside `live`,
//!   `deferred` and `ready`), in free order per pool; they come back only after a
//!   synchronisation of that context.
//! * Every handed-out block has a buffer id no other handout of this pool had (`next_id`).
//!
//! # Stream capture
//! The backend says whether a CUDA graph capture is active ([`Capture`]). While one is, the
//! pool never synchronises; in global mode it never asks the driver for a segment nor frees
//! one either (segments that become free wait in `postponed`), and a request it cannot serve
//! from what it holds fails with [`PoolError::Capturing`] (the hooks then let the driver answer).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::{Backend, Capture, DevPtr, StreamId};

/// Allocation unit: every block size is a multiple of it (CuPy uses the same).
pub const GRANULE: usize = 512;
/// The stream identity of blocks freed on a stream that was destroyed since: no allocation
/// asks for it, so they wait for a synchronisation.
pub const RETIRED_STREAM: StreamId = u64::MAX - 1;
/// Smallest segment asked from the driver.
pub const MIN_SEGMENT: usize = 2 << 20;

/// Why a pool call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolError<E> {
    /// A request for 0 bytes (`cuMemAlloc` answers `CUDA_ERROR_INVALID_VALUE`, `cudaMalloc`
    /// succeeds with a null pointer; the hooks decide).
    ZeroSize,
    /// Not the start of a live block of this pool: unknown pointer or double free.
    InvalidPointer,
    /// The driver's own error (out of memory after trimming, or anything else).
    Backend(E),
    /// The request needs a synchronisation or a new segment, and a stream capture is active in
    /// the context (see the module docs): the caller lets the driver answer instead.
    Capturing,
    /// Only from [`DevicePool::alloc_without_sync`]: the request needs the pool's own
    /// synchronisation first. The caller takes [`DevicePool::sync_mark`], synchronises without
    /// holding the pool, calls [`DevicePool::own_sync_done`] and asks again with `synced` set.
    NeedsSync,
}

/// The pool's figures (`repr(C)`: the preload's C API embeds it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PoolStats {
    /// Bytes held from the driver.
    pub reserved: u64,
    /// Bytes in live blocks.
    pub in_use: u64,
    /// Bytes the last completed outermost region needed at its peak.
    pub high_water: u64,
    /// Segments a region had to add beyond what the pool planned for it.
    pub overflow_blocks: u64,
    /// Segments held now.
    pub segments: u64,
    /// Synchronisations the pool did itself (one per batch of frees it needed back).
    pub own_syncs: u64,
    /// Synchronisations the program did and the pool was told about.
    pub observed_syncs: u64,
    /// Segments asked from the driver over the pool's life.
    pub driver_allocs: u64,
    /// Segments handed back to the driver by the pressure rules (cap on cached bytes, idle
    /// time, another allocation's out-of-memory).
    pub pressure_releases: u64,
    /// Requests refused because a stream capture was active (the driver served them).
    pub capture_refusals: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the coalescing structure, reusable by anyone.
    Free,
    /// Outside the coalescing structure: handed out, or in the reuse cache (see the invariants).
    Used,
    /// Freed with `cudaFreeAsync` on this stream: reusable at once there, elsewhere after a sync.
    AsyncFree(StreamId),
}

/// Hashes device addresses and sizes (multiples of 512, so the low bits carry nothing): one
/// multiplication, folded so that the table's bucket bits see the well-mixed high half.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let h = (n ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type AddrMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;

/// A handed-out block: its size and its buffer id.
#[derive(Clone, Copy, Debug)]
struct Live {
    size: usize,
    id: u64,
}
type SizeMap<V> = HashMap<usize, V, BuildHasherDefault<AddrHasher>>;

#[derive(Clone, Copy, Debug)]
struct Block {
    size: usize,
    segment: DevPtr,
    state: State,
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    size: usize,
    /// Blocks that are not `Free`.
    busy: usize,
    /// Planned away by a resize: handed back once empty, never allocated from again.
    retiring: bool,
}

/// A device memory pool over one backend (one per device/context).
pub struct DevicePool<B: Backend> {
    backend: B,
    segments: BTreeMap<DevPtr, Segment>,
    blocks: BTreeMap<DevPtr, Block>,
    free_index: BTreeSet<(usize, DevPtr)>,
    stream_free: BTreeSet<(StreamId, usize, DevPtr)>,
    /// Blocks handed out, with their sizes and buffer ids.
    live: AddrMap<Live>,
    /// Synchronously freed blocks (free sequence number, start, size), waiting for a
    /// synchronisation that started after their free.
    deferred: Vec<(u64, DevPtr, usize)>,
    /// Freed blocks safe for anyone, kept whole, by size.
    ready: SizeMap<Vec<DevPtr>>,
    ready_blocks: usize,
    /// When each async-freed block was freed (a sequence number), so that a synchronisation
    /// reclaims only what was freed before it started.
    freed_at: BTreeMap<DevPtr, u64>,
    /// Blocks freed on another context's streams: (free sequence number, start, size, domain).
    foreign: Vec<(u64, DevPtr, usize, u64)>,
    /// Segments taken out of the pool during a global-mode capture, to be freed after it.
    postponed: Vec<(DevPtr, usize)>,
    free_seq: u64,
    /// Buffer id of the next handout (also counts handouts).
    next_id: u64,
    /// Handouts counted at the last idle check, and when that count last changed.
    idle_mark: (u64, u64),
    /// Most bytes the pool keeps cached (reserved but not in use) after a synchronisation.
    max_cached: usize,
    in_use: usize,
    region_depth: u32,
    region_peak: usize,
    /// Size of the one segment the next growth should ask for (set by a resize).
    planned_segment: usize,
    stats: PoolStats,
}

/// Whether the pool may synchronise itself inside an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncPolicy {
    /// Yes (a pool with one owner).
    Inline,
    /// No: answer `NeedsSync` and let the caller synchronise without holding the pool.
    Defer,
    /// No: the caller just synchronised; grow if nothing fits.
    Done,
}

const fn round_up(n: usize, to: usize) -> Option<usize> {
    match n.checked_add(to - 1) {
        Some(x) => Some(x / to * to),
        None => None,
    }
}

impl<B: Backend> DevicePool<B> {
    /// An empty pool over `backend`.
    pub fn new(backend: B) -> Self {
        DevicePool {
            backend,
            segments: BTreeMap::new(),
            blocks: BTreeMap::new(),
            free_index: BTreeSet::new(),
            stream_free: BTreeSet::new(),
            live: AddrMap::default(),
            deferred: Vec::new(),
            ready: SizeMap::default(),
            ready_blocks: 0,
            freed_at: BTreeMap::new(),
            foreign: Vec::new(),
            postponed: Vec::new(),
            free_seq: 0,
            next_id: 1,
            idle_mark: (0, 0),
            max_cached: usize::MAX,
            in_use: 0,
            region_depth: 0,
            region_peak: 0,
            planned_segment: 0,
            stats: PoolStats::default(),
        }
    }

    /// The backend (for its counters in tests).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The backend, mutably (tests change the mock's state; the hooks reach their driver).
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The pool's figures.
    pub fn stats(&self) -> PoolStats {
        let mut s = self.stats;
        s.reserved = self.segments.values().map(|g| g.size as u64).sum::<u64>()
            + self.postponed.iter().map(|&(_, n)| n as u64).sum::<u64>();
        s.in_use = self.in_use as u64;
        s.segments = self.segments.len() as u64;
        s
    }

    // ------------------------------------------------------------------ allocation

    /// Allocates `size` bytes for use on `stream`. When frees are in flight and nothing else
    /// fits, the pool synchronises itself (once for the whole batch) before it grows.
    pub fn alloc(&mut self, size: usize, stream: StreamId) -> Result<DevPtr, PoolError<B::Error>> {
        self.alloc_with(size, stream, SyncPolicy::Inline)
    }

    /// As [`DevicePool::alloc`], but the pool never synchronises itself: where it would, it
    /// answers [`PoolError::NeedsSync`] (unless `synced`: the caller synchronised since the
    /// last such answer, and the pool grows instead). For callers that share the pool behind a
    /// lock and must not hold it across a synchronisation.
    pub fn alloc_without_sync(
        &mut self,
        size: usize,
        stream: StreamId,
        synced: bool,
    ) -> Result<DevPtr, PoolError<B::Error>> {
        let policy = if synced {
            SyncPolicy::Done
        } else {
            SyncPolicy::Defer
        };
        self.alloc_with(size, stream, policy)
    }

    #[inline]
    fn alloc_with(
        &mut self,
        size: usize,
        stream: StreamId,
        policy: SyncPolicy,
    ) -> Result<DevPtr, PoolError<B::Error>> {
        if size == 0 {
            return Err(PoolError::ZeroSize);
        }
        let Some(need) = round_up(size, GRANULE) else {
            return Err(self.out_of_memory_error(usize::MAX));
        };
        if let Some(p) = self.take_ready(need) {
            return Ok(p);
        }
        self.alloc_slow(need, stream, policy)
    }

    /// A freed block of exactly `need` bytes that is safe for anyone.
    #[inline]
    fn take_ready(&mut self, need: usize) -> Option<DevPtr> {
        let p = self.ready.get_mut(&need)?.pop()?;
        self.ready_blocks -= 1;
        self.hand_out(p, need);
        Some(p)
    }

    /// Everything the reuse cache cannot serve: same-stream blocks, best fit, the cache merged
    /// back, one sync for the whole batch of frees (never during a capture), and only then a
    /// new segment (never during a global-mode capture).
    #[inline(never)]
    #[cold]
    fn alloc_slow(
        &mut self,
        need: usize,
        stream: StreamId,
        policy: SyncPolicy,
    ) -> Result<DevPtr, PoolError<B::Error>> {
        if let Some(p) = self.take_from_stream(need, stream) {
            return Ok(p);
        }
        if let Some(p) = self.take_free(need) {
            return Ok(p);
        }
        if self.ready_blocks > 0 {
            self.flush_ready();
            if let Some(p) = self.take_free(need) {
                return Ok(p);
            }
        }
        let capture = self.backend.capture();
        if capture == Capture::None {
            self.release_postponed();
            // Blocks freed since the last sync may be enough: one sync for the whole batch.
            if self.has_pending_frees() {
                match policy {
                    SyncPolicy::Inline => {
                        if self.sync_for_frees()? {
                            if let Some(p) = self.take_ready(need) {
                                return Ok(p);
                            }
                            self.flush_ready();
                            if let Some(p) = self.take_free(need) {
                                return Ok(p);
                            }
                        }
                    }
                    SyncPolicy::Defer => return Err(PoolError::NeedsSync),
                    SyncPolicy::Done => {}
                }
            }
        } else if capture == Capture::Global {
            self.stats.capture_refusals += 1;
            return Err(PoolError::Capturing);
        }
        self.grow(need, policy)?;
        Ok(self
            .take_free(need)
            .expect("a fresh segment fits the request"))
    }

    /// True when blocks were freed and wait for a synchronisation.
    pub fn has_pending_frees(&self) -> bool {
        !self.deferred.is_empty() || !self.stream_free.is_empty() || !self.foreign.is_empty()
    }

    /// Best fit among blocks freed asynchronously on `stream` itself.
    fn take_from_stream(&mut self, need: usize, stream: StreamId) -> Option<DevPtr> {
        let &(s, size, ptr) = self.stream_free.range((stream, need, 0)..).next()?;
        if s != stream {
            return None;
        }
        self.stream_free.remove(&(s, size, ptr));
        let seq = self
            .freed_at
            .remove(&ptr)
            .expect("async-freed blocks have a sequence number");
        let rest = size - need;
        if rest >= GRANULE {
            // The remainder stays reusable on the same stream.
            let seg = self.blocks[&ptr].segment;
            self.blocks.insert(
                ptr + need as DevPtr,
                Block {
                    size: rest,
                    segment: seg,
                    state: State::AsyncFree(stream),
                },
            );
            self.segments
                .get_mut(&seg)
                .expect("segment of a block")
                .busy += 1;
            self.freed_at.insert(ptr + need as DevPtr, seq);
            self.stream_free
                .insert((stream, rest, ptr + need as DevPtr));
            self.blocks.get_mut(&ptr).expect("block").size = need;
        }
        let b = self.blocks.get_mut(&ptr).expect("block");
        b.state = State::Used;
        let size = b.size;
        self.hand_out(ptr, size);
        Some(ptr)
    }

    /// Best fit among free blocks; splits off the rest.
    fn take_free(&mut self, need: usize) -> Option<DevPtr> {
        let &(size, ptr) = self.free_index.range((need, 0)..).next()?;
        self.free_index.remove(&(size, ptr));
        let seg = self.blocks[&ptr].segment;
        if size > need {
            let rest = ptr + need as DevPtr;
            self.blocks.insert(
                rest,
                Block {
                    size: size - need,
                    segment: seg,
                    state: State::Free,
                },
            );
            self.free_index.insert((size - need, rest));
        }
        self.blocks.insert(
            ptr,
            Block {
                size: need,
                segment: seg,
                state: State::Used,
            },
        );
        self.segments
            .get_mut(&seg)
            .expect("segment of a block")
            .busy += 1;
        self.hand_out(ptr, need);
        Some(ptr)
    }

    /// Records a handout: live with a fresh buffer id, counted in use.
    #[inline]
    fn hand_out(&mut self, ptr: DevPtr, size: usize) {
        self.live.insert(
            ptr,
            Live {
                size,
                id: self.next_id,
            },
        );
        self.next_id += 1;
        self.note_use(size);
    }

    #[inline]
    fn note_use(&mut self, size: usize) {
        self.in_use += size;
        if self.in_use > self.region_peak {
            self.region_peak = self.in_use;
        }
    }

    /// Adds a segment that fits `need`: the planned size when a resize asked for one, else at
    /// least `MIN_SEGMENT`. Out of memory: hand back empty segments and retry with exactly
    /// `need`; only then fail with the driver's error.
    fn grow(&mut self, need: usize, policy: SyncPolicy) -> Result<(), PoolError<B::Error>> {
        let planned = std::mem::take(&mut self.planned_segment);
        let size = round_up(need.max(planned).max(MIN_SEGMENT), MIN_SEGMENT).unwrap_or(need);
        if self.region_depth > 0 && planned == 0 && !self.segments.is_empty() {
            self.stats.overflow_blocks += 1;
        }
        let base = match self.backend.alloc(size) {
            Ok(base) => base,
            Err(e) if self.backend.is_out_of_memory(&e) => {
                if policy == SyncPolicy::Inline {
                    self.sync_for_frees()?;
                }
                self.release_cached();
                match self.backend.alloc(need) {
                    Ok(base) => {
                        self.add_segment(base, need);
                        return Ok(());
                    }
                    Err(e) => return Err(PoolError::Backend(e)),
                }
            }
            Err(e) => return Err(PoolError::Backend(e)),
        };
        self.add_segment(base, size);
        Ok(())
    }

    fn add_segment(&mut self, base: DevPtr, size: usize) {
        self.stats.driver_allocs += 1;
        self.segments.insert(
            base,
            Segment {
                size,
                busy: 0,
                retiring: false,
            },
        );
        self.blocks.insert(
            base,
            Block {
                size,
                segment: base,
                state: State::Free,
            },
        );
        self.free_index.insert((size, base));
    }

    fn out_of_memory_error(&mut self, size: usize) -> PoolError<B::Error> {
        match self.backend.alloc(size) {
            Err(e) => PoolError::Backend(e),
            Ok(p) => {
                // Cannot happen for usize::MAX; give it back if a driver ever says yes.
                let _ = self.backend.free(p);
                PoolError::ZeroSize
            }
        }
    }

    // ------------------------------------------------------------------ free

    /// Frees `ptr` with synchronous semantics (`cudaFree`, `cuMemFree`): reusable after the next
    /// synchronisation.
    pub fn free(&mut self, ptr: DevPtr) -> Result<(), PoolError<B::Error>> {
        let size = self
            .live
            .remove(&ptr)
            .ok_or(PoolError::InvalidPointer)?
            .size;
        self.free_seq += 1;
        self.deferred.push((self.free_seq, ptr, size));
        self.in_use -= size;
        Ok(())
    }

    /// Frees `ptr` with stream-ordered semantics (`cudaFreeAsync(ptr, stream)`).
    pub fn free_async(&mut self, ptr: DevPtr, stream: StreamId) -> Result<(), PoolError<B::Error>> {
        let size = self
            .live
            .remove(&ptr)
            .ok_or(PoolError::InvalidPointer)?
            .size;
        self.blocks.get_mut(&ptr).expect("a live block").state = State::AsyncFree(stream);
        self.stream_free.insert((stream, size, ptr));
        self.free_seq += 1;
        self.freed_at.insert(ptr, self.free_seq);
        self.in_use -= size;
        Ok(())
    }

    /// The program destroys `stream` (its handle may come back for a new stream while the old
    /// one's work still runs): blocks freed on it stop being reusable on "the same stream" and
    /// wait for a synchronisation like any other.
    pub fn forget_stream(&mut self, stream: StreamId) {
        let gone: Vec<(StreamId, usize, DevPtr)> = self
            .stream_free
            .range((stream, 0, 0)..)
            .take_while(|e| e.0 == stream)
            .copied()
            .collect();
        for (s, size, ptr) in gone {
            self.stream_free.remove(&(s, size, ptr));
            self.stream_free.insert((RETIRED_STREAM, size, ptr));
            self.blocks
                .get_mut(&ptr)
                .expect("an async-freed block")
                .state = State::AsyncFree(RETIRED_STREAM);
        }
    }

    /// The program synchronised the device (`cudaDeviceSynchronize`, `cuCtxSynchronize`, …) and
    /// no free happened while it ran: everything freed before is safe to hand out again.
    pub fn on_synchronize(&mut self) {
        self.on_synchronize_since(self.sync_mark());
    }

    /// Taken right before a synchronisation the pool does not hold the lock across: frees
    /// that happen while it runs are not covered by it.
    pub fn sync_mark(&self) -> u64 {
        self.free_seq
    }

    /// A synchronisation that started at `mark` (from [`DevicePool::sync_mark`]) finished: only
    /// the blocks freed before it started become reusable.
    pub fn on_synchronize_since(&mut self, mark: u64) {
        self.stats.observed_syncs += 1;
        self.reclaim_until(mark);
    }

    /// The pool's own synchronisation, when frees are in flight and no capture is active:
    /// afterwards every freed block is reusable (blocks freed on other contexts' streams after
    /// a synchronisation of those contexts too). Returns whether it synced.
    fn sync_for_frees(&mut self) -> Result<bool, PoolError<B::Error>> {
        if !self.has_pending_frees() || self.backend.capture() != Capture::None {
            return Ok(false);
        }
        self.backend.synchronize().map_err(PoolError::Backend)?;
        self.stats.own_syncs += 1;
        for domain in self.foreign_domains() {
            if self.backend.synchronize_domain(domain).is_ok() {
                self.reclaim_foreign(domain, self.free_seq);
            }
        }
        self.reclaim_until(self.free_seq);
        Ok(true)
    }

    /// The caller synchronised the pool's context on the pool's behalf (after
    /// [`PoolError::NeedsSync`]), starting at `mark` from [`DevicePool::sync_mark`].
    pub fn own_sync_done(&mut self, mark: u64) {
        self.stats.own_syncs += 1;
        self.reclaim_until(mark);
    }

    /// Frees `ptr` on a stream of another context, `domain` (any number that names that
    /// context): the block is reusable only after a synchronisation of that context
    /// ([`DevicePool::on_domain_synchronized`], or the pool's own, which synchronises it through
    /// [`Backend::synchronize_domain`]). A sync of the pool's own context does not cover it.
    pub fn free_async_foreign(
        &mut self,
        ptr: DevPtr,
        domain: u64,
    ) -> Result<(), PoolError<B::Error>> {
        let size = self
            .live
            .remove(&ptr)
            .ok_or(PoolError::InvalidPointer)?
            .size;
        self.free_seq += 1;
        self.foreign.push((self.free_seq, ptr, size, domain));
        self.in_use -= size;
        Ok(())
    }

    /// The contexts whose synchronisation would give blocks back (from
    /// [`DevicePool::free_async_foreign`]), without repeats.
    pub fn foreign_domains(&self) -> Vec<u64> {
        let mut d: Vec<u64> = self.foreign.iter().map(|f| f.3).collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    /// A synchronisation of context `domain`, which started at `mark` (this pool's
    /// [`DevicePool::sync_mark`]), finished: blocks freed on its streams before it started are
    /// reusable.
    pub fn on_domain_synchronized(&mut self, domain: u64, mark: u64) {
        self.reclaim_foreign(domain, mark);
    }

    fn reclaim_foreign(&mut self, domain: u64, mark: u64) {
        if self.foreign.is_empty() {
            return;
        }
        let mut done = Vec::new();
        self.foreign.retain(|&(seq, ptr, size, d)| {
            let covered = d == domain && seq <= mark;
            if covered {
                done.push((ptr, size));
            }
            !covered
        });
        for (ptr, size) in done {
            self.cache_freed(ptr, size);
        }
    }

    /// A freed block whose free a synchronisation covered: into the reuse cache, or merged
    /// straight back when its segment is retiring.
    fn cache_freed(&mut self, ptr: DevPtr, size: usize) {
        if self.segment_retiring(ptr) {
            self.make_free(ptr);
        } else {
            self.ready.entry(size).or_default().push(ptr);
            self.ready_blocks += 1;
        }
    }

    fn reclaim_until(&mut self, mark: u64) {
        // Synchronously freed blocks: in free order, so the covered ones are a prefix.
        let covered = self.deferred.partition_point(|&(seq, _, _)| seq <= mark);
        let done: Vec<(u64, DevPtr, usize)> = self.deferred.drain(..covered).collect();
        for (_, ptr, size) in done {
            self.cache_freed(ptr, size);
        }
        // Async-freed blocks go back to the coalescing structure.
        let freed_at = &self.freed_at;
        let streams: Vec<(StreamId, usize, DevPtr)> = self
            .stream_free
            .iter()
            .filter(|e| freed_at.get(&e.2).is_some_and(|&seq| seq <= mark))
            .copied()
            .collect();
        for e in &streams {
            self.stream_free.remove(e);
            self.freed_at.remove(&e.2);
            self.make_free(e.2);
        }
        self.enforce_cap();
    }

    // ------------------------------------------------------------------ pressure

    /// Caps the bytes the pool keeps cached (reserved, not in use): after each synchronisation,
    /// empty segments go back to the driver, largest first, until the cached bytes are at most
    /// `bytes` (the convention of the driver's `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`, which
    /// trims at synchronisations; `usize::MAX`, the default, keeps everything).
    pub fn set_max_cached(&mut self, bytes: usize) {
        self.max_cached = bytes;
    }

    fn cached_bytes(&self) -> usize {
        let reserved: usize = self.segments.values().map(|g| g.size).sum();
        reserved.saturating_sub(self.in_use)
    }

    fn enforce_cap(&mut self) {
        if self.max_cached == usize::MAX || self.cached_bytes() <= self.max_cached {
            return;
        }
        if self.backend.capture() == Capture::Global {
            return;
        }
        self.flush_ready();
        let mut empty: Vec<(usize, DevPtr)> = self
            .segments
            .iter()
            .filter(|(_, g)| g.busy == 0)
            .map(|(&b, g)| (g.size, b))
            .collect();
        empty.sort_unstable_by(|a, b| b.cmp(a));
        for (_, base) in empty {
            if self.cached_bytes() <= self.max_cached {
                break;
            }
            self.drop_segment(base);
            self.stats.pressure_releases += 1;
        }
    }

    /// Hands every empty segment back to the driver, without synchronising: what the pool
    /// caches and no pending free holds. Returns the bytes released. For memory pressure (a
    /// driver allocation elsewhere failed) and idle pools.
    pub fn release_cached(&mut self) -> usize {
        if self.backend.capture() == Capture::Global {
            return 0;
        }
        self.release_postponed();
        self.flush_ready();
        let before: usize = self.segments.values().map(|g| g.size).sum();
        self.release_empty(true);
        let after: usize = self.segments.values().map(|g| g.size).sum();
        before - after
    }

    /// Counts as a pressure release what [`DevicePool::release_cached`] did.
    pub fn release_for_pressure(&mut self) -> usize {
        let segments = self.segments.len();
        let bytes = self.release_cached();
        self.stats.pressure_releases += (segments - self.segments.len()) as u64;
        bytes
    }

    /// Releases the cached segments of a pool that handed nothing out for `idle_ms`
    /// milliseconds. `now_ms` is any monotonic clock in milliseconds; the pool notices idleness
    /// only when asked (the hooks ask at synchronisations). Returns the bytes released.
    pub fn release_if_idle(&mut self, now_ms: u64, idle_ms: u64) -> usize {
        if self.idle_mark.0 != self.next_id {
            self.idle_mark = (self.next_id, now_ms);
            return 0;
        }
        if now_ms.saturating_sub(self.idle_mark.1) < idle_ms || self.cached_bytes() == 0 {
            return 0;
        }
        self.release_for_pressure()
    }

    /// Frees the segments a global-mode capture kept from being freed.
    fn release_postponed(&mut self) {
        if self.postponed.is_empty() || self.backend.capture() == Capture::Global {
            return;
        }
        for (base, _) in std::mem::take(&mut self.postponed) {
            let _ = self.backend.free(base);
        }
    }

    fn segment_retiring(&self, ptr: DevPtr) -> bool {
        self.segments
            .range(..=ptr)
            .next_back()
            .is_some_and(|(_, s)| s.retiring)
    }

    /// Hands every block of the reuse cache's `ready` lists back to the coalescing structure.
    fn flush_ready(&mut self) {
        if self.ready_blocks == 0 {
            return;
        }
        let blocks: Vec<DevPtr> = self.ready.values_mut().flat_map(|v| v.drain(..)).collect();
        self.ready_blocks = 0;
        for ptr in blocks {
            self.make_free(ptr);
        }
    }

    /// Turns a block `Free`, merges it with free neighbours, indexes it, and hands a retiring
    /// segment back once it is empty.
    fn make_free(&mut self, mut ptr: DevPtr) {
        let mut b = self.blocks[&ptr];
        let seg_base = b.segment;
        let seg = self
            .segments
            .get_mut(&seg_base)
            .expect("segment of a block");
        seg.busy -= 1;
        let retiring = seg.retiring;
        // Merge with the next block.
        let next = ptr + b.size as DevPtr;
        if let Some(n) = self.blocks.get(&next).copied() {
            if n.segment == seg_base && n.state == State::Free {
                self.free_index.remove(&(n.size, next));
                self.blocks.remove(&next);
                b.size += n.size;
            }
        }
        // Merge with the previous block.
        if let Some((&prev, &p)) = self.blocks.range(..ptr).next_back() {
            if p.segment == seg_base && p.state == State::Free && prev + p.size as DevPtr == ptr {
                self.free_index.remove(&(p.size, prev));
                self.blocks.remove(&ptr);
                b.size += p.size;
                ptr = prev;
            }
        }
        b.state = State::Free;
        self.blocks.insert(ptr, b);
        if retiring {
            if self.segments[&seg_base].busy == 0 {
                self.drop_segment(seg_base);
            }
        } else {
            self.free_index.insert((b.size, ptr));
        }
    }

    fn drop_segment(&mut self, base: DevPtr) {
        let seg = self.segments.remove(&base).expect("segment");
        let block = self
            .blocks
            .remove(&base)
            .expect("an empty segment is one free block");
        debug_assert_eq!(block.size, seg.size);
        self.free_index.remove(&(seg.size, base));
        if self.backend.capture() == Capture::Global {
            // cuMemFree would invalidate the capture: free it once the capture is over.
            self.postponed.push((base, seg.size));
            return;
        }
        // A driver error on free leaves nothing for the pool to do: the memory is not ours.
        let _ = self.backend.free(base);
    }

    /// Hands every segment without live or pending blocks back to the driver. With
    /// `include_active`, segments that are not retiring go too (trim, out of memory).
    fn release_empty(&mut self, include_active: bool) {
        let empty: Vec<DevPtr> = self
            .segments
            .iter()
            .filter(|(_, s)| s.busy == 0 && (include_active || s.retiring))
            .map(|(&b, _)| b)
            .collect();
        for base in empty {
            self.drop_segment(base);
        }
    }

    /// Gives every cached block back to the driver: waits for frees in flight (one sync if
    /// any), then releases all empty segments.
    pub fn trim(&mut self) -> Result<(), PoolError<B::Error>> {
        self.sync_for_frees()?;
        self.release_cached();
        Ok(())
    }

    /// Forgets every segment without freeing it: for a pool whose memory the driver has freed
    /// already (its context was destroyed or reset). The pool is empty afterwards, and dropping
    /// it frees nothing.
    pub fn forget_segments(&mut self) {
        self.segments.clear();
        self.blocks.clear();
        self.free_index.clear();
        self.stream_free.clear();
        self.live.clear();
        self.deferred.clear();
        self.ready.clear();
        self.ready_blocks = 0;
        self.freed_at.clear();
        self.foreign.clear();
        self.postponed.clear();
        self.in_use = 0;
        self.planned_segment = 0;
    }

    // ------------------------------------------------------------------ regions

    /// A region begins (nesting is counted; only the outermost matters).
    pub fn region_begin(&mut self) {
        self.region_depth += 1;
        if self.region_depth == 1 {
            self.region_peak = self.in_use;
        }
    }

    /// A region ends. At the outermost end, a region that needed more than one segment gets
    /// them replaced: the next growth asks for one segment covering the region's peak, and the
    /// old segments are handed back as soon as they are empty.
    pub fn region_end(&mut self) {
        if self.region_depth == 0 {
            return;
        }
        self.region_depth -= 1;
        if self.region_depth > 0 {
            return;
        }
        self.stats.high_water = self.region_peak as u64;
        // The resize looks at the segments as they are: cached blocks count as free.
        self.flush_ready();
        let active: Vec<DevPtr> = self
            .segments
            .iter()
            .filter(|(_, s)| !s.retiring)
            .map(|(&b, _)| b)
            .collect();
        let largest = active
            .iter()
            .map(|b| self.segments[b].size)
            .max()
            .unwrap_or(0);
        if active.len() > 1 || largest < self.region_peak {
            for base in active {
                self.retire(base);
            }
            self.planned_segment =
                round_up(self.region_peak, MIN_SEGMENT).unwrap_or(self.region_peak);
        }
        self.region_peak = self.in_use;
    }

    fn retire(&mut self, base: DevPtr) {
        let seg = self.segments.get_mut(&base).expect("segment");
        seg.retiring = true;
        let (size, busy) = (seg.size, seg.busy);
        if busy == 0 {
            self.drop_segment(base);
            return;
        }
        let end = base + size as DevPtr;
        let free: Vec<(usize, DevPtr)> = self
            .blocks
            .range(base..end)
            .filter(|(_, b)| b.state == State::Free)
            .map(|(&p, b)| (b.size, p))
            .collect();
        for key in free {
            self.free_index.remove(&key);
        }
    }

    // ------------------------------------------------------------------ queries

    /// True when `ptr` lies in one of the pool's segments (live, free or pending).
    pub fn owns(&self, ptr: DevPtr) -> bool {
        self.segments
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&base, s)| ptr < base + s.size as DevPtr)
    }

    /// The live block containing `ptr`: its start and size (for `cuMemGetAddressRange` and the
    /// range attributes of `cuPointerGetAttribute`).
    pub fn find(&self, ptr: DevPtr) -> Option<(DevPtr, usize)> {
        let (&start, b) = self.blocks.range(..=ptr).next_back()?;
        (self.live.contains_key(&start) && ptr < start + b.size as DevPtr)
            .then_some((start, b.size))
    }

    /// The buffer id of the live block containing `ptr` (`CU_POINTER_ATTRIBUTE_BUFFER_ID`):
    /// every handout of the pool gets its own, also when it reuses an address.
    pub fn buffer_id(&self, ptr: DevPtr) -> Option<u64> {
        let (start, _) = self.find(ptr)?;
        self.live.get(&start).map(|l| l.id)
    }

    /// Checks the invariants documented at the top of this file; returns the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut in_use = 0;
        let mut used_live = 0;
        for (&base, seg) in &self.segments {
            let mut at = base;
            let mut busy = 0;
            let mut prev_free = false;
            for (&p, b) in self.blocks.range(base..base + seg.size as DevPtr) {
                if p != at {
                    return Err(format!(
                        "segment {base:#x}: gap or overlap at {p:#x} (expected {at:#x})"
                    ));
                }
                if b.segment != base {
                    return Err(format!("block {p:#x} names the wrong segment"));
                }
                let free = b.state == State::Free;
                if free && prev_free {
                    return Err(format!("block {p:#x}: two free neighbours not merged"));
                }
                if self.free_index.contains(&(b.size, p)) != (free && !seg.retiring) {
                    return Err(format!("block {p:#x}: free index out of step"));
                }
                match b.state {
                    State::Used => match self.live.get(&p).map(|l| l.size) {
                        Some(size) if size == b.size => {
                            in_use += size;
                            used_live += 1;
                        }
                        Some(_) => return Err(format!("live block {p:#x}: size out of step")),
                        None => {
                            let in_deferred =
                                self.deferred.iter().any(|d| d.1 == p && d.2 == b.size);
                            let in_ready = self.ready.get(&b.size).is_some_and(|v| v.contains(&p));
                            let in_foreign = self.foreign.iter().any(|f| f.1 == p && f.2 == b.size);
                            if usize::from(in_deferred)
                                + usize::from(in_ready)
                                + usize::from(in_foreign)
                                != 1
                            {
                                return Err(format!(
                                    "used block {p:#x}: neither live nor cached exactly once"
                                ));
                            }
                            if in_ready && seg.retiring {
                                return Err(format!("ready block {p:#x} in a retiring segment"));
                            }
                        }
                    },
                    State::AsyncFree(s) if !self.stream_free.contains(&(s, b.size, p)) => {
                        return Err(format!("async-freed block {p:#x} not listed"))
                    }
                    _ => {}
                }
                if !free {
                    busy += 1;
                }
                prev_free = free;
                at = p + b.size as DevPtr;
            }
            if at != base + seg.size as DevPtr {
                return Err(format!("segment {base:#x} not tiled to its end"));
            }
            if busy != seg.busy {
                return Err(format!(
                    "segment {base:#x}: busy {} but {busy} blocks in use",
                    seg.busy
                ));
            }
        }
        if in_use != self.in_use {
            return Err(format!(
                "in_use {} but live blocks sum to {in_use}",
                self.in_use
            ));
        }
        if used_live != self.live.len() {
            return Err("live lists blocks that are not used blocks".into());
        }
        if self.freed_at.len() != self.stream_free.len() {
            return Err("freed_at out of step with the async-freed blocks".into());
        }
        if self.ready_blocks != self.ready.values().map(Vec::len).sum::<usize>() {
            return Err("ready_blocks out of step".into());
        }
        if !self.deferred.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err("deferred frees out of order".into());
        }
        if !self.foreign.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err("foreign frees out of order".into());
        }
        let listed = self.free_index.len()
            + self.stream_free.len()
            + self.deferred.len()
            + self.foreign.len();
        if listed + self.ready_blocks + self.live.len() > self.blocks.len() {
            return Err("indexes list more blocks than exist".into());
        }
        Ok(())
    }
}

/// A dropped pool hands every segment back to its backend (the backend's calls make the pool's
/// context current themselves), live blocks included: nothing can reach them through the pool
/// any more. Freeing a segment waits for work that still uses it, as `cuMemFree` does, so no
/// sync is needed first. Errors are ignored, as in `trim`: `Drop` cannot report them. A pool
/// whose memory the driver freed already calls [`DevicePool::forget_segments`] first.
impl<B: Backend> Drop for DevicePool<B> {
    fn drop(&mut self) {
        for &base in self.segments.keys() {
            let _ = self.backend.free(base);
        }
        for &(base, _) in &self.postponed {
            let _ = self.backend.free(base);
        }
        self.forget_segments();
    }
}
