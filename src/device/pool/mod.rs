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
//! The backend says whether a CUDA graph capture is active ([`Capture`](super::Capture)). While one is, the
//! pool never synchronises; in global mode it never asks the driver for a segment nor frees
//! one either (segments that become free wait in `postponed`), and a request it cannot serve
//! from what it holds fails with [`PoolError::Capturing`] (the hooks then let the driver answer).

mod alloc;
mod free;
mod pressure;
mod queries;
mod regions;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::{Backend, DevPtr, StreamId};

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
