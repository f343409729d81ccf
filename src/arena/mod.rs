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
//!
//! # Files
//! One concept per file, each an `impl Arena` block; this file holds the struct, its invariants
//! and the granule helpers every part uses.
//!
//! | file | concept |
//! |---|---|
//! | `create.rs` | construction in a fresh or reused slot |
//! | `fast.rs` | the allocation fast paths (mirrored in assembly, see [`asm_layout`]) |
//! | `slow.rs` | the allocation slow path, overflow and spill |
//! | `run.rs` | runs, commits and the fast paths' `limit` |
//! | `lap.rs` | laps: process mode's wrap-around |
//! | `header.rs` | the block header, its tags and the link |
//! | `uncounted.rs` | the uncounted range the fast path leaves |
//! | `counts.rs` | granule counts and the crossing table |
//! | `free.rs` | frees by the owner thread, double-free checks |
//! | `remote.rs` | frees by other threads |
//! | `realloc.rs` | `realloc` in place |
//! | `zeroed.rs` | `calloc` |
//! | `checkpoint.rs` | nested regions |
//! | `reset.rs` | the outermost region's end and the resize policy |
//! | `give_back.rs` | give-back and trim |
//! | `bound.rs` | the memory bound and its purge |
//! | `predict.rs` | predicted allocation |
//! | `sample.rs` | sampling and learning for the predictor |
//! | `orphan.rs` | thread exit: orphan, hand-on, adopt |
//! | `observe.rs` | figures for stats and introspection |
//! | `check.rs` | invariant checks |

mod bound;
mod check;
mod checkpoint;
mod counts;
mod create;
mod fast;
mod free;
mod give_back;
mod header;
mod lap;
mod observe;
mod orphan;
mod predict;
mod realloc;
mod remote;
mod reset;
mod run;
mod sample;
mod slow;
mod uncounted;
mod zeroed;

pub mod asm_layout;

pub use crate::layout::{
    block_align, is_small_request, GRANULE, GRANULE_SHIFT, HEADER, LINE, LINE_ALIGN_FROM, MIN_ALIGN,
};
pub use checkpoint::MAX_CHECKPOINTS;
pub use counts::MAX_SLOT;
pub use free::{WALK_STEPS, WALK_STEPS_SHORT};
pub use header::{LINE_GAP, TAG_BITS, TAG_FREED, TAG_GAP, TAG_LIVE};
pub use lap::LAP_EARLY_SPAN;
pub use observe::ArenaStats;
pub use orphan::WARM_BYTES;
pub use predict::{bytes_sent_to_next, Predicted};
pub use reset::{resize_policy, PEAK_HISTORY};
pub(crate) use run::GROW_LIMIT;

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::layout::align_up;
use crate::os;
use checkpoint::Checkpoint;
use sample::RING;

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
    /// its owner's free writes back the link it replaced, see `sampled_at`, or `no_link`), and
    /// then puts its own header here; a free at the bump pointer follows the links down over
    /// blocks their owner freed already (`release_top`).
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
    ///
    /// And a live, unsampled block of the uncounted range that ends at `top` (but for padding)
    /// is the one this names: every move that sets this to `no_link` leaves no such block
    /// (the range is empty, the block at `top` is sampled or freed, or `release_freed_tail`
    /// names the block it keeps), and a sampled block's free gives the link its sample word
    /// replaced back (`sampled_link`) or counts the range. So the uncounted free of any other
    /// block releases nothing at `top` (`free_uncounted`). Were it broken, a block would only
    /// wait for the range's end to be reused; the invariant walk checks it.
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
    /// Blocks in the uncounted range `[uncounted, top)` that their owner has not freed (a block
    /// another thread freed still counts). Zero says every block of the range is free: the
    /// owner's free that makes it zero takes the bump pointer back to `uncounted` at once,
    /// whatever the order of the frees, without walking the range (see
    /// `Arena::release_uncounted`). `malloc`'s and `free`'s assembly paths keep it too
    /// ([`asm_layout`]).
    live_uncounted: Cell<usize>,
    /// The last region ended with blocks of the uncounted range live, and left them uncounted
    /// (`Arena::carry_reset`); cleared when the range is counted or its last live block freed.
    carried: Cell<bool>,
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
    /// Where a walk down over freed blocks paused (see `release_freed_below`), or 0: the next
    /// allocation takes it on from there. Invariant: when not 0, `paused_at == top`,
    /// `below_top` is `no_link`, `limit` is 0 (every allocation takes the slow path, which
    /// finishes the walk first), `paused_link` is the header of a block of the current run its
    /// owner freed, and everything from that block up to `top` is blocks their owner freed and
    /// padding. Any other move of the bump pointer forgets it ([`Arena::forget_below_top`]).
    paused_at: Cell<usize>,
    paused_link: Cell<usize>,
    /// How many blocks a walk down over freed blocks goes before it pauses: `WALK_STEPS_SHORT`
    /// from each outermost region's start, `WALK_STEPS` once an allocation took a paused walk
    /// on (see `release_freed_below`).
    walk_steps: Cell<usize>,
    cap_end: Cell<usize>,
    committed_end: Cell<usize>,
    /// How far the owner has committed or is about to: `committed_end`, or more while a commit
    /// is in flight (stored before the `mprotect`, see `grow_commit`). The one field of the run
    /// another thread reads: the reservation's trim under a falling `RLIMIT_AS` keeps
    /// everything below it. Invariant: at least `committed_end`.
    pub(crate) reach: AtomicUsize,
    /// Highest `run_end` ever: granules past it were never used.
    used_end: Cell<usize>,
    slot_end: usize,
    /// Where the current outermost region started bumping.
    origin: Cell<usize>,
    /// Bytes of this region that had to be served by the next allocator.
    spill_bytes: Cell<usize>,
    /// Bytes this region jumped over (pinned granules and abandoned run tails).
    skipped: Cell<usize>,
    /// Markers mode: bytes of granules that blocks left by an earlier owner pinned inside the
    /// capacity when this thread adopted the arena. A region end plans for this much of its
    /// jumps (see `Arena::plan_round_inherited`); 0 in an arena its owner created or rebuilt.
    inherited_pins: Cell<usize>,
    peaks: [Cell<usize>; PEAK_HISTORY],
    peaks_seen: Cell<usize>,
    /// The least capacity the resize policy plans: the initial capacity, or more once
    /// [`Arena::plan_at_least`] raised it (an async worker's arena).
    min_capacity: Cell<usize>,
    recycle: bool,
    /// The user set size bounds: every allocation takes the slow path, which checks them.
    bounded: bool,
    /// Process mode: bytes of runs used since the bump pointer last wrapped.
    lap_progress: Cell<usize>,
    /// `region_allocs` when the uncounted range was last counted or a run began: the blocks
    /// handed out into the range since, against `live_uncounted`, say how much of it is dead
    /// (see `Arena::churned_behind`).
    allocs_at_count: Cell<u64>,
    /// Where the fast paths stop once in a region that kept a long run from the last one, so
    /// that the slow path looks whether the run churned through dead blocks and should lap
    /// (`Arena::look_at_churn`); `usize::MAX` when there is nothing to look at. Invariant:
    /// `limit <= lap_check`.
    lap_check: Cell<usize>,
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
    /// Markers mode: how often this region lapped at its capacity's end (bits 0-1, saturating
    /// at 3), how often the last one did (bits 2-3), and whether this one outgrew its plan by a
    /// near miss (bit 4); see `Arena::extend_past_plan`.
    capacity_laps: Cell<u8>,
    /// `remote_bytes` when the arena ran dry.
    dry_remote: Cell<u64>,
    /// Requests turned away since the closed arena last looked at its bound.
    turned_away: Cell<u32>,
    /// Granules owner frees may empty before the next look at the bound.
    emptied_left: Cell<usize>,
    /// Allocations through the predictor until the next [`Arena::periodic_look`].
    look_countdown: Cell<u32>,
    /// When the last periodic look ran (an [`os::monotonic_ms`] time; 0 before the first):
    /// what spaces the looks in time as well as in allocations.
    last_look_ms: Cell<u64>,
    /// Process mode: the largest request of [`LARGE`](crate::footprint::LARGE) or more this
    /// arena served (0 for none): the bound leaves room for holes between large blocks once it
    /// is not 0.
    largest_large: Cell<usize>,
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
    /// The header of the block sampled last when it was `below_top` (0 when it was not; after
    /// that block's free it may name a dead address, which no later sampled block matches
    /// without setting it anew), and the link its sample word replaced: its owner's free at
    /// `top` gives the link back, so that the bump pointer goes on down to the blocks below it
    /// as from any other block.
    sampled_at: Cell<usize>,
    sampled_link: Cell<usize>,
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

/// The whole pages inside `[start, end)`: `lo..hi`, empty (`hi <= lo`) when there is none.
#[inline]
fn whole_pages(start: usize, end: usize) -> (usize, usize) {
    (align_up(start, os::PAGE), end & !(os::PAGE - 1))
}

impl Arena {
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
}
