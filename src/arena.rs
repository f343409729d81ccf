//! The resize arena: a bump allocator over one slot of reserved address space that never fails
//! when it is too small, records the high-water mark it would have needed, and resizes itself at
//! the end of the outermost region so the next run of the same work fits with zero overflow.
//!
//! This is Bumper.jl's `ResizeBuffer` made sound for a transparent allocator:
//!
//! * **Overflow grows in place.** The slot is reserved up front, so memory past the planned
//!   capacity is committed right behind it instead of being a separate `malloc`. Nothing ever has
//!   to move. Only when the slot itself is exhausted, or the kernel refuses the commit, does an
//!   allocation *spill* to the next allocator (the caller does that when `alloc` returns null).
//! * **Escapes are safe.** Every block puts one unit on the 16 KiB granule it starts in and one
//!   on the granule it ends in (the same one, for most blocks), and records its header in the
//!   granule it starts in (`cross`), so the granules strictly inside a large block are known to
//!   be covered without being counted one by one: a block costs the same whatever its size. The bump pointer only ever enters a granule that
//!   no live block starts in, ends in or covers, so a block that escapes its region pins the
//!   granules it spans, never the arena, and is never overwritten.
//! * **Cross-thread frees are lock-free.** The owner thread keeps plain counters (`local`); other
//!   threads add to an atomic `remote` counter per granule. `live = local - remote`.
//!
//! # Slot layout
//! ```text
//! slot_base ┬ Arena (this struct)
//!           ├ local:  [u64; granules]        owner-only alloc-minus-local-free counts
//!           ├ remote: [AtomicU64; granules]  frees by other threads
//!           ├ cross:  [u32; granules]        owner-only: header of the last block that
//!           │                                starts in the granule (see `crossing_last`)
//!           ├ touched: [u8; granules]        owner-only: 1 = resident (see footprint.rs)
//!           ├ … padding to a granule boundary
//! data_start┴ data granules … up to slot_end
//! ```
//! Slots are aligned to their size, so the arena of any pointer is `p & !(slot_size - 1)`.
//!
//! # Block layout
//! Every block has a 16-byte header right before it. Its first word holds the requested size
//! (high 48 bits) and a state tag (low 16 bits) that tells a live block from a freed one, for
//! double-free detection; one store writes it, one load checks it. The span of a block is
//! `[header, block + size)`: it is counted in its first granule and in its last granule (two
//! units, in one granule or two); the granules in between are covered through `cross`. Blocks
//! are 16-byte aligned (blocks of a page or more 64-byte aligned, see [`block_align`]), and the
//! bump pointer stays 16-byte aligned; alignment padding in front of a fast-path block carries a
//! gap header, so that the uncounted range can be walked header to header.

use core::cell::Cell;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::footprint;
use crate::lifetime;
use crate::os;

/// log2 of the granule size. A granule is the unit of reuse: an escaped block pins its granules.
pub const GRANULE_SHIFT: u32 = 14;
/// 16 KiB: the most memory one escaped small block can hold back.
pub const GRANULE: usize = 1 << GRANULE_SHIFT;
/// Bytes of header in front of every block (its size-and-tag word and its link).
pub const HEADER: usize = 16;
/// Every block is aligned to at least this (what `malloc` promises on x86-64).
pub const MIN_ALIGN: usize = 16;
/// Blocks of at least this many bytes start on a cache line ([`block_align`]).
pub const LINE_ALIGN_FROM: usize = 4096;
/// The alignment of such blocks.
pub const LINE: usize = 64;

/// True for a request [`Arena::try_alloc_fast_small`] takes: 1 byte up to a page less one
/// (one compare: 0 wraps to the largest size).
#[inline(always)]
pub const fn is_small_request(size: usize) -> bool {
    size.wrapping_sub(1) < LINE_ALIGN_FROM - 1
}

/// The alignment a block of `size` bytes gets for a request of `align`: at least a cache line
/// for blocks of a page or more. A bump allocator with 16-byte headers otherwise puts two
/// consecutive page-multiple blocks exactly 16 bytes apart modulo 4 KiB, and copying one into
/// the other (`np.concatenate`, any `memcpy` between a step's temporaries) then hits the
/// 4K-aliasing trap of `rep movsb`: 38 us instead of 1.6 us for 64 KiB on this machine (see
/// BENCHMARKS.md; glibc's heap has the same trap). At 64 bytes apart it runs at full speed.
#[inline(always)]
pub const fn block_align(size: usize, align: usize) -> usize {
    if size >= LINE_ALIGN_FROM && align < LINE {
        LINE
    } else {
        align
    }
}
/// Number of region peaks the shrink policy looks back over.
pub const PEAK_HISTORY: usize = 8;
/// Nested regions deeper than this still work but do not restore their checkpoint.
pub const MAX_CHECKPOINTS: usize = 32;

/// Header word layout: state tag in the low 16 bits, size above (`size << TAG_BITS | tag`), so
/// that the fast free checks and flips the tag with 16-bit operations. Sizes fit: no arena is
/// larger than 64 GiB.
pub const TAG_BITS: u32 = 16;
const _: () = assert!(
    cfg!(target_endian = "little"),
    "the fast free writes the tag as a u16"
);
const TAG_MASK: usize = (1 << TAG_BITS) - 1;
/// A live block.
pub const TAG_LIVE: usize = 0xA110;
/// A live block sampled by the lifetime predictor: the header's second word holds its
/// [`SampleWord`]. Owner frees of it take the slow path, which learns from its age.
const TAG_SAMPLED: usize = 0xA111;
/// See `Arena::remote_balance`: remote frees alone can never reach it (they would need 2^63
/// bytes); a balance from `ORPHANED_SEEN` on has the exiting owner's add in it.
const ORPHANED: u64 = 1 << 63;
const ORPHANED_SEEN: u64 = 1 << 62;
/// A block its owner freed.
pub const TAG_FREED: usize = 0xF4EE;
/// A block another thread freed. Its units may be on the remote counts already, so a walk of
/// the uncounted range counts it like a live one (see `uncounted`).
const TAG_FREED_REMOTE: usize = 0xF4EF;
/// Not a block: alignment padding of `size` bytes in the uncounted range, which a walk skips.
pub const TAG_GAP: usize = 0x6A90;
const _: () = {
    // `owner_freed` tells `TAG_FREED` by its low byte alone: no other tag, and no multiple of
    // 16 (the value of `limit`, the word at `no_link`), may share it.
    let low = TAG_FREED as u8;
    assert!(
        low != TAG_LIVE as u8
            && low != TAG_SAMPLED as u8
            && low != TAG_FREED_REMOTE as u8
            && low != TAG_GAP as u8
            && !low.is_multiple_of(16),
        "TAG_FREED's low byte must be its own"
    );
};

/// The link a remote free leaves in the block it frees: the address of a word whose low byte is
/// `TAG_FREED`'s. The owner's LIFO free reads no tag (see `Arena::is_last_uncounted`), so a
/// block another thread freed and its owner frees again at the bump pointer gets as far as
/// `release_top`, whose test of the link's word then says "freed" and sends it to
/// `release_freed_below`, which aborts on this address. A static: nothing in any arena.
static POISON_LINK: AtomicUsize = AtomicUsize::new(TAG_FREED);

#[inline(always)]
fn poison_link() -> usize {
    &POISON_LINK as *const AtomicUsize as usize
}

/// The header word of a block of `size` bytes in state `tag`.
#[inline(always)]
const fn header_word(size: usize, tag: usize) -> usize {
    size << TAG_BITS | tag
}

/// The size a header word records.
#[inline(always)]
const fn word_size(word: usize) -> usize {
    word >> TAG_BITS
}

/// The state tag of a header word.
#[inline(always)]
const fn word_tag(word: usize) -> usize {
    word & TAG_MASK
}

/// Requests from this size on stay in the arena whatever their site's lifetime: a long-lived
/// large block pins at most the two granules at its ends (under 2 % of its size at 1 MiB), so
/// prediction buys nothing for it, while the next allocator's path for it (`mmap`, page faults,
/// `munmap`) is the slowest there is. (A Python job with 40 MiB and 4 MiB temporaries that
/// live longer than a lap kept 40 MiB more resident when some of them went to glibc and some
/// stayed in the arena.)
const LARGE_STAYS: usize = 1 << 20;

/// The largest slot: crossing entries keep bits 4..36 of a header's address, and a slot aligned
/// to its size of at most 64 GiB has the bits above in its base.
pub const MAX_SLOT: usize = 1 << 36;
const CROSS_SPAN_MASK: usize = MAX_SLOT - 1;

/// The crossing entry of the header at `hdr` (never 0: the slot's first bytes are metadata).
#[inline(always)]
fn cross_entry(hdr: usize) -> u32 {
    (hdr >> 4) as u32
}

/// An exiting thread's arena that is handed on keeps this much of the start of its memory
/// resident, for the next thread that takes it ([`Arena::reuse`], [`Arena::adopt`]): a program
/// that starts short-lived threads one after another then reuses warm pages, as glibc's arenas
/// are reused. `reservation` bounds how many arenas without an owner keep it.
pub const WARM_BYTES: usize = 512 << 10;

/// In process mode an exiting thread's arena handed on warm keeps, for the purge delay, its
/// free memory in the first this many bytes (see `Arena::prepare_orphan`).
const WARM_KEEP_MAX: usize = 32 << 20;

/// Granules a run takes beyond what the request needs, when they are resident, free and within
/// the capacity (see `Arena::extend_ahead`).
const RUN_AHEAD: usize = 3;

/// Allocations through the predictor between two [`Arena::periodic_look`]s.
const LOOK_EVERY: u32 = 4096;

/// Granules owner frees empty between two looks at the bound, at least.
const EMPTIED_MIN: usize = 64;

/// Planned capacities from this size on are advised to use transparent huge pages.
const HUGE_PAGE_CAPACITY: usize = 4 << 20;

/// Sampled blocks the survivor sweep keeps track of, per arena.
const RING: usize = 32;
const _: () = assert!(RING <= 32, "ring_used is a u32 bit set");
/// Ages are kept in units of this many bytes of the allocation clock (32-bit births).
const CLOCK_SHIFT: u32 = 12;
/// What a region end adds to the allocation clock: more than any lap, so a block alive across
/// a region end is old (and 32-bit births wrap only every 256 region ends).
const REGION_LAP: u64 = 1 << 36;
/// Survivor sweeps run at most once per this many bytes allocated (and at region ends).
const SWEEP_MIN: usize = 256 << 10;
/// The lap of the predictor: blocks that die within this many bytes of later allocation are
/// short-lived. Fixed, not the arena's size: an arena that grew to hold long-lived blocks would
/// otherwise make them look short-lived (a circle seen on a server simulation).
const LAP: u64 = 1 << 20;
/// Regions in a row that leave escapes behind before an arena predicts for its regions, and
/// regions in a row that leave nothing before it stops.
const ESCAPES_TO_PREDICT: u32 = 4;
const CLEAN_TO_STOP: u32 = 64;

/// The second header word of a sampled block: the site's table key (bits 0..12), its ring
/// entry (bits 12..17, valid when bit 17 is set), whether it is a probe (bit 18), and its birth
/// on the allocation clock (bits 32..64, in `1 << CLOCK_SHIFT` byte units).
#[derive(Clone, Copy)]
struct SampleWord(u64);

impl SampleWord {
    const IN_RING: u64 = 1 << 17;
    const PROBE: u64 = 1 << 18;
    fn new(key: u32, ring: Option<usize>, probe: bool, clock: u64) -> Self {
        let mut w = (key as u64 & ((1 << lifetime::SITE_BITS) - 1)) | (clock >> CLOCK_SHIFT) << 32;
        if let Some(i) = ring {
            w |= (i as u64) << 12 | Self::IN_RING;
        }
        if probe {
            w |= Self::PROBE;
        }
        SampleWord(w)
    }
    fn key(self) -> u32 {
        (self.0 & ((1 << lifetime::SITE_BITS) - 1)) as u32
    }
    fn ring(self) -> Option<usize> {
        (self.0 & Self::IN_RING != 0).then_some((self.0 >> 12) as usize & (RING - 1))
    }
    fn probe(self) -> bool {
        self.0 & Self::PROBE != 0
    }
    /// Bytes allocated since the block's birth (to clock resolution).
    fn age(self, clock: u64) -> u64 {
        let now = (clock >> CLOCK_SHIFT) as u32;
        (now.wrapping_sub((self.0 >> 32) as u32) as u64) << CLOCK_SHIFT
    }
}

/// How one arena behaves; fixed when the arena is created.
#[derive(Clone, Copy, Debug)]
pub struct ArenaConfig {
    /// Capacity planned for the first region, in bytes (rounded up to a granule).
    pub initial_capacity: usize,
    /// Smallest request served from the arena; smaller ones go to the next allocator.
    pub min_alloc: usize,
    /// Largest request served from the arena; larger ones go to the next allocator.
    pub max_alloc: usize,
    /// Process mode: there is no region end, so the bump pointer wraps around and reuses freed
    /// granules while the program runs, growing only when a lap finds too little room.
    pub recycle: bool,
}

impl Default for ArenaConfig {
    fn default() -> Self {
        ArenaConfig {
            initial_capacity: 64 << 10,
            min_alloc: 0,
            max_alloc: usize::MAX,
            recycle: false,
        }
    }
}

/// Per-arena figures. See [`crate::stats`](mod@crate::stats) for what each one means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ArenaStats {
    pub arena_capacity: u64,
    pub arena_committed: u64,
    pub high_water: u64,
    pub region_allocs: u64,
    pub overflow_allocs: u64,
    pub spilled_allocs: u64,
    pub resizes: u64,
    /// Bytes of memory the arena holds resident (granules entered and not given back).
    pub resident_bytes: u64,
    /// Bytes of the arena's live blocks, headers included.
    pub live_bytes: u64,
    /// Granules given back to the kernel (`madvise`) while the arena lived.
    pub given_back_granules: u64,
    /// Times the arena closed because it reached its memory bound.
    pub bound_closures: u64,
    /// Bytes of requests sent to the next allocator because the arena was at its bound.
    pub bytes_turned_away: u64,
    /// Bytes of requests the lifetime predictor sent to the next allocator.
    pub bytes_routed_away: u64,
}

impl ArenaStats {
    pub const ZERO: ArenaStats = ArenaStats {
        arena_capacity: 0,
        arena_committed: 0,
        high_water: 0,
        region_allocs: 0,
        overflow_allocs: 0,
        spilled_allocs: 0,
        resizes: 0,
        resident_bytes: 0,
        live_bytes: 0,
        given_back_granules: 0,
        bound_closures: 0,
        bytes_turned_away: 0,
        bytes_routed_away: 0,
    };
}

/// A counter that only the owner thread writes and any thread may read.
/// Load-then-store instead of `fetch_add`: no lock prefix on the hot path, and no data race.
/// Transparent: `malloc`'s assembly fast path increments `region_allocs` as a plain `u64`
/// ([`asm_layout`]).
#[derive(Default)]
#[repr(transparent)]
struct OwnerCounter(AtomicU64);

impl OwnerCounter {
    #[inline(always)]
    fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }
    #[inline(always)]
    fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
    #[inline(always)]
    fn sub(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_sub(n),
            Ordering::Relaxed,
        );
    }
    #[inline(always)]
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What the predictor's fast path ([`Arena::try_alloc_predicted_fast`]) decided.
#[derive(Clone, Copy)]
pub enum Predicted {
    /// A block from the arena.
    Block(*mut u8),
    /// A long site's request: the next allocator serves it.
    Next,
    /// A small request in process mode (an arena that recycles, a size up to
    /// `slab::MAX_SMALL`), whatever its site: the small-block heap serves it (or, when it has no
    /// memory, the next allocator). See `Arena::small_heap_takes`.
    Small,
    /// Neither: take [`Arena::alloc_predicted_general`], which decides from scratch.
    General,
}

#[derive(Clone, Copy, Default)]
struct Checkpoint {
    top: usize,
    /// The run `top` belongs to.
    run_id: u64,
}

/// Why the current run could not be extended.
enum Stop {
    /// The granule starting at this address still holds live blocks.
    Pinned(usize),
    /// The run reached the end of committed memory.
    Uncommitted,
    /// The next granule is not resident and the memory bound does not allow one more.
    Bound,
}

/// One thread's resize arena. Lives at the start of its slot.
///
/// # Invariants (owner-thread fields)
/// * `data_start <= run_start <= top` and `top <= run_end <= committed_end <= slot_end`, where `top`
///   may lag behind `run_start` only transiently inside a method; `top % 16 == 0`.
/// * Every granule in `[granule_ceil(top), run_end)` has a live count of zero and nothing in
///   `[top, run_end)` belongs to a live block: that is the memory the bump pointer hands out next.
/// * `limit == min(run_end, cap_end)`; the fast path serves only `[top, limit)`.
/// * `run_end`, `cap_end`, `committed_end` are granule aligned.
/// * `local[g] - remote[g]` is the number of live blocks whose span starts in granule `g` plus
///   the number whose span ends in it (a block within one granule counts two there). Zero
///   means no live block starts or ends in `g`.
/// * A live block that spans granules `f < l` is the last block starting in `f` (any later one
///   would start past its end), and `cross[f]` holds its header: every block that starts in a
///   granule writes its header there, and nothing else writes a granule's entry while a block
///   starts in it, but a run entering the empty granule (which clears it). Granules strictly
///   between `f` and `l` hold nothing else and count zero. An entry whose block was freed, or
///   stays within its granule, is told apart by the header (`crossing_last`).
/// * `touched[g] == 1` for every granule of the current run and every granule with a live
///   block; `resident_granules` is the number of granules with `touched[g] == 1` (the memory
///   bound's measure, see footprint.rs). A granule with `touched[g] == 0` holds no pages.
/// * `[max(zero_from, highest top of the run), run_end)` reads as zero.
///
/// Only the owner thread touches the `Cell` fields; other threads touch only the atomics (remote
/// frees, stats reads, the orphan handshake).
#[repr(C, align(64))]
pub struct Arena {
    // --- hot: every region allocation and owner free (one cache line) ---
    top: Cell<usize>,
    /// The end of what the fast paths serve (see `update_limit`). Invariant: 16-byte aligned
    /// (a granule boundary, or 0), so that they test a block's end rounded up, which is the new
    /// `top` they compute anyway. Its address is also [`Arena::no_link`].
    limit: Cell<usize>,
    /// `local` biased so that `local_by_addr[addr >> GRANULE_SHIFT]` is the count of the granule
    /// holding `addr` (saves a subtraction per allocation and free).
    local_by_addr: *mut u64,
    /// `cross` biased the same way.
    cross_by_addr: *mut u32,
    run_start: Cell<usize>,
    /// Start of the uncounted range `[uncounted, top)`: the blocks the fast path handed out
    /// since anything last looked at the counts. Their units go on their granules only when
    /// something does (`flush_uncounted`, a walk of the range); a block freed by its owner
    /// before that only has its tag flipped and is never counted, and the last one also gives
    /// its memory back to the bump pointer (a LIFO loop never counts anything). Invariant:
    /// `run_start <= uncounted <= top`, or `uncounted == top`; the range holds only fast-path
    /// blocks and gap headers (`TAG_GAP`), each followed by the next up to `top`.
    uncounted: Cell<usize>,
    /// The header of the block right below the bump pointer, or [`Arena::no_link`] when not
    /// known. Every block the bump pointer hands out stores the value it finds here in its
    /// second header word (its *link*; a sampled block keeps its sample word there instead, and
    /// its owner's free sets it to `no_link`), and then puts its own header here; a free at the
    /// bump pointer follows the links down over blocks their owner freed already
    /// (`release_top`).
    ///
    /// Invariant: `no_link`, or the header of a block of the current run that ends at or below
    /// `top` with only alignment padding between its end and `top`. The link of a plain block
    /// of the current run is `no_link` or the header of the block of the same run right below
    /// it (again with only padding in between). Both hold because every block of
    /// `[run_start, top)` was handed out in the current run (a run enters only granules without
    /// live blocks), memory below a live block is reused only once the bump pointer went back
    /// past it, and every move of the bump pointer other than a bump, a release at it, or a
    /// resize in place of the block that ends at it (`try_resize_last`, `try_resize_in_place`:
    /// that block is this one, or this is `no_link`) sets this to `no_link`.
    ///
    /// It never names a sampled block (sampling the block here sets this to `no_link`) or one
    /// its owner freed (an owner free of this block is a LIFO free, which moves it; the chain
    /// stops at blocks not freed by their owner). It may name one another thread freed: that
    /// block's link is `POISON_LINK`. So the LIFO free (`try_free_local_fast`) reads no tag.
    below_top: Cell<usize>,
    /// Highest `top` seen in this outermost region (absolute address); the peak is
    /// `peak_top - origin`.
    peak_top: Cell<usize>,
    data_start: usize,
    // --- second line ---
    /// Bytes of owner frees in walked ranges not yet reported to `granules_emptied`.
    uncounted_freed: Cell<usize>,
    /// `(committed bytes - HEADER) / 16`: how many 16-byte positions a block can start at;
    /// read by any thread as the sanity bound of `free` (see `plausible`).
    plausible_slots: AtomicUsize,
    committed_bytes: OwnerCounter,
    region_allocs: OwnerCounter,
    /// Bytes (headers included, sizes rounded up to 16) of counted blocks allocated minus
    /// blocks freed by the owner (the uncounted range is not in it until it is counted); minus
    /// `remote_bytes` it is the arena's live bytes (the memory bound's measure).
    live_local_bytes: OwnerCounter,
    slot_base: usize,
    local: *mut u64,

    // --- warm: slow path and region ends ---
    /// The size bounds the user asked for (`alloc_span` is also clamped to the slot).
    user_min_alloc: usize,
    user_max_alloc: usize,
    run_end: Cell<usize>,
    run_id: Cell<u64>,
    cap_end: Cell<usize>,
    committed_end: Cell<usize>,
    /// Highest `run_end` ever: granules past it were never used.
    used_end: Cell<usize>,
    slot_end: usize,
    /// Where the current outermost region started bumping.
    origin: Cell<usize>,
    /// Bytes of this region that had to be served by the next allocator.
    spill_bytes: Cell<usize>,
    /// Bytes this region jumped over (pinned granules and abandoned run tails).
    skipped: Cell<usize>,
    peaks: [Cell<usize>; PEAK_HISTORY],
    peaks_seen: Cell<usize>,
    min_capacity: usize,
    recycle: bool,
    /// The user set size bounds: every allocation takes the slow path, which checks them.
    bounded: bool,
    /// Process mode: bytes of runs used since the bump pointer last wrapped.
    lap_progress: Cell<usize>,
    /// Where the last lap found its first free granule: every granule from `data_start` up to
    /// it was pinned then (0: no hint). Laps start there while no free below it and no remote
    /// free happened since (`remote_at_hint`), instead of walking the same pins again: a
    /// program that keeps one block per region would otherwise rescan them every region.
    /// Invariant: no run starts below it (`start_run` and `resume_at` forget it then), so no
    /// block handed out since it was found lies below it, and none reaches into it from below:
    /// a lap that starts there never starts inside a live block.
    lap_hint: Cell<usize>,
    remote_at_hint: Cell<u64>,
    checkpoints: [Cell<Checkpoint>; MAX_CHECKPOINTS],
    checkpoint_depth: Cell<usize>,

    // --- the memory bound (see footprint.rs) ---
    /// One byte per granule: 1 when the granule is resident (a run entered it since it was
    /// last given back), 0 when it reads as zero and holds no pages. Owner only.
    touched: *mut u8,
    /// One entry per granule: bits 4..36 of the header of the last block that started in the
    /// granule (see `cross_entry`), or 0. Owner only.
    cross: *mut u32,
    /// Everything in `[max(zero_from, highest top of the run), run_end)` reads as zero: what
    /// `alloc_zeroed` need not clear. Moves past every granule the run enters that was resident.
    zero_from: Cell<usize>,
    /// Bytes of the request being served by the slow path: the bound lets the arena grow for
    /// a block it is about to hand out.
    pending_bytes: Cell<usize>,
    /// The arena is over its bound with nothing left to give back: it serves only from resident
    /// memory and sends requests that need more to the next allocator.
    closed: Cell<bool>,
    /// The closed arena's last slow path found no free resident granule: until an owner free
    /// empties a granule, another thread frees something (`remote_bytes` moves from
    /// `dry_remote`), the bound is looked at or the region ends, a request the run cannot hold
    /// is turned away at once instead of lapping over the same pinned granules again.
    /// Invariant: `dry` implies `closed`.
    dry: Cell<bool>,
    /// `remote_bytes` when the arena ran dry.
    dry_remote: Cell<u64>,
    /// Requests turned away since the closed arena last looked at its bound.
    turned_away: Cell<u32>,
    /// Granules owner frees may empty before the next look at the bound.
    emptied_left: Cell<usize>,
    /// Allocations through the predictor until the next [`Arena::periodic_look`].
    look_countdown: Cell<u32>,
    /// Process mode: when free memory above the bound, which frees left, goes back (a
    /// [`os::monotonic_ms`] time); 0 while none waits. See [`Arena::defer_purge`].
    purge_at_ms: Cell<u64>,
    /// `remote_bytes` when the owner last looked at the bound.
    remote_seen: Cell<u64>,
    /// `alloc_clock` at the last purge that `purge_due` allowed, if `purged_once`.
    last_purge_clock: Cell<u64>,
    purged_once: Cell<bool>,
    /// Live bytes and resident granules right after the last purge (`u64::MAX` and 0 before
    /// the first): until the program frees something or the arena enters more granules, another
    /// purge can find nothing more to give back.
    live_after_purge: Cell<u64>,
    resident_after_purge: Cell<usize>,
    resident_granules: OwnerCounter,
    given_back_granules: OwnerCounter,
    closures: OwnerCounter,
    bytes_turned_away: OwnerCounter,

    // --- lifetime prediction (see lifetime.rs) ---
    /// Bytes allocated through the predicted path, plus a whole lap at every region end: the
    /// clock sampled blocks' ages are measured on. Read by remote frees.
    alloc_clock: OwnerCounter,
    /// Clock value of the next survivor sweep.
    next_sweep: Cell<u64>,
    sample_countdown: Cell<u32>,
    /// xorshift state for the gaps between samples (never zero).
    sample_rng: Cell<u32>,
    probe_countdown: Cell<u32>,
    /// Addresses of sampled blocks still live (0: empty); a free of one clears its entry.
    ring: [AtomicUsize; RING],
    /// `SampleWord` of each ring entry (owner only).
    ring_words: [Cell<u64>; RING],
    ring_next: Cell<usize>,
    /// Bit `i` set: `ring[i]` may hold a block (a superset: frees clear entries on their own),
    /// so that a sweep looks only at those.
    ring_used: Cell<u32>,
    /// Markers mode: regions of this arena allocate through the predictor.
    predicting: Cell<bool>,
    /// Markers mode: regions in a row that left more live bytes behind than they found, and
    /// that left nothing behind and routed nothing away.
    escaping_regions: Cell<u32>,
    clean_regions: Cell<u32>,
    live_at_reset: Cell<u64>,
    routed_at_reset: Cell<u64>,
    bytes_routed_away: OwnerCounter,
    /// Bytes sent to the next allocator not yet added to `SENT_TO_NEXT`.
    sent_unpublished: Cell<u64>,

    // --- readable by any thread ---
    capacity_bytes: OwnerCounter,
    high_water: OwnerCounter,
    overflow_allocs: OwnerCounter,
    /// Markers mode: set when the region first outgrows its capacity. From then on the fast path
    /// serves the whole run, and every allocation of the region counts as an overflow
    /// allocation: `region_allocs - overflow_base` of them, added at the region's end.
    overflowing: AtomicBool,
    overflow_base: OwnerCounter,
    spilled_allocs: OwnerCounter,
    resizes: OwnerCounter,

    // --- written by other threads ---
    remote: *const AtomicU64,
    /// Frees by other threads and the release handshake in one word (one locked add per remote
    /// free): remote frees add the bytes they free (headers included, sizes rounded up to 16),
    /// so while the owner lives it is the arena's remote-freed bytes; the exiting owner adds
    /// `ORPHANED - live_local_bytes`. The one add that makes it equal to `ORPHANED` (every byte
    /// freed, owner gone) releases the slot, and no thread reads the arena after its own add:
    /// the slot may be gone by then.
    remote_balance: AtomicU64,
    /// Set by the exiting owner (stats only).
    orphaned: AtomicBool,
    /// Free for the owner of the slot table to use (links, ids).
    pub slot_index: AtomicUsize,
}

// SAFETY: the `Cell` fields are only touched by the owner thread (documented above and upheld by
// the router, which calls owner-only methods only with the thread's own arena). Everything other
// threads touch is atomic.
unsafe impl Sync for Arena {}

/// A block at least this large that another thread frees gives its pages back at once, from
/// the freeing thread: its owner reuses its memory only once it looks at the remote counts (a
/// lap, a region end), and went on mapping fresh memory meanwhile. One thread allocating 32 MiB
/// blocks that another frees peaked at 66 MiB in process mode and 98 MiB in regions (glibc,
/// which unmaps such blocks on free: 38 MiB).
const REMOTE_DISCARD_FROM: usize = 1 << 20;

/// Gives the whole pages of the block `[p, p + size)` back to the kernel.
///
/// # Safety
/// The block is live, the caller frees it, and nothing has published the free yet: nobody reuses
/// its memory meanwhile.
#[cold]
#[inline(never)]
unsafe fn discard_freed_block(p: usize, size: usize) {
    let (lo, hi) = whole_pages(p, p + size);
    if hi > lo {
        // SAFETY: whole pages strictly inside the block (its header lies before `lo`), which the
        // program gives up: the owner reuses none of it before the counts say it is free, and a
        // freed block's contents do not matter. Refused, nothing changed.
        let _ = unsafe { os::discard(lo, hi - lo) };
    }
}

/// A `calloc` that would clear this much memory the arena handed out before gives its pages
/// back to the kernel instead, which hands them out zeroed when they are touched. The marks that
/// say what may hold old contents are coarse (everything below the highest top of the run): a
/// 256 MiB `calloc` in a loop, each block freed after two bytes were written, wrote 256 MiB of
/// zeros per call, faulting in pages nobody had touched (17 ms a call; glibc maps a fresh
/// block: 19 µs). From 32 MiB, the largest block glibc may keep in its heap (it maps every
/// larger one fresh), so a block that size costs what glibc's costs.
const CLEAR_BY_DISCARD_FROM: usize = 32 << 20;

/// Zeroes `len` bytes at `p`, from [`CLEAR_BY_DISCARD_FROM`] on by giving the whole pages back
/// (`madvise(MADV_DONTNEED)`: private anonymous memory then reads as zero) and writing only the
/// partial pages at the ends, unless most of them are resident: writing memory the program keeps
/// using costs less than faulting it back in (a region that callocs and fills 64 MiB a step).
///
/// # Safety
/// `[p, p + len)` is part of a block of the arena's committed memory that the caller took and has
/// not handed out yet.
unsafe fn clear_fresh_block(p: *mut u8, len: usize) {
    if len >= CLEAR_BY_DISCARD_FROM {
        let (start, end) = (p as usize, p as usize + len);
        let (lo, hi) = whole_pages(start, end);
        // SAFETY: whole pages of committed memory inside the block, which nothing else uses
        // (caller's obligation); `mincore` only reads their residency.
        let residency = unsafe { os::resident_sixteenths(lo, hi - lo) };
        let mostly_resident = residency.is_none_or(|r| r >= 8);
        // SAFETY: the same pages; the discard leaves them mapped, reading as zero. Refused
        // (locked memory), it changed nothing, and the whole range is written below.
        if !mostly_resident && unsafe { os::discard(lo, hi - lo) } {
            // SAFETY: the partial pages at both ends, inside the block.
            unsafe {
                ptr::write_bytes(p, 0, lo - start);
                ptr::write_bytes(hi as *mut u8, 0, end - hi);
            }
            return;
        }
    }
    // SAFETY: caller's obligation.
    unsafe { ptr::write_bytes(p, 0, len) };
}

/// The whole pages inside `[start, end)`: `lo..hi`, empty (`hi <= lo`) when there is none.
#[inline]
fn whole_pages(start: usize, end: usize) -> (usize, usize) {
    (align_up(start, os::PAGE), end & !(os::PAGE - 1))
}

/// What a request of `size` bytes moves the allocation clock by: the block and its header, a
/// size no arena can hold counted as the largest one can (`malloc(SIZE_MAX)` in process mode
/// overflowed the sum: a panic in debug builds).
#[inline(always)]
fn clock_bytes(size: usize) -> u64 {
    (size.min(MAX_SLOT) + HEADER) as u64
}

#[inline(always)]
const fn align_up(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

/// What the assembly entry points of `malloc` and `free` (preload/src/malloc.rs, x86-64 Linux)
/// need to run the commonest paths inline: the byte offsets of the owner-only words of
/// [`Arena`] they read and write (it is `repr(C)`), and the header's layout.
///
/// `malloc` does what [`Arena::try_alloc_fast_small`], or [`Arena::try_alloc_fast_aligned`] at a
/// cache line's alignment, does with `Arena::bump`; `free` does what the LIFO branch of
/// [`Arena::try_free_local_fast`] does with `Arena::release_top`, when the link's word does not
/// say "freed". Both serve the owner thread only, and leave every other case to those functions.
/// A change to any of them must be made there too: the preload tests' `fast_paths` program
/// checks what the two do, and `scripts/test.sh` runs the preload tests once more with the
/// arena's invariants checked after every operation of the Rust paths. Why assembly: each taken
/// branch on the way from `malloc` or `free` into a Rust function cost the Bumper loop about 3 %
/// (BENCHMARKS.md, eleventh session).
pub mod asm_layout {
    use super::{Arena, HEADER, LINE, LINE_ALIGN_FROM, MIN_ALIGN};
    use core::mem::{offset_of, size_of};

    /// `Arena::top` (`Cell<usize>`).
    pub const TOP: usize = offset_of!(Arena, top);
    /// `Arena::limit` (`Cell<usize>`).
    pub const LIMIT: usize = offset_of!(Arena, limit);
    /// `Arena::uncounted` (`Cell<usize>`).
    pub const UNCOUNTED: usize = offset_of!(Arena, uncounted);
    /// `Arena::below_top` (`Cell<usize>`).
    pub const BELOW_TOP: usize = offset_of!(Arena, below_top);
    /// `Arena::peak_top` (`Cell<usize>`).
    pub const PEAK_TOP: usize = offset_of!(Arena, peak_top);
    /// `Arena::region_allocs` (`OwnerCounter`: a `u64`).
    pub const REGION_ALLOCS: usize = offset_of!(Arena, region_allocs);
    /// Offset of the link in a block's header (after its size-and-tag word, `size << TAG_BITS |
    /// tag`, see [`super::TAG_BITS`]).
    pub const LINK: usize = 8;

    const _: () = {
        // The words the assembly uses with 8-byte operands are 8 bytes.
        assert!(size_of::<core::cell::Cell<usize>>() == 8 && size_of::<super::OwnerCounter>() == 8);
        // A header is two words, the size-and-tag word and the link: `bump` writes them so.
        assert!(HEADER == 2 * size_of::<usize>() && LINK == size_of::<usize>());
        // The assembly's paths: below a page at `MIN_ALIGN`, from a page on at a cache line.
        assert!(super::block_align(LINE_ALIGN_FROM - 1, MIN_ALIGN) == MIN_ALIGN);
        assert!(super::block_align(LINE_ALIGN_FROM, MIN_ALIGN) == LINE);
        // `-MIN_ALIGN` and `-LINE` as masks.
        assert!(MIN_ALIGN.is_power_of_two() && LINE.is_power_of_two());
    };
}

impl Arena {
    /// Bytes at the start of a slot taken by the arena's own metadata.
    pub const fn metadata_bytes(slot_size: usize) -> usize {
        let granules = slot_size >> GRANULE_SHIFT;
        align_up(align_up(size_of::<Arena>(), 64) + granules * 21, GRANULE)
    }

    /// Builds an arena in the slot `[slot_base, slot_base + slot_size)`.
    ///
    /// Returns `None` if the kernel refuses to commit the metadata.
    ///
    /// # Safety
    /// 1. The slot lies in a [`os::reserve`] mapping, is aligned to `slot_size`, and is otherwise unused.
    /// 2. `slot_size` is a power of two and at least 4 granules larger than the metadata.
    /// 3. The arena is used by one owner thread at a time, as documented on [`Arena`].
    pub unsafe fn create(
        slot_base: usize,
        slot_size: usize,
        cfg: ArenaConfig,
    ) -> Option<&'static Arena> {
        let meta = Self::metadata_bytes(slot_size);
        debug_assert!(slot_size.is_power_of_two() && slot_base % slot_size == 0);
        if slot_size > MAX_SLOT {
            return None;
        }
        debug_assert!(
            meta + 4 * GRANULE <= slot_size,
            "slot of {slot_size} bytes too small"
        );
        let data_start = slot_base + meta;
        let capacity = Self::initial_capacity(&cfg, data_start, slot_base + slot_size);
        // SAFETY: obligation 1 says the slot is ours; both ranges are granule (so page) aligned.
        if !unsafe { os::commit(slot_base, meta) } {
            return None;
        }
        // SAFETY: the data range is ours (obligation 1). If committing the first capacity fails, start with none: the first
        // allocation then commits what it needs or spills.
        let committed = if unsafe { os::commit(data_start, capacity) } {
            capacity
        } else {
            0
        };
        // SAFETY: obligations 1-3; the metadata is committed and, in a slot never used or
        // decommitted since, reads as zero; so does the data.
        Some(unsafe { Self::build(slot_base, slot_size, cfg, data_start + committed, 0) })
    }

    /// Builds a new arena in the slot of `old`, for a new owner thread, keeping the memory `old`
    /// still has committed and resident: a thread that replaces one that just exited starts on
    /// warm pages instead of faulting fresh ones and making the system calls again.
    ///
    /// `old`'s granule tables are cleared (nothing is live, so every count is settled); its
    /// `touched` table is kept, as it still says which granules hold pages: the new run treats
    /// those as holding old contents (never as zero), as a lap does.
    ///
    /// # Safety
    /// 1. `old` came from [`Arena::create`] or [`Arena::reuse`], its owner has exited, none of
    ///    its blocks is live, and no other thread reads or writes it any more (the caller won
    ///    the release claim of [`Arena::complete_orphan`] or [`Arena::free_remote`], and holds
    ///    the slot).
    /// 2. The new arena is used by one owner thread at a time, as documented on [`Arena`].
    pub unsafe fn reuse(old: &'static Arena, cfg: ArenaConfig) -> &'static Arena {
        let (slot_base, slot_end, data_start) = (old.slot_base, old.slot_end, old.data_start);
        // Free memory the exited owner kept for the purge delay waits on in the new one.
        let purge_at_ms = old.purge_at_ms.get();
        let slot_size = slot_end - slot_base;
        let mut committed_end = old.committed_end.get();
        // Every count lies below the highest run end and the committed memory.
        let counted =
            (align_up(old.used_end.get().max(committed_end), GRANULE) - slot_base) >> GRANULE_SHIFT;
        let granules = slot_size >> GRANULE_SHIFT;
        // SAFETY: obligation 1: nothing else uses the slot's tables; `counted <= granules`, and
        // each table has `granules` entries in committed metadata (see `metadata_bytes`).
        unsafe {
            ptr::write_bytes(old.local, 0, counted);
            ptr::write_bytes(old.local.add(granules), 0, counted);
            ptr::write_bytes(old.cross, 0, counted);
        }
        let mut resident = 0;
        for g in old.granule(data_start)..old.granule(committed_end) {
            // SAFETY: a granule of the slot; the table is ours (obligation 1).
            resident += unsafe { *old.touched.add(g) } as u64;
        }
        let capacity = Self::initial_capacity(&cfg, data_start, slot_end);
        if committed_end < data_start + capacity
            // SAFETY: `[committed_end, data_start + capacity)` lies in our slot, granule aligned.
            && unsafe { os::commit(committed_end, data_start + capacity - committed_end) }
        {
            committed_end = data_start + capacity;
        }
        // SAFETY: obligations 1 and 2; the tables were cleared above but for `touched`, which
        // matches `resident`; memory of granules not touched reads as zero (given back or never
        // entered).
        let arena = unsafe { Self::build(slot_base, slot_size, cfg, committed_end, resident) };
        arena.purge_at_ms.set(purge_at_ms);
        arena.debug_check();
        arena
    }

    /// The capacity an arena starts with: what the configuration asks for, in whole granules,
    /// at most what the slot holds.
    fn initial_capacity(cfg: &ArenaConfig, data_start: usize, slot_end: usize) -> usize {
        align_up(cfg.initial_capacity.max(GRANULE), GRANULE).min(slot_end - data_start)
    }

    /// Writes a new arena at the start of its slot, with `[data_start, committed_end)` committed
    /// and `resident` granules of it counted resident.
    ///
    /// # Safety
    /// 1. As [`Arena::create`]'s obligations 1 to 3, but the slot's metadata is committed.
    /// 2. The `local`, `remote` and `cross` tables read as zero; `touched` has exactly
    ///    `resident` granules set, all below `committed_end`; the memory of every other granule
    ///    reads as zero.
    unsafe fn build(
        slot_base: usize,
        slot_size: usize,
        cfg: ArenaConfig,
        committed_end: usize,
        resident: u64,
    ) -> &'static Arena {
        let meta = Self::metadata_bytes(slot_size);
        let data_start = slot_base + meta;
        let slot_end = slot_base + slot_size;
        let data_room = slot_end - data_start;
        let capacity = Self::initial_capacity(&cfg, data_start, slot_end);
        // Process mode's capacity follows what is committed; a region's starts at the plan.
        let cap_end = if cfg.recycle {
            committed_end
        } else {
            committed_end.min(data_start + capacity)
        };
        let granules = slot_size >> GRANULE_SHIFT;
        let local = (slot_base + align_up(size_of::<Arena>(), 64)) as *mut u64;
        // SAFETY: `local` and `remote` lie within the metadata just committed (see metadata_bytes).
        let remote = unsafe { local.add(granules) } as *const AtomicU64;
        // SAFETY: as above: the crossing table follows the two count tables, and the byte table
        // follows it.
        let cross = unsafe { local.add(2 * granules) } as *mut u32;
        // SAFETY: as above.
        let touched = unsafe { cross.add(granules) } as *mut u8;
        let min_alloc = cfg.min_alloc.max(1);
        let user_max_alloc = cfg.max_alloc.max(min_alloc);
        // Size bounds the user set turn the fast path off (its limit stays 0): it checks no size.
        let bounded = min_alloc > 1 || user_max_alloc < data_room;
        let arena = Arena {
            top: Cell::new(data_start),
            limit: Cell::new(if bounded { 0 } else { data_start }),
            local_by_addr: local.wrapping_sub(slot_base >> GRANULE_SHIFT),
            cross_by_addr: cross.wrapping_sub(slot_base >> GRANULE_SHIFT),
            run_start: Cell::new(data_start),
            uncounted: Cell::new(data_start),
            below_top: Cell::new(slot_base + core::mem::offset_of!(Arena, limit)),
            peak_top: Cell::new(data_start),
            data_start,
            uncounted_freed: Cell::new(0),
            plausible_slots: AtomicUsize::new(0),
            committed_bytes: OwnerCounter::default(),
            region_allocs: OwnerCounter::default(),
            live_local_bytes: OwnerCounter::default(),
            slot_base,
            local,
            user_min_alloc: min_alloc,
            user_max_alloc,
            run_end: Cell::new(data_start),
            run_id: Cell::new(0),
            cap_end: Cell::new(cap_end),
            committed_end: Cell::new(committed_end),
            used_end: Cell::new(data_start),
            slot_end,
            origin: Cell::new(data_start),
            spill_bytes: Cell::new(0),
            skipped: Cell::new(0),
            peaks: Default::default(),
            peaks_seen: Cell::new(0),
            min_capacity: capacity,
            recycle: cfg.recycle,
            bounded,
            lap_progress: Cell::new(0),
            lap_hint: Cell::new(0),
            remote_at_hint: Cell::new(0),
            checkpoints: Default::default(),
            checkpoint_depth: Cell::new(0),
            touched,
            cross,
            zero_from: Cell::new(data_start),
            pending_bytes: Cell::new(0),
            closed: Cell::new(false),
            dry: Cell::new(false),
            dry_remote: Cell::new(0),
            turned_away: Cell::new(0),
            emptied_left: Cell::new(EMPTIED_MIN),
            look_countdown: Cell::new(LOOK_EVERY),
            purge_at_ms: Cell::new(0),
            remote_seen: Cell::new(0),
            last_purge_clock: Cell::new(0),
            purged_once: Cell::new(false),
            live_after_purge: Cell::new(u64::MAX),
            resident_after_purge: Cell::new(0),
            resident_granules: OwnerCounter::default(),
            given_back_granules: OwnerCounter::default(),
            closures: OwnerCounter::default(),
            bytes_turned_away: OwnerCounter::default(),
            alloc_clock: OwnerCounter::default(),
            next_sweep: Cell::new(SWEEP_MIN as u64),
            sample_countdown: Cell::new(1),
            sample_rng: Cell::new((slot_base >> GRANULE_SHIFT) as u32 | 1),
            probe_countdown: Cell::new(1),
            ring: [const { AtomicUsize::new(0) }; RING],
            ring_words: [const { Cell::new(0) }; RING],
            ring_next: Cell::new(0),
            ring_used: Cell::new(0),
            predicting: Cell::new(false),
            escaping_regions: Cell::new(0),
            clean_regions: Cell::new(0),
            live_at_reset: Cell::new(0),
            routed_at_reset: Cell::new(0),
            bytes_routed_away: OwnerCounter::default(),
            sent_unpublished: Cell::new(0),
            capacity_bytes: OwnerCounter::default(),
            high_water: OwnerCounter::default(),
            overflow_allocs: OwnerCounter::default(),
            overflowing: AtomicBool::new(false),
            overflow_base: OwnerCounter::default(),
            spilled_allocs: OwnerCounter::default(),
            resizes: OwnerCounter::default(),
            remote,
            remote_balance: AtomicU64::new(0),
            orphaned: AtomicBool::new(false),
            slot_index: AtomicUsize::new(0),
        };
        arena.capacity_bytes.set((cap_end - data_start) as u64);
        arena.set_committed_end(committed_end);
        arena.resident_granules.set(resident);
        let at = slot_base as *mut Arena;
        // SAFETY: the slot start is committed, 64-byte aligned (slot aligned) and unused (obligation 1).
        unsafe { at.write(arena) };
        // SAFETY: just written; lives as long as the slot, which outlives every user by obligation 1.
        unsafe { &*at }
    }

    /// The arena that owns `p`, given that `p` lies in some slot of size `slot_size`.
    #[inline(always)]
    pub fn of(p: usize, slot_size: usize) -> *const Arena {
        (p & !(slot_size - 1)) as *const Arena
    }

    /// First byte of the slot this arena lives in.
    pub fn slot_base(&self) -> usize {
        self.slot_base
    }

    /// End of the memory the arena has made readable and writable (metadata and data).
    pub(crate) fn committed_end(&self) -> usize {
        self.committed_end.get()
    }

    #[inline(always)]
    fn granule(&self, addr: usize) -> usize {
        (addr - self.slot_base) >> GRANULE_SHIFT
    }

    /// Live blocks touching granule `g`. Acquire pairs with the Release of remote frees, so a
    /// granule that reads as free was completely finished with by every thread.
    #[inline(always)]
    fn live(&self, g: usize) -> u64 {
        // SAFETY: `g` indexes a granule of this slot; both tables have one entry per granule.
        unsafe { (*self.local.add(g)).wrapping_sub((*self.remote.add(g)).load(Ordering::Acquire)) }
    }

    /// [`Arena::live`] when every block is counted (the uncounted range is flushed, and only
    /// the owner, who is not allocating, could open a new one): a remote free then adds to the
    /// `remote` count of a block counted in `local` already, so `local >= remote`, and a zero
    /// `local` means no live block without a look at `remote`. The walks over every granule
    /// read only the first table where blocks left none (the interior of a large block: its
    /// table pages were never written, and reading them costs a page fault each).
    fn live_when_counted(&self, g: usize) -> u64 {
        // SAFETY: `g` indexes a granule of this slot.
        if unsafe { *self.local.add(g) } == 0 {
            debug_assert_eq!(
                self.live(g),
                0,
                "a remote free of a block that was never counted"
            );
            return 0;
        }
        self.live(g)
    }

    // ---------------------------------------------------------------- allocation

    /// Allocates `size` bytes aligned to `align` (a power of two). Null means "not served here":
    /// the request is outside the size bounds, or memory ran out; the caller uses the next
    /// allocator.
    ///
    /// # Safety
    /// Called by the owner thread. `size >= 1`, `align` a power of two.
    #[inline(always)]
    pub unsafe fn alloc(&self, size: usize, align: usize) -> *mut u8 {
        // SAFETY: forwarded obligations.
        let p = unsafe { self.try_alloc_fast(size, align) };
        if !p.is_null() {
            return p;
        }
        self.alloc_slow(size, align.max(MIN_ALIGN))
    }

    /// The fast path alone: a block from the checked run, or null when the caller must take
    /// [`Arena::alloc_slow`]. Calls nothing, so a caller that inlines it needs no stack frame;
    /// a block of a page or more, or with a larger alignment, takes
    /// [`Arena::try_alloc_fast_aligned`] (inlined too: as a call it cost about 13 more
    /// instructions per such block and its callers a frame).
    ///
    /// `size` may be 0 here (unlike [`Arena::alloc`]): such a request goes to the aligned path,
    /// which declines it, so that `malloc`'s fast path needs no `max(1)` (three instructions;
    /// the slow path gives it a block of 1).
    ///
    /// # Safety
    /// As [`Arena::alloc`], except that `size` may be 0.
    #[inline(always)]
    pub unsafe fn try_alloc_fast(&self, size: usize, align: usize) -> *mut u8 {
        debug_assert!(align.is_power_of_two());
        if is_small_request(size) && align <= MIN_ALIGN {
            // SAFETY: forwarded obligations; `size` is 1 to a page less one.
            return unsafe { self.try_alloc_fast_small(size) };
        }
        // SAFETY: forwarded obligations.
        unsafe { self.try_alloc_fast_aligned(size, align) }
    }

    /// [`Arena::try_alloc_fast`] for a block of `size` bytes, 1 up to a page less one, at the
    /// minimum alignment. Public for `malloc`'s entry point, which calls the two paths itself:
    /// in one function the compiler joins them at their common tail, and the small one then
    /// jumps to it. `malloc`'s assembly entry point (x86-64 Linux) does what this and
    /// [`Arena::bump`] do itself: see [`asm_layout`].
    ///
    /// # Safety
    /// As [`Arena::alloc`], and `size < LINE_ALIGN_FROM`.
    #[inline(always)]
    pub unsafe fn try_alloc_fast_small(&self, size: usize) -> *mut u8 {
        debug_assert!((1..LINE_ALIGN_FROM).contains(&size));
        // `top` is 16-byte aligned, so the block needs no rounding; `size` is below a page, so
        // its end cannot wrap (`top` lies below 2^47). `limit` is 16-byte aligned too, so the
        // rounded end is tested: the same test, and the new `top` computed once.
        let top = self.top.get();
        let p = top + HEADER;
        let new_top = align_up(p + size, MIN_ALIGN);
        if new_top > self.limit.get() {
            return ptr::null_mut();
        }
        // SAFETY: `[top, new_top)` lies in `[top, limit)`, which the invariants say is committed
        // and unused.
        unsafe { self.bump(p, size, new_top) }
    }

    /// [`Arena::try_alloc_fast`] for a block of a page or more, or a larger alignment: it starts
    /// where [`block_align`] says, and alignment padding gets a gap header.
    ///
    /// # Safety
    /// As [`Arena::alloc`], except that `size` may be 0 (declined, as by
    /// [`Arena::try_alloc_fast`]).
    #[inline(always)]
    pub unsafe fn try_alloc_fast_aligned(&self, size: usize, align: usize) -> *mut u8 {
        // `size - 1` wraps for 0: declined (see `try_alloc_fast`); a size beyond the slot too.
        // Tested first: after it, `malloc`'s caller knows the size is a page or more, so the
        // alignment below is a constant (tested later, it cost seven instructions to pick).
        // As a shift (`MAX_SLOT` is a power of two): as a compare, the compiler built the
        // 64-bit bound in a register and moved the subtraction into it (five instructions).
        if size.wrapping_sub(1) >> MAX_SLOT.trailing_zeros() != 0 {
            return ptr::null_mut();
        }
        let top = self.top.get();
        let align = block_align(size, align);
        // `top` lies below 2^47, so `p` cannot wrap, and the size is below the slot's, so `end`
        // cannot either; an alignment beyond the slot makes `p` exceed the limit.
        let p = (top + HEADER + align - 1) & !(align - 1);
        // As in `try_alloc_fast_small`: `limit` is 16-byte aligned.
        let new_top = align_up(p + size, MIN_ALIGN);
        if new_top > self.limit.get() {
            return ptr::null_mut();
        }
        let hdr = p - HEADER;
        if hdr != top {
            // Alignment padding: a walk of the uncounted range must be able to step over it.
            // SAFETY: `[top, hdr)` is at least 16 bytes of the checked run ahead of the bump
            // pointer.
            unsafe { (top as *mut usize).write(header_word(hdr - top, TAG_GAP)) };
        }
        // SAFETY: `[hdr, new_top)` lies in `[top, limit)`, checked above.
        unsafe { self.bump(p, size, new_top) }
    }

    /// Hands out the block of `size` bytes at `p` (header at `p - HEADER`, at or past `top`):
    /// the bump pointer moves to `new_top`, its end rounded up to 16 bytes, and the block joins
    /// the uncounted range `[uncounted, top)` just by that. Mirrored in `malloc`'s assembly entry
    /// point ([`asm_layout`]).
    ///
    /// # Safety
    /// `[p - HEADER, new_top)` lies in `[top, limit)`, committed and unused;
    /// `new_top == align_up(p + size, MIN_ALIGN)`; any padding in `[top, p - HEADER)` has a
    /// gap header.
    #[inline(always)]
    unsafe fn bump(&self, p: usize, size: usize, new_top: usize) -> *mut u8 {
        debug_assert!(p - HEADER >= self.top.get() && new_top == align_up(p + size, MIN_ALIGN));
        self.top.set(new_top);
        let hdr = (p - HEADER) as *mut usize;
        // SAFETY: caller's obligation (the header is 16 bytes: its word and the link).
        unsafe {
            hdr.write(header_word(size, TAG_LIVE));
            hdr.add(1).write(self.below_top.get());
        }
        self.below_top.set(hdr as usize);
        self.region_allocs.add(1);
        // Its bytes join `live_local_bytes` when it is counted (`count_range`).
        self.debug_check();
        let p = p as *mut u8;
        if p.is_null() {
            // SAFETY: `p = top + HEADER` (at least) and `top` is an address in our slot.
            unsafe { core::hint::unreachable_unchecked() }
        }
        p
    }

    /// The fast path of `calloc` for a block under a page: a zeroed block from the checked run,
    /// or null (the caller takes [`Arena::alloc_zeroed`]). Clears only what the run may have
    /// written: below the highest top it reached, or below `zero_from`.
    ///
    /// # Safety
    /// As [`Arena::alloc`], except that `size` may be 0 (declined: the caller's slow path
    /// serves it, so `calloc` needs no `max(1)`).
    #[inline(always)]
    pub unsafe fn try_alloc_zeroed_fast(&self, size: usize) -> *mut u8 {
        if !is_small_request(size) {
            // A page or more takes the slow path: clearing it costs far more than the call,
            // and this path stays small enough to inline into `calloc`. So does 0.
            return ptr::null_mut();
        }
        let written_below = self.peak_top.get().max(self.top.get());
        // SAFETY: forwarded obligations; `size` is 1 to a page less one (tested above). The fast
        // path never starts a run.
        let p = unsafe { self.try_alloc_fast_small(size) };
        if !p.is_null() {
            let clean_from = written_below.max(self.zero_from.get());
            if clean_from > p as usize {
                let dirty = (clean_from - p as usize).min(size);
                // SAFETY: the first `dirty` bytes of a fresh block of at least `size` bytes.
                unsafe { ptr::write_bytes(p, 0, dirty) };
            }
        }
        p
    }

    /// True when `hdr` is the header of the run's last block (`below_top`) and it is not counted
    /// yet: the block the LIFO free releases. Being `below_top` says it is ours, of the current
    /// run, with only padding up to `top`, and neither sampled nor freed by its owner (see
    /// `below_top`), so neither its size, nor the range, nor its tag is needed: the one state
    /// left to tell, freed by another thread (a double free now), shows in its link, which
    /// [`Arena::release_top`] reads anyway (`POISON_LINK`). (`no_link`, the address of
    /// `limit`, lies below `data_start`, so below `uncounted`: it never passes.)
    ///
    /// The tag test this replaces cost 5 % of the Bumper loop's time and 7 % of the LIFO
    /// workload's (BENCHMARKS.md, tenth session): a branch on a load from the header just
    /// written, where a branch on a word of the arena's line costs nothing measurable.
    #[inline(always)]
    fn is_last_uncounted(&self, hdr: usize) -> bool {
        if hdr != self.below_top.get() {
            return false;
        }
        // Nothing, for the compiler only: without it, it computes both compares with `set`
        // instructions and tests their `or` (five instructions more on every free).
        // SAFETY: an empty assembly block.
        unsafe { core::arch::asm!("", options(nomem, nostack, preserves_flags)) };
        hdr >= self.uncounted.get()
    }

    /// [`Arena::is_last_uncounted`], and the block is live: what `realloc` resizes in place. A
    /// resize does not read the link, so it tests the tag (a `realloc` of a block another
    /// thread freed goes to the general path, which tells).
    #[inline(always)]
    fn is_last_live_uncounted(&self, hdr: usize) -> bool {
        self.is_last_uncounted(hdr)
            // SAFETY: read once `hdr == below_top`, whose invariant says it is a block header in
            // our committed run. The tag is the header word's low 16 bits (little endian).
            && unsafe { *(hdr as *const u16) } == TAG_LIVE as u16
    }

    /// The fast path of `realloc` for the last block handed out, when it is still uncounted: it
    /// grows or shrinks where it is, with nothing to recount. False, having changed nothing, for any
    /// other block or when the run has no room; the caller then takes the general path.
    ///
    /// # Safety
    /// Called by the owner thread; `p` is a live block of the allocator (this arena's or not)
    /// and `new_size >= 1`.
    #[inline(always)]
    pub unsafe fn try_resize_last(&self, p: *mut u8, new_size: usize) -> bool {
        let hdr = (p as usize).wrapping_sub(HEADER);
        // Its old size is not needed; padding it grows over becomes part of it.
        if new_size > MAX_SLOT || !self.is_last_live_uncounted(hdr) {
            return false; // too large, or not the last block, live and uncounted
        }
        let top = self.top.get();
        let new_top = align_up(p as usize + new_size, MIN_ALIGN);
        if new_top > self.limit.get() {
            return false;
        }
        if new_top < top {
            self.note_peak();
        }
        self.top.set(new_top);
        // SAFETY: as above; the block is ours and live.
        unsafe { *(hdr as *mut usize) = header_word(new_size, TAG_LIVE) };
        self.debug_check();
        true
    }

    /// Counts the uncounted range (see `uncounted`). Every owner operation but the fast paths
    /// calls it before it looks at or changes the counts or the run.
    #[inline(always)]
    fn flush_uncounted(&self) {
        if self.uncounted.get() != self.top.get() {
            self.flush_range();
        }
    }

    /// [`Arena::flush_uncounted`] of a range that is not empty: out of line, so that callers
    /// whose range is usually empty (region begins and ends) need no stack frame for it.
    #[inline(never)]
    fn flush_range(&self) {
        let (unc, top) = (self.uncounted.get(), self.top.get());
        // Closed first: what the walk may trigger (a look at the bound) flushes again.
        self.uncounted.set(top);
        let freed = self.uncounted_freed.get() + self.count_range(unc, top);
        if freed >= GRANULE {
            // The owner's frees in the range never touched the counts: they empty granules
            // now, as counted frees would have (see `granules_emptied`), a granule's worth at a
            // time (ranges are often shorter than a granule).
            self.uncounted_freed.set(freed % GRANULE);
            self.granules_emptied(freed / GRANULE, unc);
        } else {
            self.uncounted_freed.set(freed);
        }
    }

    /// True when `addr` lies in the uncounted range `[uncounted, top)` (one compare: an address
    /// below `uncounted` wraps to a large offset).
    #[inline(always)]
    fn in_uncounted(&self, addr: usize) -> bool {
        let unc = self.uncounted.get();
        addr.wrapping_sub(unc) < self.top.get() - unc
    }

    /// Walks `[from, to)`, a part of the uncounted range starting at a header (or `to`), header
    /// to header, stepping over gap headers: calls `f(header, end, tag)` for every block, `end`
    /// being the end of its bytes. Returns where the walk stopped: `to`, unless a gap header
    /// reads as empty (a range that is not well formed; the checks report it).
    #[inline(always)]
    fn walk_uncounted(
        &self,
        from: usize,
        to: usize,
        mut f: impl FnMut(usize, usize, usize),
    ) -> usize {
        let mut a = from;
        while a < to {
            // SAFETY: a header in the uncounted range, in committed memory. Atomic: another
            // thread may be freeing that block (it writes the tag atomically, with Release).
            let word = unsafe { (*(a as *const AtomicUsize)).load(Ordering::Acquire) };
            if word_tag(word) == TAG_GAP {
                if word_size(word) == 0 {
                    break;
                }
                a += word_size(word);
                continue;
            }
            let end = a + HEADER + word_size(word);
            f(a, end, word_tag(word));
            a = align_up(end, MIN_ALIGN);
        }
        a
    }

    /// Walks `[from, to)`, the uncounted range, and puts the units of every block in it on the
    /// granules, but those of blocks their owner freed (which were never counted). Returns the
    /// bytes of those.
    #[cold]
    #[inline(never)]
    fn count_range(&self, from: usize, to: usize) -> usize {
        let mut freed = 0;
        let stop = self.walk_uncounted(from, to, |hdr, end, tag| {
            let bytes = align_up(end, MIN_ALIGN) - hdr;
            if tag != TAG_FREED {
                // Live, sampled, or freed by another thread (whose units and bytes cancel these).
                // SAFETY: the block's units were never put on its granules.
                unsafe { self.count_units(hdr, end) };
                self.live_local_bytes.add(bytes as u64);
            } else {
                freed += bytes;
            }
        });
        debug_assert_eq!(stop, to, "the uncounted range does not end at top");
        freed
    }

    /// Calls `f(header, end, live)` for every block of the uncounted range, without counting
    /// anything (tests and invariant checks, which must not change the arena); `live` is false
    /// for blocks freed since by another thread; blocks their owner freed are left out. None
    /// when the range is not well formed.
    fn for_each_uncounted(&self, mut f: impl FnMut(usize, usize, bool)) -> Option<()> {
        let mut well_formed = true;
        let top = self.top.get();
        let stop = self.walk_uncounted(self.uncounted.get(), top, |hdr, end, tag| match tag {
            TAG_LIVE | TAG_SAMPLED => f(hdr, end, true),
            TAG_FREED_REMOTE => f(hdr, end, false),
            TAG_FREED => {}
            _ => well_formed = false,
        });
        (well_formed && stop == top).then_some(())
    }

    /// Writes the header of the block `[hdr + HEADER, end)` and counts it: a unit on its first
    /// and on its last granule, its header in its first granule's crossing entry. The same
    /// stores whatever the block's size.
    ///
    /// # Safety
    /// `[hdr, end)` is committed, unused memory of this arena's current run, `top` is past it,
    /// and the uncounted range was flushed (the slow path's block is counted at once).
    #[inline(always)]
    unsafe fn count_block(&self, hdr: usize, end: usize) {
        // SAFETY: caller's obligation (the header is 16 bytes: its word and the link).
        unsafe {
            (hdr as *mut usize).write(header_word(end - hdr - HEADER, TAG_LIVE));
            (hdr as *mut usize).add(1).write(self.below_top.get());
        }
        self.below_top.set(hdr);
        // SAFETY: caller's obligation.
        unsafe { self.count_units(hdr, end) };
        // The caller flushed the uncounted range before: this block is counted, so it is not in
        // it (nor is any padding before it).
        self.uncounted.set(self.top.get());
        self.region_allocs.add(1);
        self.live_local_bytes
            .add((align_up(end, MIN_ALIGN) - hdr) as u64);
        self.debug_check();
    }

    /// Puts the units of the block `[hdr + HEADER, end)` on its first and last granule and its
    /// header in its first granule's crossing entry.
    ///
    /// # Safety
    /// The block lies in this arena's slot and its units are not on the granules yet.
    #[inline(always)]
    unsafe fn count_units(&self, hdr: usize, end: usize) {
        // SAFETY: `addr >> GRANULE_SHIFT` is the absolute granule number of an address in this
        // slot, which `local_by_addr` and `cross_by_addr` map onto the slot's tables; owner
        // thread only.
        unsafe {
            let (local, cross) = (self.local_by_addr, self.cross_by_addr);
            *local.add(hdr >> GRANULE_SHIFT) += 1;
            *local.add((end - 1) >> GRANULE_SHIFT) += 1;
            *cross.add(hdr >> GRANULE_SHIFT) = cross_entry(hdr);
        }
    }

    /// The last granule of the live block that starts in granule `g` and ends past it, if
    /// there is one. Call only when `live(g) != 0` (so the granule is committed and the entry's
    /// header readable). An entry whose block was freed reads as none: the header's tag says
    /// freed. (A stale entry over memory reused since could only make a granule look covered
    /// when it is not: that keeps it from reuse a while, never hands out live memory.)
    fn crossing_last(&self, g: usize) -> Option<usize> {
        // SAFETY: granule of this slot; owner thread only.
        let entry = unsafe { *self.cross.add(g) } as usize;
        if entry == 0 {
            return None;
        }
        let hdr = (self.slot_base & !CROSS_SPAN_MASK) | entry << 4;
        // SAFETY: the header lies in granule `g`, which holds a live block, so it is committed.
        // Atomic: another thread may be freeing that block (it writes the tag atomically).
        let word = unsafe { (*(hdr as *const AtomicUsize)).load(Ordering::Acquire) };
        if word_tag(word) | 1 != TAG_SAMPLED {
            return None;
        }
        let end = (hdr + HEADER).saturating_add(word_size(word));
        let last = self.granule(end.min(self.committed_end.get()) - 1);
        (last > g).then_some(last)
    }

    /// Where a run may start past the pinned granule at `at`: the next granule, or, when a block
    /// crosses out of it, past that block's last granule, which may itself be the first granule
    /// of another crossing block (one step per block, not per granule).
    /// The first granule at or past `past_pin(at)` that no live block uses (or the end of
    /// committed memory): a lap over a row of pinned granules skips them in one tight loop,
    /// instead of starting and abandoning a run at each one.
    fn past_pins(&self, at: usize) -> usize {
        let end = self.committed_end.get();
        let mut at = self.past_pin(at);
        while at < end && self.live(self.granule(at)) != 0 {
            at = self.past_pin(at);
        }
        at.min(end)
    }

    fn past_pin(&self, at: usize) -> usize {
        let mut g = self.granule(at);
        while let Some(last) = self.crossing_last(g) {
            g = last; // counted, so `crossing_last` may look at it
        }
        self.slot_base + ((g + 1) << GRANULE_SHIFT)
    }

    /// Everything the fast path does not do: blocks that span granules, extending or starting
    /// runs, overflow, spills, and the size bounds. `align` is at least `MIN_ALIGN`.
    #[cold]
    #[inline(never)]
    pub fn alloc_slow(&self, size: usize, align: usize) -> *mut u8 {
        self.flush_uncounted();
        if !align.is_power_of_two() {
            return ptr::null_mut();
        }
        let align = block_align(size, align.max(MIN_ALIGN));
        if size < self.user_min_alloc || size > self.user_max_alloc || size == 0 {
            return ptr::null_mut(); // the user's size bounds send it elsewhere: not an overflow
        }
        if align > self.slot_end - self.data_start || size > self.slot_end - self.data_start {
            // No slot can ever hold it: the next allocator's job, and not a size to plan for.
            self.overflow_allocs.add(1);
            self.spilled_allocs.add(1);
            return ptr::null_mut();
        }
        self.pending_bytes.set(size + HEADER);
        self.look_at_remote_frees();
        let mut wrapped = false;
        let mut purged = false;
        loop {
            let p = align_up(self.top.get() + HEADER, align);
            let end = p + size;
            let new_top = align_up(end, MIN_ALIGN);
            if new_top > self.slot_end {
                // Not even the rest of the slot can take it.
                if self.recycle && !wrapped && self.run_start.get() != self.data_start {
                    self.wrap();
                    wrapped = true;
                    continue;
                }
                return self.spill(size);
            }
            if end > self.cap_end.get()
                && !self.recycle
                && !self.overflowing.load(Ordering::Relaxed)
                && self.lap_once(&mut wrapped)
            {
                // A region about to outgrow its capacity laps first: what its dead temporaries
                // left may hold the block, and then the work fits the capacity it planned.
                continue;
            }
            if new_top <= self.run_end.get() {
                if end > self.cap_end.get() {
                    self.outgrow_capacity();
                }
                self.top.set(new_top);
                self.update_limit();
                // SAFETY: `[p - HEADER, end)` lies in the checked run `[top, run_end)`, and `top` is
                // past it; the uncounted range was flushed at the start.
                unsafe { self.count_block(p - HEADER, p + size) };
                return p as *mut u8;
            }
            if self.dry.get() && self.dry_remote.get() == self.remote_bytes() {
                // Nothing was freed since the last lap found no room: lapping again would
                // only walk the same pinned granules.
                return self.turn_away(size);
            }
            match self.extend_run(new_top) {
                Ok(()) => {}
                Err(Stop::Pinned(at)) => {
                    let next = self.past_pins(at);
                    if at == self.run_start.get() && at == self.lap_start() {
                        // A lap found nothing free from its start to `next`.
                        self.lap_hint.set(next);
                        self.remote_at_hint.set(self.remote_bytes());
                    }
                    self.start_run(next);
                }
                Err(Stop::Uncommitted) => {
                    // Before committing more, a lap looks for free memory behind the bump
                    // pointer, in a region too (which is then past its planned capacity): a
                    // region whose temporaries die out of order reuses their granules instead
                    // of faulting in its whole volume.
                    if !self.lap_once(&mut wrapped) && !self.grow_commit(new_top) {
                        return self.spill(size);
                    }
                }
                Err(Stop::Bound) => {
                    // Growing is not allowed. The arena first looks for free resident memory
                    // with a lap (in a region too: granule counts keep live blocks safe, and
                    // temporaries freed out of order are then reused instead of new memory being
                    // faulted in); then it gives back what is free and tries once more; if that
                    // is not enough it is closed. The lap is taken even when the last one found
                    // little, if the arena holds free memory enough for the request: the purge
                    // would walk every granule too, and then fault that memory in again (a 200
                    // MiB buffer freed below a live block and allocated again did).
                    let room = self.resident() * GRANULE >= self.live_bytes() as usize + size;
                    if !self.lap_once_if(&mut wrapped, room) {
                        if purged || !self.make_room() {
                            return self.turn_away(size);
                        }
                        purged = true;
                    }
                }
            }
        }
    }

    /// Grows the current run granule by granule up to `need_end`, as long as each granule is
    /// committed and free.
    fn extend_run(&self, need_end: usize) -> Result<(), Stop> {
        let mut run_end = self.run_end.get();
        let mut dirty_end = 0;
        if run_end >= self.used_end.get() && need_end > run_end + GRANULE {
            // A large block at the frontier: its granules were never used, so they are entered
            // at once instead of one by one (which read and wrote three tables per granule: 512
            // MiB touched 170 pages of them).
            let fresh_end = align_up(need_end, GRANULE).min(self.committed_end.get());
            if let Some(already_resident_end) = self.enter_fresh(run_end, fresh_end) {
                dirty_end = already_resident_end;
                run_end = fresh_end;
            }
        }
        let result = loop {
            if run_end >= need_end {
                break Ok(());
            }
            if run_end >= self.committed_end.get() {
                break Err(Stop::Uncommitted);
            }
            let g = self.granule(run_end);
            if self.live(g) != 0 {
                break Err(Stop::Pinned(run_end));
            }
            // No live block starts here, so no crossing one: forget a stale entry before the
            // memory under it is reused. (A run never reaches a granule strictly inside a live
            // block: it starts past such blocks, see `past_pin` and `resume_point`.)
            // SAFETY: granule of this slot; owner thread only.
            unsafe { *self.cross.add(g) = 0 };
            match self.enter_granule(g) {
                None => break Err(Stop::Bound),
                Some(true) => dirty_end = run_end + GRANULE,
                Some(false) => {}
            }
            run_end += GRANULE;
        };
        if result.is_ok() {
            (run_end, dirty_end) = self.extend_ahead(run_end, dirty_end);
        }
        if dirty_end > self.zero_from.get() {
            // Resident memory may hold old contents: not known to be zero.
            self.zero_from.set(dirty_end);
        }
        self.run_end.set(run_end);
        if run_end > self.used_end.get() {
            self.used_end.set(run_end);
        }
        self.update_limit();
        result
    }

    /// A run that reached what it needs goes on over up to [`RUN_AHEAD`] more granules that
    /// are resident and free, within the capacity: the slow path then runs once per few
    /// granules instead of once per granule, and its walk of the uncounted range finds more of
    /// the blocks freed already (a tag flip each, never counted). Resident granules cost the
    /// bound nothing; one that is pinned, not resident or past the capacity ends it. Returns
    /// the new run end and dirty end.
    #[inline]
    fn extend_ahead(&self, mut run_end: usize, mut dirty_end: usize) -> (usize, usize) {
        let ahead_end = (run_end + RUN_AHEAD * GRANULE)
            .min(self.cap_end.get() & !(GRANULE - 1))
            .min(self.committed_end.get());
        while run_end < ahead_end {
            let g = self.granule(run_end);
            // SAFETY: granule of this slot (below `committed_end`); owner thread only.
            if unsafe { *self.touched.add(g) } == 0 || self.live(g) != 0 {
                break;
            }
            // As in `extend_run`: no live block starts here, so no crossing one.
            // SAFETY: granule of this slot; owner thread only.
            unsafe { *self.cross.add(g) = 0 };
            run_end += GRANULE;
            dirty_end = run_end;
        }
        (run_end, dirty_end)
    }

    /// Abandons the current run and starts an empty one at `at` (granule aligned).
    fn start_run(&self, at: usize) {
        self.note_peak();
        self.forget_hint_above(at);
        // Only a jump past the highest top of the region is skipped memory: below it lies what
        // the region covered already (a lap going round its own live blocks), which its peak
        // counts once and must not discount.
        self.skipped
            .set(self.skipped.get() + at.saturating_sub(self.peak_top.get()));
        self.lap_progress
            .set(self.lap_progress.get() + (self.run_end.get() - self.run_start.get()));
        self.run_id.set(self.run_id.get() + 1);
        self.run_start.set(at);
        self.run_end.set(at);
        self.top.set(at);
        self.below_top.set(self.no_link());
        self.uncounted.set(at);
        self.zero_from.set(at);
        self.update_limit();
    }

    /// A run starts at `at`: a lap hint above it no longer holds, as blocks of the new run may
    /// reach into or past the hint's granule (a lap starting there would start inside them).
    #[inline]
    fn forget_hint_above(&self, at: usize) {
        if at < self.lap_hint.get() {
            self.lap_hint.set(0);
        }
    }

    /// Process mode: go back to the start of the arena and reuse freed granules.
    fn wrap(&self) {
        let at = self.lap_start();
        self.start_run(at);
        self.origin.set(at);
        self.peak_top.set(at);
        self.lap_progress.set(0);
    }

    /// Starts a lap: a new run where free memory may be found behind the bump pointer. In
    /// process mode the arena wraps; in a region the run moves, and the region keeps its
    /// origin and peak (the checkpoints of nested regions see a new run and stop vouching).
    fn lap(&self) {
        if self.recycle {
            self.wrap();
        } else {
            self.start_run(self.lap_start());
            self.lap_progress.set(0);
        }
    }

    /// [`Arena::lap`] once per slow path (`wrapped` says whether it lapped already), when a lap
    /// is worth it. True when it lapped.
    fn lap_once(&self, wrapped: &mut bool) -> bool {
        self.lap_once_if(wrapped, false)
    }

    /// [`Arena::lap_once`], also when a lap is not worth it but `anyway`.
    fn lap_once_if(&self, wrapped: &mut bool, anyway: bool) -> bool {
        if *wrapped || !(anyway || self.lap_is_worth_it()) {
            return false;
        }
        self.lap();
        *wrapped = true;
        true
    }

    /// Where a lap starts: `data_start`, or the lap hint while it holds.
    fn lap_start(&self) -> usize {
        let hint = self.lap_hint.get();
        if hint > self.data_start
            && hint < self.committed_end.get()
            && self.remote_at_hint.get() == self.remote_bytes()
        {
            hint
        } else {
            self.data_start
        }
    }

    /// Process mode: a lap pays off when the last one found a useful share of free memory;
    /// otherwise growing is cheaper than scanning a full arena for crumbs.
    fn lap_is_worth_it(&self) -> bool {
        let committed = self.committed_end.get() - self.data_start;
        let span = committed.min(self.resident() * GRANULE);
        self.lap_progress.get() + (self.run_end.get() - self.run_start.get()) >= span / 4
    }

    /// Commits memory so that at least `need_end` is accessible. Returns false when the slot is
    /// exhausted or the kernel refuses.
    fn grow_commit(&self, need_end: usize) -> bool {
        let committed_end = self.committed_end.get();
        if need_end <= committed_end {
            return true;
        }
        if need_end > self.slot_end {
            return false;
        }
        let committed = committed_end - self.data_start;
        // Process mode grows geometrically (half of what is committed, 64 KiB..64 MiB) so laps
        // stay rare. Region mode commits what the overflow needs plus at most 1/16 (fewer
        // mprotect calls in a first region full of small blocks) and resizes at the end.
        let step = if self.recycle {
            (committed / 2).clamp(GRANULE * 4, 64 << 20)
        } else {
            (committed / 16).clamp(GRANULE, 1 << 20)
        };
        let want = align_up(need_end.max(committed_end + step), GRANULE).min(self.slot_end);
        let exact = align_up(need_end, GRANULE);
        for target in [want, exact] {
            // SAFETY: `[committed_end, target)` is granule aligned and inside our slot.
            if unsafe { os::commit(committed_end, target - committed_end) } {
                self.set_committed_end(target);
                return true;
            }
        }
        false
    }

    /// Records that `size` bytes had to be served by the next allocator.
    #[cold]
    fn spill(&self, size: usize) -> *mut u8 {
        self.overflow_allocs.add(1);
        self.spilled_allocs.add(1);
        self.spill_bytes.set(
            self.spill_bytes
                .get()
                .saturating_add(size.saturating_add(HEADER)),
        );
        ptr::null_mut()
    }

    /// The link, and `below_top`, that names no block: the address of `limit`. Read as a
    /// header, its low byte is never `TAG_FREED`'s (`limit`'s value is a multiple of 16), and
    /// it lies below every run (the arena sits at the slot's start), so the walks down the
    /// links stop at it with the tests they make anyway (`release_top` needs no null test),
    /// and it is in the cache line the fast paths use.
    #[inline(always)]
    fn no_link(&self) -> usize {
        &self.limit as *const Cell<usize> as usize
    }

    #[inline(always)]
    fn note_peak(&self) {
        if self.top.get() > self.peak_top.get() {
            self.peak_top.set(self.top.get());
        }
    }

    /// Bytes this outermost region has needed so far, spills not included.
    fn peak_bytes(&self) -> usize {
        self.note_peak();
        self.peak_top.get().saturating_sub(self.origin.get())
    }

    /// The fast path serves `[top, limit)`: the checked run up to the capacity, or nothing when
    /// the user set size bounds.
    #[inline]
    fn update_limit(&self) {
        self.limit.set(self.fast_limit());
    }

    /// What `limit` must be: the run up to the capacity (or the whole run while the region
    /// overflows), or 0 when the user set size bounds.
    fn fast_limit(&self) -> usize {
        if self.bounded {
            0
        } else if self.overflowing.load(Ordering::Relaxed) {
            self.run_end.get()
        } else {
            self.run_end.get().min(self.cap_end.get())
        }
    }

    /// Allocations of this region since it first outgrew its capacity (any thread).
    fn overflow_in_region(&self) -> u64 {
        if self.overflowing.load(Ordering::Relaxed) {
            self.region_allocs
                .get()
                .saturating_sub(self.overflow_base.get())
        } else {
            0
        }
    }

    /// The region ends: its overflow allocations join the count, and the fast path stops at
    /// the capacity again.
    fn settle_overflow(&self) {
        if self.overflowing.load(Ordering::Relaxed) {
            self.overflow_allocs.add(self.overflow_in_region());
            self.overflowing.store(false, Ordering::Relaxed);
            self.update_limit();
        }
    }

    fn set_capacity_end(&self, cap_end: usize) {
        if cap_end != self.cap_end.get() {
            self.resizes.add(1);
        }
        self.cap_end.set(cap_end);
        self.capacity_bytes.set((cap_end - self.data_start) as u64);
        self.update_limit();
    }

    // ---------------------------------------------------------------- free and realloc

    /// Reads and validates the header word of `p`, aborting like glibc on a double or invalid
    /// free. Returns the header's address and the block's size.
    ///
    /// # Safety
    /// `p` lies in committed memory of this arena's slot at least `HEADER` bytes past `data_start`.
    #[inline(always)]
    unsafe fn header_of(&self, p: usize) -> (*mut usize, usize) {
        let hdr = (p - HEADER) as *mut usize;
        // SAFETY: caller's obligation: the header bytes are committed memory of our slot.
        let word = unsafe { *hdr };
        // TAG_LIVE and TAG_SAMPLED differ in the low bit only.
        if word_tag(word) | 1 != TAG_SAMPLED {
            bad_free(word_tag(word) | 1 == TAG_FREED_REMOTE);
        }
        (hdr, word_size(word))
    }

    /// The sample word of a live block whose header `hdr` was validated, if it is sampled.
    ///
    /// # Safety
    /// `hdr` is the validated header of a live block of this arena.
    unsafe fn sample_of(hdr: *mut usize) -> Option<SampleWord> {
        // SAFETY: caller's obligation; the second header word is part of the block's header.
        unsafe { (word_tag(*hdr) == TAG_SAMPLED).then(|| SampleWord(*hdr.add(1) as u64)) }
    }

    /// Checks that `p` can be a block of this arena before its header is read: 16-byte aligned
    /// and inside committed data, in one compare (a misaligned offset rotates into the high
    /// bits). A live block is always committed (shrinking never decommits a granule with a live
    /// count), so this rejects wild pointers instead of faulting on them.
    #[inline(always)]
    fn plausible(&self, p: usize) -> bool {
        let offset = p.wrapping_sub(self.data_start + HEADER);
        offset.rotate_right(MIN_ALIGN.trailing_zeros())
            < self.plausible_slots.load(Ordering::Relaxed)
    }

    /// Keeps `committed_end`, the `committed_bytes` figure and `plausible_slots` in step.
    fn set_committed_end(&self, end: usize) {
        self.committed_end.set(end);
        let bytes = end - self.data_start;
        self.committed_bytes.set(bytes as u64);
        self.plausible_slots.store(
            bytes.saturating_sub(HEADER) >> MIN_ALIGN.trailing_zeros(),
            Ordering::Relaxed,
        );
    }

    /// Usable size of the live block `p`.
    ///
    /// # Safety
    /// `p` was returned by `alloc` of this arena and not freed.
    pub unsafe fn usable_size(&self, p: *mut u8) -> usize {
        // SAFETY: caller's obligation.
        let (_, size) = unsafe { self.header_of(p as usize) };
        align_up(size, MIN_ALIGN)
    }

    /// Frees a block on the owner thread.
    ///
    /// # Safety
    /// Called by the owner thread; `p` was returned by this arena's `alloc` (a double free is
    /// detected and aborts).
    #[inline(always)]
    pub unsafe fn free_local(&self, p: *mut u8) {
        // SAFETY: forwarded obligations.
        if !unsafe { self.try_free_local_fast(p) } {
            // SAFETY: forwarded obligations.
            unsafe { self.free_local_slow(p) };
        }
    }

    /// The fast path alone: frees a valid, unsampled block and returns true; returns false,
    /// having changed nothing, for anything else, except that a second free of the last block
    /// after another thread freed it aborts (see `POISON_LINK`). Calls nothing but the rare
    /// bound check. `free`'s assembly entry point (x86-64 Linux) makes the LIFO branch itself,
    /// for a block whose link does not say "freed" ([`asm_layout`]), and calls
    /// [`Arena::try_free_local_other`] for other blocks.
    ///
    /// # Safety
    /// Called by the owner thread. `p` is null, a live block of this arena, or any address at
    /// or above 4 KiB that this arena does not own.
    #[inline(always)]
    pub unsafe fn try_free_local_fast(&self, p: *mut u8) -> bool {
        let p = p as usize;
        let hdr = p.wrapping_sub(HEADER);
        // The LIFO case first: the block right below the bump pointer, not counted yet.
        if self.is_last_uncounted(hdr) {
            // SAFETY: tested just now.
            unsafe { self.free_last_uncounted(p as *mut u8) };
            return true;
        }
        // SAFETY: forwarded obligations.
        unsafe { self.try_free_local_other(p as *mut u8) }
    }

    /// The LIFO free: `p`'s block is the run's last, not counted yet
    /// ([`Arena::is_last_uncounted`] of its header). Its tag says freed, the peak is noted, and
    /// the bump pointer goes back to it and on down over the blocks below that their owner freed
    /// already. Public for `free`'s assembly entry point, which makes the test itself and does
    /// this itself too unless the link says "freed" ([`asm_layout`]).
    ///
    /// # Safety
    /// Owner thread; `is_last_uncounted(p - HEADER)` holds.
    #[inline(always)]
    pub unsafe fn free_last_uncounted(&self, p: *mut u8) {
        let hdr = p as usize - HEADER;
        debug_assert!(self.is_last_uncounted(hdr));
        // SAFETY: `below_top` names a block header of our run (its invariant); marks it freed
        // for double-free detection. (Had another thread freed it, `release_top` finds its
        // poisoned link and aborts.)
        unsafe { *(hdr as *mut u16) = TAG_FREED as u16 };
        self.note_peak();
        // SAFETY: a block of the current run with only padding up to `top`, freed by its owner
        // just now, and `uncounted <= hdr` (the caller's obligation).
        unsafe { self.release_top(hdr) };
        self.debug_check();
    }

    /// [`Arena::try_free_local_fast`] after its LIFO test: the paths for a block that is not
    /// the last uncounted one (for that one too they are right, only longer). Public for
    /// `free`'s assembly entry point, which makes the LIFO test itself ([`asm_layout`]).
    ///
    /// # Safety
    /// As [`Arena::try_free_local_fast`].
    #[inline(always)]
    pub unsafe fn try_free_local_other(&self, p: *mut u8) -> bool {
        let p = p as usize;
        let hdr = p.wrapping_sub(HEADER);
        // Not the last block, or counted: the paths below tell (and find sampled blocks and
        // blocks freed already by their tags).
        if self.in_uncounted(hdr) {
            // A block handed out since the counts were last looked at: it was never counted, so
            // freeing it is a tag flip, and the last one goes back to the bump pointer.
            // SAFETY: `hdr` lies in the uncounted range of our committed run: a block's header.
            let word = unsafe { *(hdr as *const usize) };
            if word_tag(word) != TAG_LIVE {
                return false; // sampled, or a double free: the slow path tells
            }
            // SAFETY: a live, uncounted block of ours.
            unsafe { self.free_uncounted(hdr, p + word_size(word)) };
            return true;
        }
        if !self.plausible(p) {
            return false;
        }
        // SAFETY: `p` is in our committed data (plausible), so its header is readable.
        let word = unsafe { *(hdr as *const usize) };
        let size = word_size(word);
        if word_tag(word) != TAG_LIVE {
            return false;
        }
        // SAFETY: a validated live header; marks it freed for double-free detection (the tag is
        // the header word's low 16 bits, little endian).
        unsafe { *(hdr as *mut u16) = TAG_FREED as u16 };
        // SAFETY: a live block of this arena, on the owner thread.
        let emptied = unsafe { self.uncount_block(hdr, p + size) };
        if !self.lifo_release(hdr, p + size, emptied) && emptied != 0 {
            self.granules_emptied(emptied, hdr);
        }
        self.debug_check();
        true
    }

    /// Frees the live block `[hdr + HEADER, end)` of the uncounted range: it was never counted,
    /// so this is a tag flip, and the last block also goes back to the bump pointer.
    ///
    /// # Safety
    /// Owner thread; `hdr` is the header of a live block in the uncounted range.
    #[inline(always)]
    unsafe fn free_uncounted(&self, hdr: usize, end: usize) {
        // SAFETY: caller's obligation; marks it freed for double-free detection (and so that
        // the walk does not count it): the tag is the header word's low 16 bits (little endian).
        unsafe { *(hdr as *mut u16) = TAG_FREED as u16 };
        let top = self.top.get();
        if align_up(end, MIN_ALIGN) == top {
            if top > self.peak_top.get() {
                self.peak_top.set(top);
            }
            // SAFETY: the caller's block, freed by its owner, ends at the bump pointer and lies
            // in the uncounted range, so in the current run.
            unsafe { self.release_top(hdr) };
        }
        self.debug_check();
    }

    /// The block at `hdr`, just freed by its owner, ended at the bump pointer (or only padding
    /// lay between them): the bump pointer goes back to it, and on down over the blocks right
    /// below it that their owner freed already (their links say which: see `below_top`).
    /// Temporaries freed in the order they were made (FIFO) then leave the bump pointer where
    /// the first one began, as a LIFO loop does, so the next ones reuse memory still in the
    /// cache instead of walking on through the arena until a lap comes round. `free`'s assembly
    /// entry point does what this does when the link's word does not say "freed" ([`asm_layout`]).
    ///
    /// # Safety
    /// Owner thread; `hdr` is the header of a block of the current run (`hdr >= run_start`)
    /// with nothing but alignment padding between its end and `top`, its tag already says
    /// freed, and its second header word is its link (a plain block's, or `no_link`), or
    /// `POISON_LINK` when another thread freed it before (a double free: this aborts);
    /// `uncounted <= hdr`.
    #[inline(always)]
    unsafe fn release_top(&self, hdr: usize) {
        // SAFETY: caller's obligation: the block's header is ours to read. Atomic: had another
        // thread freed the block (a double free now), it wrote `POISON_LINK` there.
        let link = unsafe { (*((hdr + 8) as *const AtomicUsize)).load(Ordering::Relaxed) };
        self.top.set(hdr);
        self.below_top.set(link);
        // SAFETY: `link` is `no_link` (`limit`, whose low byte says no block is freed), a
        // header of the run below `hdr` (`below_top`'s invariant), or `POISON_LINK` (whose word
        // says freed, so that `release_freed_below` aborts): memory we may read. The callers
        // keep `uncounted <= hdr`.
        if unsafe { Self::owner_freed(link) } {
            // SAFETY: as above.
            unsafe { self.release_freed_below(link) };
        }
    }

    /// Whether the header at `hdr` says its owner freed the block (false for `no_link`). Atomic:
    /// another thread may be freeing that block (it writes the tag with Release).
    ///
    /// # Safety
    /// `hdr` is a block header in committed memory of this arena, its `no_link`, or
    /// `POISON_LINK`.
    #[inline(always)]
    unsafe fn owner_freed(hdr: usize) -> bool {
        // SAFETY: caller's obligation.
        let word = unsafe { (*(hdr as *const AtomicUsize)).load(Ordering::Relaxed) };
        // By the low byte, which is `TAG_FREED`'s alone (asserted where the tags are): a byte
        // compare needs no widening, where the 16-bit tag took a `movzx` first.
        word as u8 == TAG_FREED as u8
    }

    /// [`Arena::release_top`] went back to a block whose tag says its owner freed it already:
    /// goes on down the links while that holds.
    ///
    /// # Safety
    /// Owner thread; `link` is `below_top`: the header of a block of the current run its owner
    /// freed, or `POISON_LINK` (a double free: this aborts).
    #[cold]
    #[inline(never)]
    unsafe fn release_freed_below(&self, link: usize) {
        if link == poison_link() {
            // The block just freed by its owner was freed by another thread before.
            bad_free(true);
        }
        let run_start = self.run_start.get();
        let mut hdr = link;
        let below = loop {
            // SAFETY: `hdr` is a header of the current run whose owner freed it (checked by the
            // caller or below): its link is a plain block's (owner frees of sampled blocks reset
            // theirs). Another thread writes it only when it frees the block too (a double free,
            // which aborts below or in that thread): atomic for that.
            let below = unsafe { (*((hdr + 8) as *const AtomicUsize)).load(Ordering::Relaxed) };
            if below == poison_link() {
                // Freed by its owner and by another thread (whichever came second aborts on the
                // tag it finds; kept here in case that one raced past it).
                bad_free(true);
            }
            // SAFETY: `below` is a header of the run below `hdr` (the links' invariant), so
            // committed memory, or `no_link`, which lies below `run_start`.
            if below < run_start || !unsafe { Self::owner_freed(below) } {
                break below;
            }
            hdr = below;
        };
        self.top.set(hdr);
        self.below_top.set(below);
        if self.uncounted.get() > hdr {
            self.uncounted.set(hdr);
        }
    }

    /// Takes the units of the block `[hdr + HEADER, end)` off its first and last granule.
    /// Returns about how many granules it leaves empty: its inner ones and its last one if that
    /// is empty now (exact for a block within one granule; this feeds a trigger, and remote
    /// frees are not looked at). Its crossing entry stays: its header now says freed.
    ///
    /// # Safety
    /// The block is live, counted, and this is the owner thread.
    #[inline(always)]
    unsafe fn uncount_block(&self, hdr: usize, end: usize) -> usize {
        let (first, last) = (hdr >> GRANULE_SHIFT, (end - 1) >> GRANULE_SHIFT);
        // SAFETY: absolute granule numbers of addresses in this slot; owner thread only.
        let left = unsafe {
            let local = self.local_by_addr;
            *local.add(first) -= 1;
            let count = &mut *local.add(last);
            *count -= 1;
            *count
        };
        self.live_local_bytes
            .sub((align_up(end, MIN_ALIGN) - hdr) as u64);
        // A granule that reaches into the uncounted range may hold blocks not counted yet: it
        // is not empty for this purpose (its emptiness is reported when the range is walked).
        let last_empty = left == 0 && (last + 1) << GRANULE_SHIFT <= self.uncounted.get();
        (last - first) + last_empty as usize
    }

    /// LIFO: when the counted block `[hdr, end)`, just freed by its owner, is the most recent
    /// one of the current run (it ends at `top`, or it is `below_top`, with only padding up to
    /// `top`), its memory goes back to the bump pointer at once (returns true). The caller
    /// reports the `emptied` granules of a block that does not (see `granules_emptied`); of one
    /// that does, markers mode leaves them out (its region end resizes), process mode reports
    /// them here (it has no region end, and a 200 MiB block freed at the top of the run stayed
    /// resident; glibc unmaps it).
    #[inline(always)]
    fn lifo_release(&self, hdr: usize, end: usize, emptied: usize) -> bool {
        if hdr == self.below_top.get()
            || (align_up(end, MIN_ALIGN) == self.top.get() && hdr >= self.run_start.get())
        {
            if emptied != 0 && self.recycle {
                self.lifo_release_emptying(hdr, emptied);
                return true;
            }
            self.note_peak();
            // A counted block with only padding up to `top`: the uncounted range held no block.
            self.uncounted.set(hdr);
            // SAFETY: a block of the current run (`below_top`'s invariant, or `hdr >= run_start`)
            // with only padding up to `top`, freed by its owner (the callers flipped its tag;
            // the slow path cleared a sampled one's link).
            unsafe { self.release_top(hdr) };
            return true;
        }
        false
    }

    /// [`Arena::lifo_release`] of a process-mode block that emptied `emptied` granules: back to
    /// the bump pointer, then the report. Out of line, so that the look at the bound the report
    /// may make is no call in the middle of `free` (which gave every `free` a stack frame).
    #[cold]
    #[inline(never)]
    fn lifo_release_emptying(&self, hdr: usize, emptied: usize) {
        self.note_peak();
        // As in `lifo_release`.
        self.uncounted.set(hdr);
        // SAFETY: as in `lifo_release`, whose checks the caller made.
        unsafe { self.release_top(hdr) };
        self.granules_emptied(emptied, hdr);
    }

    #[cold]
    #[inline(never)]
    unsafe fn free_local_slow(&self, p: *mut u8) {
        let p = p as usize;
        let hdr = p.wrapping_sub(HEADER);
        if self.in_uncounted(hdr) {
            // SAFETY: `hdr` lies in the uncounted range of our committed run: a block's header.
            let word = unsafe { *(hdr as *const usize) };
            if word_tag(word) == TAG_SAMPLED {
                // A sampled block not counted yet (the fast path took the plain ones): learn
                // from it, then free it without counting the range first.
                // SAFETY: the header of a live sampled block of ours.
                if let Some(w) = unsafe { Self::sample_of(hdr as *mut usize) } {
                    self.learn_from_free(p, w);
                }
                // SAFETY: a live, uncounted block of ours: its sample word is no link (see
                // `below_top`), so it reads as none from now on.
                unsafe {
                    (hdr as *mut usize).add(1).write(self.no_link());
                    self.free_uncounted(hdr, p + word_size(word));
                }
                return;
            }
            // Anything else in the uncounted range (a double free, a block another thread
            // freed) is told apart once the range is counted.
            self.flush_uncounted();
        }
        // A block below the uncounted range is counted already, and freeing it leaves the
        // range alone (a counted block that ends at `top` means the range is empty): no walk.
        // Sampled blocks (one in eight) once walked it here, and counted every younger block
        // that would otherwise have been freed by a tag flip.
        if !self.plausible(p) {
            bad_free(false);
        }
        // SAFETY: `p` is in our slot (plausible), so its header is readable.
        let (hdr, size) = unsafe { self.header_of(p) };
        // SAFETY: a validated header.
        if let Some(w) = unsafe { Self::sample_of(hdr) } {
            self.learn_from_free(p, w);
        }
        // SAFETY: as above; marks the block freed for double-free detection. A sampled block's
        // second word is its sample word, no link (see `below_top`): it reads as none now.
        unsafe {
            *hdr = header_word(size, TAG_FREED);
            *hdr.add(1) = self.no_link();
        }
        let hdr = hdr as usize;
        // SAFETY: a validated live block of this arena, on the owner thread.
        let emptied = unsafe { self.uncount_block(hdr, p + size) };
        if !self.lifo_release(hdr, p + size, emptied) && emptied > 0 {
            self.granules_emptied(emptied, hdr);
        }
        self.debug_check();
    }

    /// Frees a block from a thread that does not own the arena. Returns `true` when this free
    /// was the last one of an orphaned arena: the caller must then release the slot.
    ///
    /// # Safety
    /// `p` was returned by this arena's `alloc` and is freed exactly once.
    pub unsafe fn free_remote(&self, p: *mut u8) -> bool {
        let p = p as usize;
        if !self.plausible(p) {
            bad_free(false);
        }
        // SAFETY: `p` is in our slot, so its header is readable.
        let (hdr, size) = unsafe { self.header_of(p) };
        // SAFETY: a validated header.
        if let Some(w) = unsafe { Self::sample_of(hdr) } {
            self.learn_from_free(p, w);
        }
        if size >= REMOTE_DISCARD_FROM {
            // SAFETY: a live block of ours that this thread frees, before the counts say so.
            unsafe { discard_freed_block(p, size) };
        }
        // SAFETY: validated live header; only this thread frees this block. Atomic, because the
        // owner may read the tag of a crossing block at any time (`crossing_last`), and the link
        // when it frees the block again (a double free). The poisoned link is how the owner's
        // LIFO free, which reads no tag, finds that double free (see `POISON_LINK`). The owner
        // sees it when the program ordered its two frees (a join, a lock); a second free racing
        // with this one may go unseen, as it could when the owner tested the tag.
        unsafe {
            (*(hdr.add(1) as *const AtomicUsize)).store(poison_link(), Ordering::Relaxed);
            (*(hdr as *const AtomicUsize))
                .store(header_word(size, TAG_FREED_REMOTE), Ordering::Release)
        };
        let first = self.granule(p - HEADER);
        let last = self.granule(p + size - 1);
        // SAFETY: granules of this slot. Release publishes our last use of the block.
        unsafe {
            if first == last {
                (*self.remote.add(first)).fetch_add(2, Ordering::Release);
            } else {
                (*self.remote.add(first)).fetch_add(1, Ordering::Release);
                (*self.remote.add(last)).fetch_add(1, Ordering::Release);
            }
        }
        let bytes = (align_up(size, MIN_ALIGN) + HEADER) as u64;
        // Last access to the arena: after this add another thread may release the slot.
        let balance = self
            .remote_balance
            .fetch_add(bytes, Ordering::AcqRel)
            .wrapping_add(bytes);
        balance == ORPHANED
    }

    /// Grows the live block `p` to `new_size` without moving it, when it is the last block of the
    /// current run and the run has room. Returns `false` when the caller must move it.
    ///
    /// # Safety
    /// Called by the owner thread; `p` is a live block of this arena.
    pub unsafe fn try_resize_in_place(&self, p: *mut u8, new_size: usize) -> bool {
        self.flush_uncounted();
        let p = p as usize;
        // SAFETY: caller's obligation.
        let (hdr, old_size) = unsafe { self.header_of(p) };
        if new_size == 0
            || new_size < self.user_min_alloc
            || new_size > self.user_max_alloc.min(self.slot_end - self.data_start)
        {
            return false;
        }
        if new_size <= align_up(old_size, MIN_ALIGN) {
            let (new_last, old_last) = (
                self.granule(p + new_size - 1),
                self.granule(p + old_size - 1),
            );
            if new_last != old_last {
                // Shrinking off whole granules: they stop holding this block, so they can be
                // reused and given back; the last block also hands its tail to the bump pointer.
                let emptied = self.move_last_granule(old_last, new_last);
                self.granules_emptied(emptied, p);
            }
            if align_up(p + old_size, MIN_ALIGN) == self.top.get()
                && hdr as usize >= self.run_start.get()
            {
                self.note_peak();
                self.top.set(align_up(p + new_size, MIN_ALIGN));
                self.uncounted.set(self.top.get()); // flushed above: nothing is uncounted
            }
            self.live_local_bytes
                .add(align_up(new_size, MIN_ALIGN) as u64);
            self.live_local_bytes
                .sub(align_up(old_size, MIN_ALIGN) as u64);
            // SAFETY: validated header; the tag (plain or sampled) stays.
            unsafe { *hdr = header_word(new_size, word_tag(*hdr)) };
            self.debug_check();
            return true;
        }
        let is_last = align_up(p + old_size, MIN_ALIGN) == self.top.get()
            && hdr as usize >= self.run_start.get();
        let end = match p.checked_add(new_size) {
            Some(end) => end,
            None => return false,
        };
        let new_top = align_up(end, MIN_ALIGN);
        if !is_last || new_top > self.slot_end || !self.extend_for_growth(new_top) {
            return false;
        }
        let old_last = self.granule(p + old_size - 1);
        let new_last = self.granule(end - 1);
        if new_last > old_last {
            self.move_last_granule(old_last, new_last);
            // The block is the last one of the run, so the last one starting in its granule,
            // but the entry may name a later block that was freed since (LIFO): name this one.
            let hdr = hdr as usize;
            // SAFETY: granule of this slot; owner thread only.
            unsafe { *self.cross_by_addr.add(hdr >> GRANULE_SHIFT) = cross_entry(hdr) };
        }
        self.live_local_bytes
            .add((align_up(new_size, MIN_ALIGN) - align_up(old_size, MIN_ALIGN)) as u64);
        // SAFETY: validated header; the tag (plain or sampled) stays.
        unsafe { *hdr = header_word(new_size, word_tag(*hdr)) };
        self.top.set(new_top);
        self.uncounted.set(new_top); // flushed above: the grown block is counted
        self.debug_check();
        true
    }

    /// The last block of the run grows to `new_top`: extends the run over free granules (and
    /// commits memory) as an allocation would, so that a buffer grown step by step stays where
    /// it is instead of being copied into fresh memory at every step. False when the run cannot
    /// reach `new_top` (a pinned granule, the end of the slot, the memory bound).
    fn extend_for_growth(&self, new_top: usize) -> bool {
        if new_top > self.run_end.get() {
            self.pending_bytes.set(new_top - self.top.get());
            loop {
                match self.extend_run(new_top) {
                    Ok(()) => break,
                    Err(Stop::Uncommitted) if self.grow_commit(new_top) => {}
                    Err(_) => return false,
                }
            }
        }
        if new_top > self.cap_end.get() {
            self.outgrow_capacity();
        }
        true
    }

    /// The run is about to hand out memory past the capacity (an overflow).
    fn outgrow_capacity(&self) {
        if self.recycle {
            // Process mode has no region end to resize at: the capacity follows the committed
            // memory at once.
            self.overflow_allocs.add(1);
            self.set_capacity_end(self.committed_end.get());
        } else if !self.overflowing.load(Ordering::Relaxed) {
            // The region outgrew its capacity: the rest of it is served at full speed and
            // counted at its end (see `overflowing`).
            self.overflow_base.set(self.region_allocs.get());
            self.overflowing.store(true, Ordering::Relaxed);
            self.update_limit();
        }
    }

    /// A live block that ended in granule `old_last` now ends in `new_last`: moves its end unit
    /// (a block that grows also names itself in its crossing entry; one that shrinks keeps it:
    /// the entry is read with the header's new size). Returns how many granules it left empty (shrinking; remote frees are not looked
    /// at: this feeds a trigger).
    fn move_last_granule(&self, old_last: usize, new_last: usize) -> usize {
        // SAFETY: granules of this slot; owner thread only.
        unsafe {
            *self.local.add(old_last) -= 1;
            *self.local.add(new_last) += 1;
            if new_last < old_last {
                // Everything past the new end was this block's alone, but for the old end.
                (old_last - new_last - 1) + (*self.local.add(old_last) == 0) as usize
            } else {
                0
            }
        }
    }

    // ---------------------------------------------------------------- regions

    /// A nested region begins: remember where the bump pointer is, so that its end can give
    /// back what the nested region allocated and freed. The range is flushed, so until
    /// something looks at the counts again, everything the nested region allocates lies in the
    /// uncounted range from the checkpoint on. The bump pointer stays where it is: a region
    /// that keeps one small block packs it next to the last one (moving to the next granule,
    /// as an earlier version did, pinned a granule per region in process mode).
    ///
    /// A thread in process mode never calls this: the program's markers only nest there (see
    /// `region::region_begin`), the arena reusing freed memory by laps.
    #[inline]
    pub fn push_checkpoint(&self) {
        self.flush_uncounted();
        let depth = self.checkpoint_depth.get();
        self.checkpoint_depth.set(depth + 1);
        if depth < MAX_CHECKPOINTS {
            self.checkpoints[depth].set(Checkpoint {
                top: self.top.get(),
                run_id: self.run_id.get(),
            });
        }
        self.debug_check();
    }

    /// A nested region ends: the freed blocks at the end of what it allocated go back to the
    /// bump pointer (all of it when everything was freed). Live blocks stay, and what they
    /// keep is reclaimed when their granules empty (laps) or at the outermost end.
    pub fn pop_checkpoint(&self) {
        let depth = self.checkpoint_depth.get();
        if depth == 0 {
            return;
        }
        self.checkpoint_depth.set(depth - 1);
        if depth > MAX_CHECKPOINTS {
            return;
        }
        let cp = self.checkpoints[depth - 1].get();
        if cp.run_id != self.run_id.get() {
            return; // the run moved on: the memory in between is not ours to vouch for
        }
        let unc = self.uncounted.get();
        if unc <= cp.top {
            // Nothing counted since the region began: `[unc, top)` is a well-formed uncounted
            // range (`unc < cp.top` only when a LIFO free took the bump pointer below the
            // checkpoint, and then `unc` is where it went), and it holds what the region
            // allocated.
            self.release_freed_tail(unc);
        } else if cp.top & (GRANULE - 1) == 0 {
            // Something counted the region's blocks (a slow path); when the region began on a
            // granule boundary, its granules are its own: give them back if none holds a live
            // block.
            self.flush_uncounted();
            let mut addr = cp.top;
            while addr < self.top.get() {
                if self.live(self.granule(addr)) != 0 {
                    return;
                }
                addr += GRANULE;
            }
            if self.top.get() > cp.top {
                self.note_peak();
                self.top.set(cp.top);
                self.below_top.set(self.no_link());
                self.uncounted.set(cp.top);
            }
        }
        self.debug_check();
    }

    /// Walks the uncounted range from `from` (the start of a block or gap in it, or `top`) and
    /// takes the bump pointer back to the end of its last block that is not freed by its owner:
    /// blocks freed out of order at the end of a nested region go back at once, as the last
    /// one would by LIFO. A block another thread freed counts as kept (its remote units are on
    /// the granules and must meet local ones when the range is counted).
    fn release_freed_tail(&self, from: usize) {
        let top = self.top.get();
        let mut keep = from;
        let stop = self.walk_uncounted(from, top, |_, end, tag| {
            if tag != TAG_FREED {
                keep = align_up(end, MIN_ALIGN);
            }
        });
        debug_assert_eq!(stop, top, "the uncounted range does not end at top");
        if keep < top {
            self.note_peak();
            self.top.set(keep);
            self.below_top.set(self.no_link());
        }
    }

    /// The outermost region ended: record the peak, resize to it (growing at once, shrinking with
    /// hysteresis), and choose where the next region starts:
    ///
    /// * nothing from the last region is live: back to the start of the arena (hot memory);
    /// * something escaped: right after the last live granule, so escapes from many regions
    ///   pack together instead of each pinning a granule in the middle of the working space;
    /// * unless the room left before the capacity end is smaller than the last peak: then back
    ///   to the start, skipping pinned granules (a lap, as in a ring buffer).
    #[inline]
    pub fn reset(&self) {
        self.flush_uncounted();
        // Each quiet path asks for its own side of `predicting` first: one test picks the one
        // that may apply (a predicting region's end skipped a dozen failing checks before).
        let quiet = if self.predicting.get() {
            self.quiet_predicting_reset()
        } else {
            self.quiet_reset()
        };
        if !quiet {
            self.reset_general();
        }
    }

    /// [`Arena::reset`] when [`Arena::quiet_reset`] declined: out of line, so that a region
    /// end that takes the quiet path needs no stack frame for it.
    #[inline(never)]
    fn reset_general(&self) {
        self.settle_overflow();
        self.dry.set(false);
        // What the region needed: the span its bump pointer covered, less the granules it had to
        // jump over (pinned by escapes), plus what spilled. Planning for the jumps would let
        // escapes raise the capacity, and with it the memory bound, region after region.
        let peak = self
            .peak_bytes()
            .saturating_sub(self.skipped.get())
            .saturating_add(self.spill_bytes.get());
        self.record_peak(peak);

        let free_from = self.resume_point();

        let capacity = self.cap_end.get() - self.data_start;
        let room = self.slot_end - self.data_start;
        let recent_max = self.recent_peak_max().min(room);
        let wanted = resize_policy(
            capacity,
            peak.min(room),
            recent_max,
            self.peaks_seen.get(),
            self.min_capacity,
        );
        let wanted = wanted.min(room);
        if wanted > capacity {
            let need_end = self.data_start + wanted;
            if wanted >= HUGE_PAGE_CAPACITY && !self.recycle && self.region_was_dense() {
                // A large planned capacity that the region touched all over: transparent huge
                // pages (where the kernel has them in `madvise` mode) save TLB misses and faults.
                // Only then: for a small or sparsely used arena a huge page makes one touched
                // byte cost 2 MiB of RSS, and an exited thread's one pinned granule kept its
                // whole huge page resident (threads test: 21 MiB peak, 9 MiB without); regions
                // of large blocks touched a byte every 4 MiB held 381 MiB (glibc 3 MiB).
                // SAFETY: `[data_start, need_end)` lies in our slot; the advice changes no
                // contents.
                unsafe { os::advise_huge_pages(self.data_start, wanted) };
            }
            if self.grow_commit(need_end) || self.committed_end.get() >= need_end {
                self.set_capacity_end(need_end);
            } else {
                self.set_capacity_end(self.committed_end.get());
            }
        }
        // Shrinking lowers the capacity now and gives the memory past it back once the next run
        // is settled (below), so that a run kept across the region end is cut at the capacity.
        let shrunk = wanted < capacity;
        if shrunk {
            self.set_capacity_end(self.data_start + wanted);
            self.peaks_seen.set(0);
        }

        // The room check uses what the region consumed, not what it jumped over: a region that
        // had to skip pinned granules after a lap would otherwise lap again every time.
        let consumed = peak;
        let room = self.cap_end.get().saturating_sub(free_from);
        let resume = if room < consumed {
            self.lap_start()
        } else {
            free_from
        };
        self.resume_at(resume, resume == free_from, shrunk);
        if shrunk {
            let keep_lo = self.run_start.get() & !(GRANULE - 1);
            self.give_back(self.cap_end.get(), keep_lo, self.run_end.get());
        }
        self.skipped.set(0);
        self.spill_bytes.set(0);
        // The allocation clock also paces purges: regions that do not predict move it by what
        // they consumed.
        self.alloc_clock.add(peak as u64);
        self.predictor_region_end();
        // Escapes may have left more resident memory than the bound allows.
        self.look_at_bound(true);
        self.debug_check();
    }

    /// The next region starts at `resume`. `nothing_live_past` says that no block in
    /// `[resume, top)` is live; `shrunk`, that the capacity was just lowered.
    #[inline]
    fn resume_at(&self, resume: usize, nothing_live_past: bool, shrunk: bool) {
        if nothing_live_past && self.run_start.get() <= resume && resume <= self.top.get() {
            // Keep the current run from `resume` on: nothing in `[resume, top)` is live and
            // `[top, run_end)` is unused, so the next region bumps through granules already
            // entered instead of entering each one again (shrinking may have cut the run's
            // committed tail, never below a live granule, so never below resume's granule).
            self.top.set(resume);
            self.uncounted.set(resume); // the caller flushed
            let mut run_end = self.run_end.get().min(self.committed_end.get());
            if shrunk {
                run_end = run_end.min(self.cap_end.get());
            }
            let run_end = run_end.max(align_up(resume, GRANULE));
            self.run_end.set(run_end);
            self.update_limit();
            // The highest top of the run is forgotten below: what lies under it may have been
            // written, so it is not known to be zero any more.
            self.zero_from
                .set(self.zero_from.get().max(self.peak_top.get()));
        } else {
            self.forget_hint_above(resume);
            self.run_id.set(self.run_id.get() + 1);
            self.run_start.set(resume);
            self.run_end.set(resume);
            self.top.set(resume);
            self.uncounted.set(resume);
            self.zero_from.set(resume);
            self.update_limit();
        }
        self.below_top.set(self.no_link());
        self.origin.set(resume);
        self.peak_top.set(resume);
        self.checkpoint_depth.set(0);
    }

    /// The common end of a repeated region, in a few dozen instructions instead of the general
    /// [`Arena::reset`]: nothing escaped (no block of this arena is live, none was routed
    /// elsewhere), nothing overflowed, spilled or was skipped, the arena is open and not
    /// predicting, and the peak neither outgrew the capacity nor is small enough for the resize
    /// policy to consider shrinking (below a quarter of a capacity above the minimum). Then the general path would record the peak, keep the
    /// capacity, start the next region at `data_start` and find the bound respected: this does
    /// the same. False, having changed nothing, otherwise. The uncounted range is flushed.
    #[inline]
    fn quiet_reset(&self) -> bool {
        let capacity = self.cap_end.get() - self.data_start;
        let peak = self.peak_bytes();
        if peak > capacity
            || (peak < capacity / 4 && capacity > self.min_capacity)
            || self.spill_bytes.get() != 0
            || self.skipped.get() != 0
            || self.closed.get()
            || self.predicting.get()
            || self.overflowing.load(Ordering::Relaxed)
            || self.live_bytes() != 0
            || self.live_at_reset.get() != 0
            || self.bytes_routed_away.get() != self.routed_at_reset.get()
            || self.resident() * GRANULE > footprint::allowance(self.planned_bytes(), 0)
        {
            return false;
        }
        // What `reset` does in this case, step by step (`resize_policy` returns `capacity`:
        // the peak fits, and either is not below a quarter of it or the capacity is at the
        // minimum a shrink could reach).
        self.record_peak(peak);
        self.resume_at(self.data_start, true, false);
        self.alloc_clock.add(peak as u64);
        // What `predictor_region_end` does for a clean region when not predicting.
        self.note_clean_region();
        self.debug_check();
        true
    }

    /// The end of a region that predicts and used nothing of the arena (every allocation went
    /// to the next allocator, as the predictor said): a region that keeps one block each time
    /// (a cache fed per request). Nothing to resize or move: the peak is zero, the capacity is
    /// at its minimum (so the resize policy keeps it), nothing overflowed, spilled or was
    /// skipped, and the arena is open and within its bound; only the predictor learns. What
    /// [`Arena::reset_general`] would do then, in a fraction of its instructions (`escape`
    /// pattern of `scripts/callgrind.sh`). False, having changed nothing, otherwise.
    #[inline]
    fn quiet_predicting_reset(&self) -> bool {
        if !self.predicting.get()
            || self.peak_bytes() != 0
            || self.cap_end.get() - self.data_start > self.min_capacity
            || self.spill_bytes.get() != 0
            || self.skipped.get() != 0
            || self.closed.get()
            || self.overflowing.load(Ordering::Relaxed)
            || self.resident() * GRANULE > self.allowance(0)
        {
            return false;
        }
        self.record_peak(0);
        // The bump pointer did not move up: the next region starts where it is (a LIFO free of
        // an older block may have taken it below the origin).
        self.origin.set(self.top.get());
        self.peak_top.set(self.top.get());
        self.checkpoint_depth.set(0);
        self.predictor_region_end();
        self.debug_check();
        true
    }

    /// The outermost region needed `peak` bytes: the high-water figure and the resize policy's
    /// history.
    #[inline]
    fn record_peak(&self, peak: usize) {
        self.high_water.set(peak as u64);
        let slot = self.peaks_seen.get() % PEAK_HISTORY;
        self.peaks[slot].set(peak);
        self.peaks_seen.set(self.peaks_seen.get() + 1);
    }

    /// Where the next region may start: `data_start` when no block up to `top` is live,
    /// `top` when top's own granule is pinned, else the granule after the highest pinned one.
    fn resume_point(&self) -> usize {
        self.flush_uncounted();
        let top = self.top.get();
        if top == self.data_start || self.live_bytes() == 0 {
            return self.data_start; // nothing live anywhere: no need to look
        }
        let top_granule = self.granule(top - 1);
        let mut g = top_granule;
        loop {
            if self.live(g) != 0 {
                // The highest granule a live block uses (a block that crosses out of `g` ends
                // in a counted granule below top's, so `past_pin` is the next granule).
                return if g == top_granule {
                    top
                } else {
                    self.past_pin(self.slot_base + (g << GRANULE_SHIFT))
                };
            }
            if g == self.granule(self.data_start) {
                return self.data_start;
            }
            g -= 1;
        }
    }

    /// Bytes of this arena's live blocks, headers included (any thread). Exact on the owner
    /// thread once the uncounted range is counted (every slow path and region end does that
    /// first); in between it leaves out the blocks the fast path handed out since.
    pub fn live_bytes(&self) -> u64 {
        let balance = self.remote_balance.load(Ordering::Acquire);
        if balance >= ORPHANED_SEEN {
            // The owner has exited: what it left minus what was freed since.
            return ORPHANED.saturating_sub(balance);
        }
        // On the owner thread `local >= remote` always holds. Another thread may read `local`,
        // then see remote frees of blocks allocated after that read: saturate instead of wrap.
        self.live_local_bytes.get().saturating_sub(balance)
    }

    /// Bytes other threads freed (owner thread, before it exits).
    fn remote_bytes(&self) -> u64 {
        self.remote_balance.load(Ordering::Relaxed)
    }

    /// The largest of the last `PEAK_HISTORY` peaks, once there are that many (the resize
    /// policy looks at it only then; 0 before). A fixed-size loop: no branch per entry.
    fn recent_peak_max(&self) -> usize {
        if self.peaks_seen.get() < PEAK_HISTORY {
            return 0;
        }
        self.peaks.iter().fold(0, |m, p| m.max(p.get()))
    }

    /// Walks the granules of `[data_start, end)` and calls `f(g, units, covered)` for each:
    /// `units` is `units(g)`, and `covered` is true when `g` lies past the first granule of a
    /// block that spans granules (one `crossing(first)` names), up to its last. Granules inside
    /// such a block count zero: the walk starts at the beginning, so that it sees the first
    /// granule of every block that covers one, and remembers how far the blocks it saw reach.
    fn walk_granules(
        &self,
        end: usize,
        units: impl Fn(usize) -> u64,
        crossing: impl Fn(usize) -> Option<usize>,
        mut f: impl FnMut(usize, u64, bool),
    ) {
        let mut covered_to = 0; // (granule 0 holds the metadata: no block covers it)
        for g in self.granule(self.data_start)..self.granule(end) {
            let n = units(g);
            f(g, n, g <= covered_to);
            if n != 0 {
                if let Some(last) = crossing(g) {
                    covered_to = covered_to.max(last);
                }
            }
        }
    }

    /// The part of the current run past its bump pointer, granule aligned: it holds no block
    /// (a run's blocks lie below its top) and lies inside none (a run never enters a granule
    /// strictly inside a live block).
    fn run_tail(&self) -> (usize, usize) {
        let run_end = self.run_end.get();
        (align_up(self.top.get(), GRANULE).min(run_end), run_end)
    }

    /// Gives back to the kernel every resident granule in `[from, committed_end)` that holds no
    /// live block, except those in `[keep_lo, keep_hi)`, and decommits the free tail past the
    /// last granule kept (never below the current run or the capacity).
    fn give_back(&self, from: usize, keep_lo: usize, keep_hi: usize) {
        self.give_back_around(from, keep_lo, keep_hi, self.run_tail());
    }

    /// [`Arena::give_back`], told that the granules of `empty` (addresses, granule aligned) hold
    /// no block and lie inside none.
    fn give_back_around(&self, from: usize, keep_lo: usize, keep_hi: usize, empty: (usize, usize)) {
        self.flush_uncounted();
        let committed_end = self.committed_end.get();
        // No block lies in `empty`, and none ever started past `used_end`: their counts are not
        // read (the table pages under a large freed block were never written, and each read of
        // one costs a page fault).
        let (empty_lo, empty_hi) = (
            self.granule(empty.0.max(self.slot_base)),
            self.granule(empty.1.max(self.slot_base)),
        );
        let counted_end = self.granule(align_up(self.used_end.get(), GRANULE));
        let live = |g: usize| {
            if g >= counted_end || (empty_lo..empty_hi).contains(&g) {
                debug_assert_eq!(self.live(g), 0, "a block in a granule known empty");
                0
            } else {
                self.live_when_counted(g)
            }
        };
        let crossing = |g| self.crossing_last(g);
        let mut last_kept_end = from;
        let mut batch_from: Option<usize> = None;
        self.walk_granules(committed_end, live, crossing, |g, units, covered| {
            let addr = self.slot_base + (g << GRANULE_SHIFT);
            if addr < from {
                return;
            }
            let keep = (keep_lo <= addr && addr < keep_hi) || units != 0 || covered;
            // SAFETY: granule of this slot; the touched table is owner-only, and we are the owner
            // (or the exiting owner).
            let resident = unsafe { *self.touched.add(g) } != 0;
            if !keep && resident {
                batch_from.get_or_insert(addr);
            } else if let Some(start) = batch_from.take() {
                self.discard_granules(start, addr);
            }
            if keep {
                last_kept_end = addr + GRANULE;
            }
        });
        if let Some(start) = batch_from {
            self.discard_granules(start, committed_end);
        }
        let tail = last_kept_end
            .max(self.run_end.get())
            .max(self.data_start + self.planned_bytes())
            .max(align_up(self.top.get(), GRANULE));
        // Only granules that are not resident (given back just now, or never entered) may be
        // decommitted: a resident one still holds its pages.
        let mut tail_ok = tail;
        while tail_ok < committed_end
            // SAFETY: granule of this slot; owner thread.
            && unsafe { *self.touched.add(self.granule(tail_ok)) } == 0
        {
            tail_ok += GRANULE;
        }
        if tail < committed_end && tail_ok == committed_end {
            // SAFETY: `[tail, committed_end)` holds no live block, lies past the run, and its
            // granules are not resident.
            if unsafe { os::decommit(tail, committed_end - tail) } {
                self.set_committed_end(tail);
                if self.cap_end.get() > tail {
                    // Process mode, whose capacity follows what is committed.
                    self.set_capacity_end(tail);
                }
            }
        }
    }

    /// Gives the free granules `[start, end)` back to the kernel and counts them as no longer
    /// resident, unless the kernel refused (locked memory): then they stay resident, with their
    /// contents, and are not treated as fresh.
    fn discard_granules(&self, start: usize, end: usize) {
        // SAFETY: the caller found `[start, end)` free granules of our slot.
        if !unsafe { os::discard(start, end - start) } {
            return;
        }
        let mut addr = start;
        while addr < end {
            // SAFETY: granule of this slot; owner thread.
            unsafe { *self.touched.add(self.granule(addr)) = 0 };
            addr += GRANULE;
        }
        let n = ((end - start) / GRANULE) as u64;
        self.resident_granules.sub(n);
        self.given_back_granules.add(n);
    }

    /// Gives back every free granule outside the current run. Called by the user's trim
    /// (`malloc_trim`, `resizealloc::trim`).
    pub fn trim(&self) {
        self.flush_uncounted();
        let keep_lo = self.run_start.get() & !(GRANULE - 1);
        self.give_back(self.data_start, keep_lo, self.run_end.get());
        self.debug_check();
    }

    // ---------------------------------------------------------------- the memory bound

    /// Capacity the bound does not count against live memory: what the resize policy planned
    /// (markers mode), or the initial capacity (process mode, where there is no plan).
    fn planned_bytes(&self) -> usize {
        if self.recycle {
            self.min_capacity
        } else {
            self.cap_end.get() - self.data_start
        }
    }

    /// Resident bytes allowed with `extra` more live bytes (see footprint.rs).
    fn allowance(&self, extra: usize) -> usize {
        footprint::allowance(
            self.planned_bytes(),
            (self.live_bytes() as usize).saturating_add(extra),
        )
    }

    fn resident(&self) -> usize {
        self.resident_granules.get() as usize
    }

    /// The run is about to enter granule `g`, which holds no live block. Counts it resident if
    /// it was not, when the bound allows: `Some(true)` when it was resident already (it may
    /// hold old contents), `Some(false)` when it is newly resident (it reads as zero), `None`
    /// when the bound does not allow it.
    #[inline]
    fn enter_granule(&self, g: usize) -> Option<bool> {
        // SAFETY: granule of this slot; owner thread only.
        let touched = unsafe { &mut *self.touched.add(g) };
        if *touched != 0 {
            return Some(true);
        }
        if self.closed.get()
            || !footprint::may_enter(self.resident(), self.allowance(self.pending_bytes.get()))
        {
            return None;
        }
        *touched = 1;
        self.resident_granules.add(1);
        Some(false)
    }

    /// Whether the region that just ended touched most of the memory it used (a `mincore`
    /// sample of its committed part): what earns its capacity transparent huge pages.
    fn region_was_dense(&self) -> bool {
        let start = align_up(self.data_start, os::PAGE);
        let end = self.committed_end.get().min(self.used_end.get()) & !(os::PAGE - 1);
        // SAFETY: page aligned, inside our slot of the reservation.
        end > start
            && unsafe { os::resident_sixteenths(start, end - start) }.is_some_and(|r| r >= 8)
    }

    /// The run is about to enter the granules of `[from, to)`, all past `used_end`: no block
    /// ever started in them, so their counts and crossing entries are zero and only `touched`
    /// needs a look. Counts them resident at once when the bound allows all of them, and
    /// returns the end of the last one that was resident already (0 for none: the rest read as
    /// zero). `None` (nothing changed) when the bound or a closed arena refuses: the caller then
    /// enters them one by one, as far as the bound allows.
    fn enter_fresh(&self, from: usize, to: usize) -> Option<usize> {
        if to <= from || self.closed.get() {
            return None;
        }
        let (first, n) = (self.granule(from), (to - from) >> GRANULE_SHIFT);
        // SAFETY: `[first, first + n)` are granules of this slot (`to <= committed_end`); the
        // touched table is owner-only and we are the owner.
        let touched = unsafe { core::slice::from_raw_parts_mut(self.touched.add(first), n) };
        let resident_already = touched.iter().filter(|&&t| t != 0).count();
        let newly = n - resident_already;
        if !footprint::may_enter_many(
            self.resident(),
            newly,
            self.allowance(self.pending_bytes.get()),
        ) {
            return None;
        }
        let last_resident = touched.iter().rposition(|&t| t != 0);
        touched.fill(1);
        self.resident_granules.add(newly as u64);
        Some(last_resident.map_or(0, |i| from + ((i + 1) << GRANULE_SHIFT)))
    }

    /// The bound stopped the run: gives back every free granule, and closes the arena when that
    /// leaves too little headroom. True when the arena may grow again.
    #[cold]
    #[inline(never)]
    fn make_room(&self) -> bool {
        if self.closed.get() {
            return false;
        }
        // A purge costs a scan, and page faults when the memory it gives back is used again:
        // at most one per `PURGE_SPACING` allowances of allocation, closing in between.
        if self.purge_due() {
            self.purge();
            if footprint::stays_open(self.resident(), self.allowance(self.pending_bytes.get())) {
                return true;
            }
        }
        self.closed.set(true);
        self.turned_away.set(0);
        self.closures.add(1);
        false
    }

    /// True (and the purge clock restarted) when a purge to make room is not too soon after the
    /// last one: a purge costs a scan, and page faults when the memory it gives back is used
    /// again, so there is at most one per `PURGE_SPACING` allowances of allocation.
    fn purge_due(&self) -> bool {
        let clock = self.alloc_clock.get();
        let spacing = (self.allowance(0) as u64).saturating_mul(footprint::PURGE_SPACING);
        if self.purged_once.get() && clock.saturating_sub(self.last_purge_clock.get()) < spacing {
            return false;
        }
        self.purged_once.set(true);
        self.last_purge_clock.set(clock);
        true
    }

    /// Ends the current run and gives back every free granule of the arena. Process mode goes
    /// back to the start of the arena as well, so that the memory it then keeps resident packs
    /// at the low end, where its laps begin.
    fn purge(&self) {
        self.purge_at_ms.set(0);
        self.dry.set(false);
        self.note_peak();
        // The run's tail stays empty: the new run below starts empty (in it, or elsewhere).
        let empty = self.run_tail();
        if self.recycle {
            self.wrap();
        } else {
            self.start_run(align_up(self.top.get(), GRANULE));
        }
        self.give_back_around(self.data_start, 0, 0, empty);
        self.live_after_purge.set(self.live_bytes());
        self.resident_after_purge.set(self.resident());
        self.reset_emptied_left();
    }

    /// The frees' budget to the next look at the bound: a quarter of what is resident now
    /// (counted before a purge, a purge of 200 MiB left the next 8 MiB of frees short of the
    /// next look).
    fn reset_emptied_left(&self) {
        self.emptied_left
            .set((self.resident() / 4).max(EMPTIED_MIN));
    }

    /// Whether a purge may find something the last one did not: the program freed memory since,
    /// or the arena entered more granules. A bound that long-lived blocks pinned over its limit
    /// otherwise purged at every look (each a walk over every granule): one region that kept
    /// every other block of a million and then allocated on spent 65 % of its time there.
    fn purge_may_find_more(&self) -> bool {
        self.live_bytes() < self.live_after_purge.get()
            || self.resident() > self.resident_after_purge.get()
    }

    /// A request the bound kept out of the arena: the next allocator serves it.
    #[cold]
    fn turn_away(&self, size: usize) -> *mut u8 {
        if self.closed.get() && !self.dry.get() {
            self.dry.set(true);
            self.dry_remote.set(self.remote_bytes());
        }
        self.bytes_turned_away.add(size as u64);
        self.note_sent_to_next(size);
        let n = self.turned_away.get() + 1;
        self.turned_away.set(n);
        if n >= footprint::RECHECK_EVERY {
            self.look_at_bound(true);
        }
        self.spill(size)
    }

    /// Owner frees emptied `n` granules (not by LIFO, but in process mode, where the bump
    /// pointer going back over a large block is no region end that resizes): after a quarter of
    /// the resident granules (at least 64), frees may have left more resident memory than the
    /// bound allows (a phase ended).
    #[inline(always)]
    fn granules_emptied(&self, n: usize, at: usize) {
        self.dry.set(false);
        if at < self.lap_hint.get() {
            self.lap_hint.set(0); // a granule below the hint may be free now
        }
        let left = self.emptied_left.get();
        if left > n {
            self.emptied_left.set(left - n);
        } else {
            self.look_at_bound(false);
        }
    }

    /// The same for frees by other threads, looked at from the owner's slow path.
    #[inline]
    fn look_at_remote_frees(&self) {
        let freed = self.remote_bytes() - self.remote_seen.get();
        if freed != 0 && freed as usize >= (self.resident() * GRANULE / 4).max(1 << 20) {
            self.look_at_bound(false);
        }
    }

    /// Gives back free granules when the arena holds more than its bound allows, and reopens a
    /// closed arena once it is well within it. In process mode the give-back waits
    /// (`defer_purge`), unless `at_once` (a closed arena's look, a region end).
    #[cold]
    #[inline(never)]
    fn look_at_bound(&self, at_once: bool) {
        self.flush_uncounted();
        self.dry.set(false);
        self.turned_away.set(0);
        self.remote_seen.set(self.remote_bytes());
        if self.resident() * GRANULE > self.allowance(0) && self.purge_may_find_more() {
            if at_once || !self.recycle || self.closed.get() {
                self.purge();
            } else {
                self.defer_purge();
            }
        } else if self.closed.get() && self.purge_due() {
            // Free granules count against a closed arena until they are given back.
            self.purge();
        }
        if self.closed.get() && footprint::may_reopen(self.resident(), self.allowance(0)) {
            self.closed.set(false);
        }
        self.reset_emptied_left();
    }

    /// Process mode: frees left more resident memory than the bound allows. The free granules
    /// go back once they have stayed free `RESIZEALLOC_PURGE_DELAY_MS` (checked by
    /// [`Arena::periodic_look`]), not at once: work that frees a large buffer and allocates it
    /// again a few milliseconds later (a 24 MiB block per request between small temporaries)
    /// then reuses its pages instead of faulting all of them in each time (4x glibc's time).
    /// Growth never waits for it: the bound still stops the bump pointer before a granule that
    /// is not resident, and gives back what is free there and then (`make_room`), so the peak
    /// is what it was; what waits is only memory the program may want again. Large blocks wait
    /// too: given back when freed (as glibc unmaps a block of 32 MiB or more), a 64 MiB buffer
    /// `calloc`ed and filled in a loop ran at glibc's 18 calls/s instead of 121, and a 256 MiB
    /// `calloc` with two bytes written at 3,000 calls/s instead of 45,000 (glibc 49,000).
    #[cold]
    fn defer_purge(&self) {
        if self.purge_at_ms.get() != 0 {
            return; // the earliest time stands
        }
        let delay = crate::options::purge_delay_ms() as u64;
        let now = os::monotonic_ms();
        if delay == 0 || now == 0 {
            // No delay asked for, or no clock to wait on: at once.
            self.purge();
        } else {
            self.purge_at_ms.set(now.saturating_add(delay));
        }
    }

    /// Every [`LOOK_EVERY`] allocations through the predictor (small ones included): in process
    /// mode, runs the give-back that [`Arena::defer_purge`] made wait once its time has come, or
    /// forgets it once the memory is in use again; and looks at the bound itself, for memory
    /// that no free reported (blocks that went back to the bump pointer before they were ever
    /// counted). Without it, a 200 MiB block freed at the top of the run stayed resident while
    /// the thread went on with small blocks (glibc unmaps it). Also gives back what arenas of
    /// exited threads kept for the delay, once it is over.
    #[cold]
    #[inline(never)]
    fn periodic_look(&self) {
        self.look_countdown.set(LOOK_EVERY);
        // Arenas of exited threads wait for the same delay (see `prepare_orphan`).
        crate::reservation::expire_unowned_if_due();
        if !self.recycle {
            return;
        }
        self.flush_uncounted();
        if self.resident() * GRANULE <= self.allowance(0) || !self.purge_may_find_more() {
            self.purge_at_ms.set(0);
            return;
        }
        let at = self.purge_at_ms.get();
        if at == 0 {
            self.defer_purge();
        } else if os::monotonic_ms() >= at {
            self.purge(); // which ends the wait
        }
    }

    // ---------------------------------------------------------------- lifetime prediction

    /// Allocates for `site` (the caller's return address, or 0) through the lifetime predictor:
    /// null when the site is predicted long-lived (the next allocator serves it) or the arena
    /// declines. Samples one allocation in `SAMPLE_EVERY`, and probes long sites.
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    #[inline(always)]
    pub unsafe fn alloc_predicted(
        &self,
        size: usize,
        align: usize,
        site: usize,
        zeroed: bool,
    ) -> *mut u8 {
        // SAFETY: forwarded obligations.
        match unsafe { self.try_alloc_predicted_fast(size, align, site, zeroed) } {
            Predicted::Block(p) => return p,
            Predicted::Next | Predicted::Small => return ptr::null_mut(),
            Predicted::General => {}
        }
        // SAFETY: forwarded obligations.
        unsafe { self.alloc_predicted_general(size, align, site, zeroed) }
    }

    /// The common cases of [`Arena::alloc_predicted`], calling nothing, when no sweep and no
    /// periodic look is due: a small request goes to the small-block heap in process mode, a
    /// long site's request to the next allocator (but for its probes), and a short site's block
    /// under a page comes from the run (unless it is sampled, or `zeroed`: `calloc` takes the
    /// general path, which knows what needs clearing). Anything else is [`Predicted::General`],
    /// having changed nothing but the count to the next periodic look: the caller then takes the
    /// general path, which decides from scratch.
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    #[inline(always)]
    pub unsafe fn try_alloc_predicted_fast(
        &self,
        size: usize,
        align: usize,
        site: usize,
        zeroed: bool,
    ) -> Predicted {
        let looks_in = self.look_countdown.get();
        if looks_in <= 1 {
            return Predicted::General; // a periodic look is due
        }
        self.look_countdown.set(looks_in - 1);
        if self.small_heap_takes(size) {
            // Not on the allocation clock: small blocks never share the arena's laps, so bytes
            // of them between a block's birth and death say nothing about what it pins.
            return Predicted::Small;
        }
        let clock = self.alloc_clock.get() + clock_bytes(size);
        if clock >= self.next_sweep.get() {
            return Predicted::General;
        }
        if size < LARGE_STAYS && lifetime::predicts_long(lifetime::key(site, size)) {
            let n = self.probe_countdown.get();
            if n <= 1 {
                return Predicted::General; // a probe
            }
            self.alloc_clock.set(clock);
            self.probe_countdown.set(n - 1);
            self.bytes_routed_away.add(size as u64);
            self.note_sent_to_next(size);
            return Predicted::Next;
        }
        let countdown = self.sample_countdown.get();
        if zeroed || countdown <= 1 || size >= LINE_ALIGN_FROM || align > MIN_ALIGN {
            return Predicted::General;
        }
        // SAFETY: forwarded obligations; a small block with the usual alignment, so this is the
        // inlined path of `try_alloc_fast`.
        let p = unsafe { self.try_alloc_fast(size, align) };
        if p.is_null() {
            return Predicted::General;
        }
        self.alloc_clock.set(clock);
        self.sample_countdown.set(countdown - 1);
        Predicted::Block(p)
    }

    /// [`Arena::alloc_predicted`] in full: the clock and the sweep, long sites and their probes,
    /// sampling, and the slow path.
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    #[inline(never)]
    pub unsafe fn alloc_predicted_general(
        &self,
        size: usize,
        align: usize,
        site: usize,
        zeroed: bool,
    ) -> *mut u8 {
        if self.look_countdown.get() <= 1 {
            self.periodic_look();
        }
        if self.small_heap_takes(size) {
            return ptr::null_mut(); // the small-block heap's (see `try_alloc_predicted_fast`)
        }
        let key = lifetime::key(site, size);
        // The clock counts every request of a size the arena may serve, wherever the predictor
        // sends it: ages are in bytes the program allocated, not bytes the arena served.
        self.alloc_clock.add(clock_bytes(size));
        if self.alloc_clock.get() >= self.next_sweep.get() {
            // Here, not only when sampling: a closed arena samples nothing, and its survivors
            // are exactly the evidence it needs.
            self.sweep();
        }
        let mut probe = false;
        if size < LARGE_STAYS && lifetime::predicts_long(key) {
            let n = self.probe_countdown.get();
            if n > 1 {
                self.probe_countdown.set(n - 1);
                self.bytes_routed_away.add(size as u64);
                self.note_sent_to_next(size);
                return ptr::null_mut();
            }
            self.probe_countdown.set(lifetime::probe_interval(key));
            probe = true;
        }
        // SAFETY: forwarded obligations.
        let p = unsafe {
            if zeroed {
                self.alloc_zeroed(size, align)
            } else {
                self.alloc(size, align)
            }
        };
        if p.is_null() {
            return p;
        }
        let n = self.sample_countdown.get();
        if probe || n <= 1 {
            if !probe {
                self.sample_countdown.set(self.next_sample_gap());
            }
            self.sample(p as usize, size, key, probe);
        } else {
            self.sample_countdown.set(n - 1);
        }
        p
    }

    /// Allocations until the next sample: uniform in `1..2 * SAMPLE_EVERY`, so that a loop whose
    /// period divides a fixed interval cannot hide one of its sites from the sampler (a loop of
    /// one temporary and one kept block, sampled every 8th, only ever saw the temporary).
    fn next_sample_gap(&self) -> u32 {
        // xorshift32
        let mut x = self.sample_rng.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.sample_rng.set(x);
        1 + x % (2 * lifetime::SAMPLE_EVERY - 1)
    }

    /// Process mode sends every small request to the small-block heap
    /// (`router::alloc_routed_away`, [`Predicted::Small`]), short-lived or not, and the
    /// predictor decides only for larger ones. A free list reuses the block freed last, still
    /// in the cache, where a bump arena walks its whole lap (192 KiB for a window of 32
    /// temporaries of up to 1 KiB freed in random order, one L1 miss per allocation): such a
    /// thread ran at half glibc's speed in the arena and at 1.3x through the heap, which also
    /// skips the predictor's work and holds less memory (see BENCHMARKS.md, seventh session).
    #[inline(always)]
    fn small_heap_takes(&self, size: usize) -> bool {
        self.recycle && size <= crate::slab::MAX_SMALL
    }

    /// Counts `size` bytes sent to the next allocator, published process-wide in batches. A
    /// request the small-block heap takes is not counted: counted, the heap's allocations made
    /// a freed glibc phase look reused, and it was never given back.
    #[inline]
    fn note_sent_to_next(&self, size: usize) {
        if self.small_heap_takes(size) {
            return;
        }
        let n = self.sent_unpublished.get() + size as u64;
        if n >= SENT_BATCH {
            SENT_TO_NEXT.fetch_add(n, Ordering::Relaxed);
            self.sent_unpublished.set(0);
        } else {
            self.sent_unpublished.set(n);
        }
    }

    /// Makes the fresh block `p` a sampled one: records its site and birth in its header and in
    /// the survivor ring.
    #[cold]
    #[inline(never)]
    fn sample(&self, p: usize, size: usize, key: u32, probe: bool) {
        let i = self.ring_next.get();
        self.ring_next.set((i + 1) % RING);
        // An entry whose block is still live and young stays: it is the evidence the sweep
        // waits for. This sample then only records itself in its header.
        self.judge_ring_entry(i);
        let slot = (self.ring[i].load(Ordering::Acquire) == 0).then_some(i);
        let clock = self.alloc_clock.get();
        let w = SampleWord::new(key, slot, probe, clock);
        if slot.is_some() {
            self.ring_words[i].set(w.0);
            self.ring[i].store(p, Ordering::Release);
            self.ring_used.set(self.ring_used.get() | 1 << i);
        }
        let hdr = (p - HEADER) as *mut usize;
        // SAFETY: `p` was just handed out by this arena: its 16-byte header is ours to write.
        unsafe {
            hdr.add(1).write(w.0 as usize);
            hdr.write(header_word(size, TAG_SAMPLED));
        }
        // Its link is its sample word now, and its owner's free must take the slow path, which
        // learns from it: the LIFO free, which reads no tag, must never find it at `below_top`
        // (see there). The block above it then links to `no_link`. Nothing reached below this
        // block through its link before either; what is lost is this block itself: freed
        // before the block above it, it is no longer taken back when that one goes (it waits
        // for the region's end, or in process mode for its granule to empty). One predicted
        // allocation in `SAMPLE_EVERY` is sampled.
        if self.below_top.get() == hdr as usize {
            self.below_top.set(self.no_link());
        }
    }

    /// A lap of this arena: blocks that live longer pin their granules when the bump pointer
    /// comes round again.
    fn lap_bytes(&self) -> u64 {
        LAP
    }

    /// Long evidence from ring entry `i` if its block is still live and older than a lap; the
    /// entry is emptied then.
    fn judge_ring_entry(&self, i: usize) {
        let p = self.ring[i].load(Ordering::Acquire);
        if p == 0 {
            return;
        }
        let w = SampleWord(self.ring_words[i].get());
        let old = w.age(self.alloc_clock.get()) > self.lap_bytes();
        if old {
            lifetime::learn_long(w.key(), w.probe());
        }
        if old {
            // A free racing with us clears it too; either way the entry is empty.
            let _ = self.ring[i].compare_exchange(p, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Looks at every sampled block still live: those older than a lap are long evidence.
    #[cold]
    #[inline(never)]
    fn sweep(&self) {
        let mut used = self.ring_used.get();
        let mut still = 0;
        while used != 0 {
            let i = used.trailing_zeros() as usize;
            used &= used - 1;
            self.judge_ring_entry(i);
            if self.ring[i].load(Ordering::Relaxed) != 0 {
                still |= 1 << i;
            }
        }
        self.ring_used.set(still);
        let next = self.alloc_clock.get() + (self.lap_bytes() / 4).max(SWEEP_MIN as u64);
        self.next_sweep.set(next);
    }

    /// A sampled block is being freed (by any thread): its age is evidence for its site.
    fn learn_from_free(&self, p: usize, w: SampleWord) {
        if let Some(i) = w.ring() {
            let _ = self.ring[i].compare_exchange(p, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        if w.age(self.alloc_clock.get()) > self.lap_bytes() {
            lifetime::learn_long(w.key(), w.probe());
        } else {
            let weight = if w.probe() { lifetime::PROBE_WEIGHT } else { 1 };
            lifetime::learn_short(w.key(), weight);
        }
    }

    /// Markers mode: whether this arena's regions allocate through the predictor.
    pub fn predicting(&self) -> bool {
        self.predicting.get()
    }

    /// Region end, for the predictor: the clock jumps a lap (blocks alive now are old), the
    /// survivors are judged, and prediction turns on once regions keep leaving blocks behind,
    /// off after a run of regions that leave nothing.
    fn predictor_region_end(&self) {
        let live = self.live_bytes();
        let routed = self.bytes_routed_away.get();
        if live > self.live_at_reset.get() {
            self.escaping_regions.set(self.escaping_regions.get() + 1);
            self.clean_regions.set(0);
        } else if routed != self.routed_at_reset.get() {
            // Nothing stayed behind because the predictor sent it elsewhere: not clean.
            self.clean_regions.set(0);
        } else {
            self.note_clean_region();
        }
        self.live_at_reset.set(live);
        self.routed_at_reset.set(routed);
        if !self.recycle && self.escaping_regions.get() >= ESCAPES_TO_PREDICT {
            self.predicting.set(true);
        }
        if self.predicting.get() {
            self.alloc_clock.add(REGION_LAP);
            self.sweep();
        }
    }

    /// A region ended with nothing left behind and nothing routed away: after `CLEAN_TO_STOP`
    /// of them in a row, the arena stops predicting.
    #[inline]
    fn note_clean_region(&self) {
        let clean = self.clean_regions.get() + 1;
        self.clean_regions.set(clean);
        if clean >= CLEAN_TO_STOP {
            self.escaping_regions.set(0);
            self.predicting.set(false);
        }
    }

    // ---------------------------------------------------------------- zeroed allocation

    /// [`Arena::alloc`] for `calloc`/`alloc_zeroed`: clears the part of the block whose memory is
    /// not known to be zero (fresh from the kernel and not written since).
    ///
    /// # Safety
    /// As [`Arena::alloc`].
    pub unsafe fn alloc_zeroed(&self, size: usize, align: usize) -> *mut u8 {
        // Every byte the current run has written lies below the highest top it reached; a run
        // started for this block has written nothing yet (what earlier runs wrote there is
        // covered by `zero_from`).
        self.note_peak();
        let written_below = self.peak_top.get().max(self.top.get());
        let run = self.run_id.get();
        // SAFETY: forwarded obligations.
        let p = unsafe { self.alloc(size, align) };
        if p.is_null() {
            return p;
        }
        let written_below = if self.run_id.get() == run {
            written_below
        } else {
            0
        };
        // Only the part below both marks may hold old contents.
        let clean_from = written_below.max(self.zero_from.get());
        let dirty = clean_from.saturating_sub(p as usize).min(size);
        if dirty > 0 {
            // SAFETY: the first `dirty` bytes of a block of at least `size` bytes that we just
            // took and have not handed out.
            unsafe { clear_fresh_block(p, dirty) };
        }
        p
    }

    // ---------------------------------------------------------------- thread exit

    /// The owner thread is exiting: gives back every free granule and hands the arena over.
    /// Returns `true` when nothing is live: the caller must then release the slot. Otherwise the
    /// last remote free does (see [`Arena::free_remote`]), unless a new thread adopts the arena
    /// first ([`Arena::adopt`]). [`Arena::prepare_orphan`] then [`Arena::complete_orphan`], for
    /// a caller that keeps no warm memory.
    pub fn orphan(&self) -> bool {
        self.prepare_orphan(false);
        self.complete_orphan()
    }

    /// True when no block of the arena is live. Owner thread only. Once true on an exiting
    /// owner's thread it stays true: only other threads' frees can still reach the arena, and
    /// a free never makes a block live.
    pub fn nothing_live(&self) -> bool {
        self.flush_uncounted();
        self.live_local_bytes.get() == self.remote_balance.load(Ordering::Acquire)
    }

    /// First half of the exiting owner's hand-over: gives back every free granule, but those of
    /// the first [`WARM_BYTES`] when `keep_warm` (for the next thread that takes the arena, see
    /// `reservation`). Owner thread only.
    ///
    /// In process mode, with `keep_warm` and a purge delay (`RESIZEALLOC_PURGE_DELAY_MS`), the
    /// free granules past the warm start wait for it instead, as the frees of a running thread
    /// do (see [`Arena::defer_purge`]): a program that starts short threads one after another,
    /// each with a large buffer, then has the next thread reuse the last one's pages instead of
    /// faulting all of them in again. Returns whether they wait; the caller must then see to
    /// it that someone gives them back once their time has come (`reservation`).
    pub fn prepare_orphan(&self, keep_warm: bool) -> bool {
        self.flush_uncounted();
        if keep_warm
            && self.recycle
            && crate::options::purge_delay_ms() > 0
            && self.resident() * GRANULE > WARM_BYTES
        {
            // At most the first `WARM_KEEP_MAX` wait: the next thread takes the rest of the
            // wait with the arena, and a thread that then allocates little holds it until its
            // own periodic look.
            self.give_back(
                self.data_start,
                self.data_start,
                self.data_start + WARM_KEEP_MAX,
            );
            if self.resident() * GRANULE > WARM_BYTES {
                self.defer_purge();
                // Unless there was no clock to wait on, and it gave them back at once.
                return self.purge_at_ms.get() != 0;
            }
            self.purge_at_ms.set(0);
            return false;
        }
        // Nothing waits from now on (a wait the thread had started is over).
        self.purge_at_ms.set(0);
        let warm_end = if keep_warm {
            self.data_start + WARM_BYTES
        } else {
            0
        };
        self.give_back(self.data_start, self.data_start, warm_end);
        false
    }

    /// When the free memory an arena without an owner kept past its warm start goes back (a
    /// [`os::monotonic_ms`] time), 0 for none. Any thread holding the slot table's lock.
    pub fn warm_until_ms(&self) -> u64 {
        self.purge_at_ms.get()
    }

    /// Gives back the free granules past the warm start that an arena without an owner kept
    /// for the purge delay ([`Arena::prepare_orphan`]).
    ///
    /// # Safety
    /// The arena has no owner (orphaned or released, not reused) and the caller holds the slot
    /// table lock: nobody else adopts, reuses, releases or trims it meanwhile (other threads'
    /// frees touch only what they always touch).
    pub unsafe fn give_back_past_warm_start(&self) {
        self.purge_at_ms.set(0);
        self.give_back(
            self.data_start,
            self.data_start,
            self.data_start + WARM_BYTES,
        );
    }

    /// Second half: the owner's last access to the arena. Returns `true` when nothing is live:
    /// the caller must then release the slot.
    pub fn complete_orphan(&self) -> bool {
        self.orphaned.store(true, Ordering::Release);
        // Last access to the arena by its owner, as in `free_remote`.
        let delta = ORPHANED.wrapping_sub(self.live_local_bytes.get());
        self.remote_balance
            .fetch_add(delta, Ordering::AcqRel)
            .wrapping_add(delta)
            == ORPHANED
    }

    /// The calling thread becomes the owner of this orphaned process-mode arena, its live blocks
    /// included: they stay where they are, and their frees by the new owner are owner frees.
    /// Returns `false` when the arena cannot be had: its last block is being freed (that thread
    /// releases it), or it or `cfg` is not process mode's, or they differ.
    ///
    /// Only process mode: its arena has no regions and reuses memory by laps, so blocks left by
    /// the old owner are pinned granules a lap goes round, as its own long-lived blocks are. A
    /// region's arena promises that the next run of the same work fits its capacity; pins
    /// inherited inside that capacity would make every region of the new owner overflow.
    ///
    /// Only the run is set up again: the exit gave its memory back, and a new, empty run
    /// starts where a lap would.
    ///
    /// # Safety
    /// 1. The owner has exited and [`Arena::complete_orphan`] returned `false`.
    /// 2. The caller holds the slot table lock, so that no other thread adopts, releases or
    ///    trims the arena meanwhile; from a `true` return on, the calling thread is the owner.
    pub unsafe fn adopt(&self, cfg: &ArenaConfig) -> bool {
        if !self.recycle
            || !cfg.recycle
            || cfg.min_alloc.max(1) != self.user_min_alloc
            || cfg.max_alloc.max(self.user_min_alloc) != self.user_max_alloc
        {
            return false;
        }
        // Take back the exiting owner's add (see `remote_balance`), unless the last free has
        // completed it: the balance is then the bytes other threads freed, as while an owner
        // lives. Acquire: the old owner's writes (before its AcqRel add) are visible to us.
        let delta = ORPHANED.wrapping_sub(self.live_local_bytes.get());
        let mut balance = self.remote_balance.load(Ordering::Acquire);
        loop {
            if balance == ORPHANED {
                return false;
            }
            match self.remote_balance.compare_exchange_weak(
                balance,
                balance.wrapping_sub(delta),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => balance = now,
            }
        }
        self.orphaned.store(false, Ordering::Release);
        self.dry.set(false);
        self.wrap();
        self.debug_check();
        true
    }

    /// Gives back the free granules an orphaned arena kept warm.
    ///
    /// # Safety
    /// The arena is orphaned, not released, and the caller holds the slot table lock: nobody
    /// owns the arena, and nobody else adopts, releases or trims it meanwhile (other threads'
    /// frees touch only what they always touch).
    pub unsafe fn give_back_orphaned(&self) {
        self.purge_at_ms.set(0);
        self.give_back(self.data_start, 0, 0);
    }

    /// Whether the owner thread has exited.
    pub fn is_orphaned(&self) -> bool {
        self.orphaned.load(Ordering::Acquire)
    }

    // ---------------------------------------------------------------- observation

    /// The figures of this arena; any thread may call it.
    pub fn stats(&self) -> ArenaStats {
        ArenaStats {
            arena_capacity: self.capacity_bytes.get(),
            arena_committed: self.committed_bytes.get(),
            high_water: self.high_water.get(),
            region_allocs: self.region_allocs.get(),
            overflow_allocs: self.overflow_allocs.get() + self.overflow_in_region(),
            spilled_allocs: self.spilled_allocs.get(),
            resizes: self.resizes.get(),
            resident_bytes: self.resident_granules.get() * GRANULE as u64,
            live_bytes: self.live_bytes(),
            given_back_granules: self.given_back_granules.get(),
            bound_closures: self.closures.get(),
            bytes_turned_away: self.bytes_turned_away.get(),
            bytes_routed_away: self.bytes_routed_away.get(),
        }
    }

    /// Units on the granule holding `addr`, the uncounted blocks' included (tests and
    /// invariant checks).
    pub fn live_at(&self, addr: usize) -> u64 {
        self.units(self.granule(addr))
    }

    /// `live(g)` plus the units the uncounted blocks will put on `g` (observation only: it does
    /// not flush, so that checking the invariants changes nothing).
    fn units(&self, g: usize) -> u64 {
        let mut extra = 0u64;
        self.for_each_uncounted(|hdr, end, _| {
            extra += (self.granule(hdr) == g) as u64 + (self.granule(end - 1) == g) as u64;
        });
        self.live(g).wrapping_add(extra)
    }

    /// `crossing_last(g)`, the uncounted blocks' included, for the checks: the crossing block
    /// starting in `g`, if there is one. When a block of the uncounted range starts in `g`
    /// (live or freed), the last such block decides: no block laid out before it can cross out
    /// of `g`. Otherwise the granule's crossing entry may be stale: it names the header of the
    /// last block counted in `g`, and when the bump pointer went back below that header (LIFO
    /// frees, a region end that keeps its run) newer blocks may lie over it. Their contents,
    /// read as a header, can pass for a crossing block of any size (the allocator only ever
    /// errs towards "covered" that way, keeping memory a while, never handing out live memory),
    /// so here an entry counts only when the block it names is consistent with the counts: its
    /// last granule holds a unit and the granules inside it none.
    fn crossing_last_or_uncounted(&self, g: usize) -> Option<usize> {
        let mut decided = None;
        self.walk_uncounted(self.uncounted.get(), self.top.get(), |hdr, end, tag| {
            if self.granule(hdr) == g {
                let last = self.granule(end - 1);
                let live = tag | 1 == TAG_SAMPLED;
                decided = Some((live && last > g).then_some(last));
            }
        });
        match decided {
            Some(found) => found,
            None => self.crossing_last(g).filter(|&last| {
                self.units(last) != 0 && (g + 1..last).all(|inner| self.units(inner) == 0)
            }),
        }
    }

    /// Calls `f(granule_start, blocks)` for every granule that was ever in a run, where
    /// `blocks` is the number of live blocks that touch the granule: its count, plus one when it
    /// lies strictly inside a block that spans granules (tests and invariant checks).
    pub fn for_each_granule(&self, mut f: impl FnMut(usize, u64)) {
        let units = |g| self.units(g);
        let crossing = |g| self.crossing_last_or_uncounted(g);
        self.walk_granules(self.used_end.get(), units, crossing, |g, units, covered| {
            // A block's last granule is counted, not "inside".
            let blocks = if units != 0 { units } else { covered as u64 };
            f(self.slot_base + (g << GRANULE_SHIFT), blocks);
        });
    }

    /// Bytes the current outermost region has used so far (the running high-water mark).
    pub fn current_peak(&self) -> usize {
        self.peak_bytes().saturating_add(self.spill_bytes.get())
    }

    /// Checks the structural invariants documented on [`Arena`]; returns the first violation.
    /// Cost is linear in the current run, so tests call it after every operation while debug
    /// builds check the O(1) part on every allocation.
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        self.check_bump()?;
        if self.for_each_uncounted(|_, _, _| {}).is_none() {
            return Err("the uncounted range is not a row of blocks ending at the bump pointer");
        }
        let (top, run_end) = (self.top.get(), self.run_end.get());
        let ahead = align_up(top, GRANULE);
        let mut result = Ok(());
        self.for_each_granule(|start, blocks| {
            if blocks != 0 && ahead <= start && start < run_end && result.is_ok() {
                result = Err("live block (or a crossing block's cover) ahead of the bump pointer");
            }
        });
        result?;
        // Every crossing entry of a granule with live blocks names a live header in it, or a block
        // another thread freed; interior granules count nothing.
        for g in self.granule(self.data_start)..self.granule(self.committed_end.get()) {
            if self.units(g) == 0 {
                continue;
            }
            if let Some(last) = self.crossing_last_or_uncounted(g) {
                for inner in g + 1..last {
                    if self.units(inner) != 0 {
                        return Err("a granule inside a crossing block is counted");
                    }
                }
                // Another thread may free the crossing block between the two reads: it writes
                // the freed tag before it adds its remote units, so a block whose last unit is
                // gone by now reads as freed when looked at again (Acquire on both sides).
                if self.units(last) == 0 && self.crossing_last_or_uncounted(g) == Some(last) {
                    return Err("the last granule of a crossing block is not counted");
                }
            }
        }
        let mut resident = 0;
        let run_lo = self.granule(self.run_start.get());
        let run_hi = self.granule(self.run_end.get());
        let mut result = Ok(());
        let units = |g| self.units(g);
        let crossing = |g| self.crossing_last_or_uncounted(g);
        self.walk_granules(
            self.committed_end.get(),
            units,
            crossing,
            |g, units, covered| {
                let live = units.max(covered as u64);
                // SAFETY: granule of this slot; owner thread.
                let touched = unsafe { *self.touched.add(g) } != 0;
                resident += touched as u64;
                let broken = if live > (GRANULE / MIN_ALIGN) as u64 * 64 {
                    Some("granule live count underflowed")
                } else if live != 0 && !touched {
                    Some("a live granule is not counted resident")
                } else if run_lo <= g && g < run_hi && !touched {
                    Some("a granule of the run is not counted resident")
                } else {
                    None
                };
                if let (Some(e), Ok(())) = (broken, &result) {
                    result = Err(e);
                }
            },
        );
        result?;
        if resident != self.resident_granules.get() {
            return Err("resident granule count out of step with the table");
        }
        Ok(())
    }

    /// The O(1) part of [`Arena::check_invariants`]: bounds, alignment, the fast-path limit, and
    /// the granule the bump pointer enters next.
    pub fn check_bump(&self) -> Result<(), &'static str> {
        let (top, run_start, run_end) = (self.top.get(), self.run_start.get(), self.run_end.get());
        if !(self.data_start <= run_start && run_start <= top && top <= run_end) {
            return Err("bump pointer outside its run");
        }
        let unc = self.uncounted.get();
        if unc > top || (unc != top && unc < run_start) {
            return Err("the uncounted range is not in the run below the bump pointer");
        }
        if run_end > self.committed_end.get() || self.committed_end.get() > self.slot_end {
            return Err("run or commit past the slot");
        }
        if top % MIN_ALIGN != 0 || run_end % GRANULE != 0 || self.cap_end.get() % GRANULE != 0 {
            return Err("misaligned bump pointer or boundary");
        }
        if self.limit.get() != self.fast_limit() {
            return Err("fast-path limit out of date");
        }
        if !self.limit.get().is_multiple_of(MIN_ALIGN) {
            return Err("fast-path limit not 16-byte aligned (the fast paths test rounded ends)");
        }
        let next = align_up(top, GRANULE);
        if next < run_end && self.units(self.granule(next)) != 0 {
            return Err("live block in the granule after the bump pointer's");
        }
        let below = self.below_top.get();
        if below != self.no_link() {
            if below < run_start || below + HEADER > top {
                return Err("the block below the bump pointer is not in the run below it");
            }
            // SAFETY: a header in the run (checked above); atomic for a concurrent remote free.
            let word = unsafe { (*(below as *const AtomicUsize)).load(Ordering::Relaxed) };
            let end = align_up(below + HEADER + word_size(word), MIN_ALIGN);
            if end > top {
                return Err("the block below the bump pointer ends past it");
            }
            // The LIFO free reads no tag: this block is live or freed by another thread.
            if word_tag(word) != TAG_LIVE && word_tag(word) != TAG_FREED_REMOTE {
                return Err("the block below the bump pointer is sampled or freed by its owner");
            }
        }
        Ok(())
    }

    /// Runs after every arena operation: the O(1) checks in debug builds, the full walk with the
    /// `check-invariants` feature (the test script turns it on), nothing in release builds.
    #[inline(always)]
    fn debug_check(&self) {
        if cfg!(feature = "check-invariants") {
            if let Err(e) = self.check_invariants() {
                invariant_broken(e);
            }
        } else if cfg!(debug_assertions) {
            if let Err(e) = self.check_bump() {
                invariant_broken(e);
            }
        }
    }
}

/// Bytes the arenas sent to the next allocator (predicted long, or turned away by the bound),
/// process-wide, for the front end's look at the next allocator's heap. Arenas add in batches
/// of `SENT_BATCH` so that the shared counter is rarely written.
static SENT_TO_NEXT: AtomicU64 = AtomicU64::new(0);
const SENT_BATCH: u64 = 1 << 20;

/// Bytes the arenas have sent to the next allocator so far (published in 1 MiB batches). Takes
/// no lock and allocates nothing: the malloc front end may call it from `free`.
pub fn bytes_sent_to_next() -> u64 {
    SENT_TO_NEXT.load(Ordering::Relaxed)
}

#[cold]
#[inline(never)]
fn invariant_broken(what: &str) -> ! {
    os::write_stderr(b"resizealloc: arena invariant broken: ");
    os::write_stderr(what.as_bytes());
    os::fatal(b"\n")
}

/// The resize policy, kept free of state so it can be tested on its own.
///
/// * **Grow to the peak at once**: a region that needed more than the capacity gets exactly its
///   peak (granule rounded), so the same work runs with zero overflow next time.
/// * **Shrink with hysteresis**: once `PEAK_HISTORY` (8) regions in a row peaked under a quarter
///   of the capacity, shrink to 1.25 × the largest of them (never below the initial capacity).
pub fn resize_policy(
    capacity: usize,
    peak: usize,
    recent_max: usize,
    seen: usize,
    min_capacity: usize,
) -> usize {
    if peak > capacity {
        return align_up(peak, GRANULE);
    }
    if seen >= PEAK_HISTORY && recent_max < capacity / 4 {
        let target = align_up(recent_max + recent_max / 4, GRANULE).max(min_capacity);
        if target < capacity {
            return target;
        }
    }
    capacity
}

#[cold]
#[inline(never)]
fn bad_free(double: bool) -> ! {
    if double {
        os::fatal(b"free(): double free detected in tcache 2 (resizealloc arena)\n")
    } else {
        os::fatal(b"free(): invalid pointer (resizealloc arena)\n")
    }
}
