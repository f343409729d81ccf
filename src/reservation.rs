//! The process-wide address-space reservation that every arena is carved from.
//!
//! One `PROT_NONE` mapping, made on first use, split into equal power-of-two *slots*, one per
//! arena and aligned to their size. This gives the two properties the hot paths rely on:
//! "is this pointer ours?" is one subtraction and one compare ([`owns`]), and the arena of a
//! pointer is a mask ([`arena_of`]).
//!
//! The slot table is a bitmap under a spin lock: slots are taken when a thread first enters a
//! region and given back when an exited thread's last block is freed, both rare.
//!
//! The address space is held in steps that grow with use: the first use finds room for every
//! slot (one mapping, so that the range is free), keeps the first slot and gives the rest back;
//! each further slot is mapped in place when a thread first needs it (`MAP_FIXED_NOREPLACE`,
//! after a look at `RLIMIT_AS`). The kernel places other mappings from the top of a free range
//! down and the slots grow from its bottom up, so the two meet only when the range is full.
//! Everything in `[BASE, BASE + LEN)` stays mapped (a hole there could take a mapping of
//! someone else's, which [`owns`] would call ours), so space is given back only at the top:
//! when `RLIMIT_AS` falls below what is held ([`fit_address_limit`], from the preload
//! library's `setrlimit` and `prlimit`, and from the next slot's acquisition), the slots above
//! the last used one go, then the last used slot's tail above what its arena committed. The
//! reservation then grows no more; threads that find no slot pass their allocations through.
//!
//! Safe code cannot get hold of an arena, whose owner-only state two threads could otherwise
//! corrupt. Taking a slot is crate-private:
//!
//! ```compile_fail,E0603
//! let cfg = resizealloc::arena::ArenaConfig::default();
//! let arena = resizealloc::reservation::acquire_arena(1 << 30, 1 << 34, cfg);
//! ```
//!
//! building one is `unsafe` (its caller promises one owner thread):
//!
//! ```compile_fail,E0133
//! let cfg = resizealloc::arena::ArenaConfig::default();
//! let arena = resizealloc::arena::Arena::create(1 << 40, 1 << 30, cfg);
//! ```
//!
//! and the thread's own arena is only ever a raw pointer:
//!
//! ```compile_fail,E0133
//! if let resizealloc::router::Route::Arena(a) = resizealloc::router::route() {
//!     let p = (*a).alloc_slow(64, 16);
//! }
//! ```

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::arena::{self, Arena, ArenaConfig, ArenaStats};
use crate::os;
use crate::published::Published;

/// Slots beyond this many are never used (bitmap size).
pub const MAX_SLOTS: usize = 4096;

/// Start of the reservation; 0 until it exists.
pub static BASE: Published<AtomicUsize> = Published::new(AtomicUsize::new(0));
/// Length in bytes of the usable (slot-aligned) reservation; 0 until it exists.
pub static LEN: Published<AtomicUsize> = Published::new(AtomicUsize::new(0));
/// log2 of the slot size.
static SLOT_SHIFT: AtomicUsize = AtomicUsize::new(0);

/// Arenas without an owner that keep warm memory, at most: released arenas parked for the next
/// threads, and as many orphaned arenas adoptable with their warm start (see [`retire_arena`]).
/// Eight: a program that runs its short threads eight at a time then gives each new thread a
/// warm arena (the probe's `threads`, process mode: 234,000 -> 105,000 page faults, 550 ->
/// 420-470 ms; glibc 99,000 and 360-390 ms; peak RSS 175-190 -> 195 MiB, glibc's 195). They
/// hold at most 8 x 32 MiB for the purge delay in process mode, 8 x 512 KiB otherwise.
const WARM_MAX: usize = 8;
const _: () = assert!(MAX_SLOTS <= u16::MAX as usize, "parked slots are u16");

/// A released arena is parked only while it holds at most this much resident data: the warm
/// start an exiting thread keeps ([`arena::WARM_BYTES`]). One released by the last free of
/// another thread may hold more (the granules its survivors pinned); it goes back at once.
const PARKED_RESIDENT_MAX: u64 = arena::WARM_BYTES as u64;

/// One bit per slot.
type SlotBits = [u64; MAX_SLOTS / 64];

fn bit(bits: &SlotBits, i: usize) -> bool {
    bits[i / 64] & (1 << (i % 64)) != 0
}

fn set_bit(bits: &mut SlotBits, i: usize, on: bool) {
    if on {
        bits[i / 64] |= 1 << (i % 64);
    } else {
        bits[i / 64] &= !(1 << (i % 64));
    }
}

/// Slot table. Arenas whose owner exited are handed on instead of being built anew: a program
/// that starts short-lived threads one after another then has them reuse the warm pages, the
/// metadata and the slots of those that exited (as glibc's arenas are reused), instead of
/// faulting fresh pages and making a new arena's system calls each time (2.2 fresh page
/// faults per KiB of a short thread's temporaries; see BENCHMARKS.md).
struct SlotTable {
    /// Bit `i` set: slot `i` holds an arena (owned, orphaned or parked).
    used: SlotBits,
    /// Orphaned process-mode arenas, with live blocks: the next thread that wants an arena
    /// adopts one ([`Arena::adopt`]).
    adoptable: SlotBits,
    /// Adoptable arenas that kept their warm start ([`arena::WARM_BYTES`] resident). `n_warm`
    /// counts them and the places exiting threads took to join them (see `retire_arena`).
    warm: SlotBits,
    n_warm: usize,
    /// Released arenas (nothing live) kept with their warm start, `parked[..n_parked]`. Their
    /// figures are already in `retired`.
    parked: [u16; WARM_MAX],
    n_parked: usize,
    /// Slots mapped (the last one partly, after a trim).
    slots: usize,
    /// Slots the first reservation found room for: `slots` grows up to this many.
    max_slots: usize,
    /// Figures of arenas already released, so process totals never go backwards.
    retired: ArenaStats,
    init_failed: bool,
}

/// The lock yields the CPU while it waits (`sched_yield`), where a plain spin lock would spin:
/// its holders make system calls (a slot's decommit, a give-back) and may be descheduled, and
/// threads that start and exit together queue on it. The probe's `threads` (64 threads, 8 at a
/// time; 2 CPUs) spent 8 % of its CPU time spinning here (`perf`: `on_exit` and `ensure_arena`),
/// 1.3 % with the yield.
static TABLE: spin::mutex::SpinMutex<SlotTable, spin::relax::Yield> =
    spin::mutex::SpinMutex::new(SlotTable {
        used: [0; MAX_SLOTS / 64],
        adoptable: [0; MAX_SLOTS / 64],
        warm: [0; MAX_SLOTS / 64],
        n_warm: 0,
        parked: [0; WARM_MAX],
        n_parked: 0,
        slots: 0,
        max_slots: 0,
        retired: ArenaStats::ZERO,
        init_failed: false,
    });

/// Counts threads that wanted an arena and got none (reservation or slots exhausted).
pub static ARENA_DENIED: AtomicU64 = AtomicU64::new(0);

/// True when `p` lies in the reservation. Cheap enough for every `free`.
///
/// `LEN` is read first, with Acquire: it is published last, with Release, after `BASE` and
/// `SLOT_SHIFT`, so a thread that sees the reservation's length also sees its base. Reading
/// them the other way round could, on a weakly ordered CPU (aarch64), pair the new length with
/// the old zero base and accept every address below the length. (On x86-64 both are plain loads.)
#[inline(always)]
pub fn owns(p: *mut u8) -> bool {
    let len = LEN.load(Ordering::Acquire);
    (p as usize).wrapping_sub(BASE.load(Ordering::Relaxed)) < len
}

/// The arena that owns `p`.
///
/// # Safety
/// `owns(p)` is true and `p` is a live block (so its slot holds an arena).
#[inline(always)]
pub unsafe fn arena_of(p: *mut u8) -> &'static Arena {
    let shift = SLOT_SHIFT.load(Ordering::Relaxed);
    // SAFETY: a live block lies in a used slot, whose start holds its arena until the slot is
    // released, which happens only after every block in it was freed.
    unsafe { &*Arena::of(p as usize, 1usize << shift) }
}

/// Size of one slot (the largest an arena can grow to), once the reservation exists.
pub fn slot_size() -> usize {
    let shift = SLOT_SHIFT.load(Ordering::Relaxed);
    if shift == 0 {
        0
    } else {
        1 << shift
    }
}

/// Total reserved bytes (0 before first use).
pub fn reserved_bytes() -> usize {
    LEN.load(Ordering::Relaxed)
}

/// The smallest slot an arena can live in (metadata plus a few granules).
const MIN_SLOT: usize = 4 << 20;

fn init_locked(table: &mut SlotTable, slot_size: usize, reserve_bytes: usize) -> bool {
    if LEN.load(Ordering::Relaxed) != 0 {
        return true;
    }
    if table.init_failed {
        return false;
    }
    let (mut slot_size, mut reserve_bytes) = (slot_size, reserve_bytes);
    if let Some(budget) = os::address_space_budget() {
        // Under an address-space limit, reserve at most the budget (aligning the mapping costs
        // one more slot), with slots shrunk to fit at least one.
        reserve_bytes = reserve_bytes.min(budget / 2);
        while slot_size > MIN_SLOT && slot_size > reserve_bytes {
            slot_size /= 2;
        }
        if slot_size > reserve_bytes {
            table.init_failed = true;
            return false;
        }
    }
    let mut slots = (reserve_bytes / slot_size).clamp(1, MAX_SLOTS);
    while slots >= 1 {
        let len = slots * slot_size;
        if let Some(base) = os::reserve_aligned(len, slot_size) {
            // The range is free: keep its first slot, and map the others in place when they
            // are needed (see the module docs).
            if slots > 1 {
                // SAFETY: the part of the mapping just made past its first slot, holding nothing.
                unsafe { os::release(base + slot_size, len - slot_size) };
            }
            table.slots = 1;
            table.max_slots = slots;
            SLOT_SHIFT.store(slot_size.trailing_zeros() as usize, Ordering::Relaxed);
            BASE.atomic().store(base, Ordering::Relaxed);
            LEN.atomic().store(slot_size, Ordering::Release);
            return true;
        }
        slots /= 2;
    }
    table.init_failed = true;
    false
}

/// Maps the next slot in place, when the first reservation had room for it, the reservation
/// was never trimmed, and `RLIMIT_AS` leaves room for it: its index, else `None`.
fn grow_locked(table: &mut SlotTable) -> Option<usize> {
    if table.slots >= table.max_slots {
        return None;
    }
    let size = slot_size();
    let len = LEN.load(Ordering::Relaxed);
    if os::address_space_budget().is_some_and(|budget| len + size > budget) {
        return None;
    }
    let base = BASE.load(Ordering::Relaxed);
    if !os::reserve_at(base + len, size) {
        // Taken by another mapping: the reservation stays as it is.
        table.max_slots = table.slots;
        return None;
    }
    let i = table.slots;
    table.slots += 1;
    LEN.atomic().store(len + size, Ordering::Release);
    Some(i)
}

/// Gives back address space when `RLIMIT_AS` is `limit` (or, with `None`, the limit in force)
/// and the arenas hold more than their budget under it (an eighth): the slots above the last
/// used one, then that slot's tail above what its arena committed. The reservation grows no
/// more after a trim (see the module docs). Called before a limit is lowered (the preload
/// library's `setrlimit` and `prlimit`) and on the way to a new arena, which sees a limit
/// lowered any other way.
pub fn fit_address_limit(limit: Option<u64>) {
    if LEN.load(Ordering::Acquire) == 0 {
        return;
    }
    let Some(budget) = os::address_space_budget_under(limit) else {
        return;
    };
    let mut table = TABLE.lock();
    fit_locked(&mut table, budget);
}

fn fit_locked(table: &mut SlotTable, budget: usize) {
    let len = LEN.load(Ordering::Relaxed);
    if len == 0 || len <= budget {
        return;
    }
    let base = BASE.load(Ordering::Relaxed);
    let size = slot_size();
    table.max_slots = table.slots;
    let Some(top) = (0..table.slots).rev().find(|&i| bit(&table.used, i)) else {
        // No arena: everything goes, and no arena is made again.
        LEN.atomic().store(0, Ordering::Release);
        // SAFETY: the whole reservation, holding no arena.
        unsafe { os::release(base, len) };
        table.slots = 0;
        table.init_failed = true;
        return;
    };
    let keep = (top + 1) * size;
    if keep < len {
        LEN.atomic().store(keep, Ordering::Release);
        // SAFETY: slots above the last used one, holding nothing; `LEN` no longer covers them.
        unsafe { os::release(base + keep, len - keep) };
        table.slots = top + 1;
    }
    if keep <= budget {
        return;
    }
    // The last used slot's tail: its arena may grow at any time, without the lock. The limit
    // first, then its reach (both sequentially consistent; `grow_commit` stores and loads them
    // in the other order): whatever it commits from now on stays below what is kept.
    // The end of what is mapped now: never more (a trim before may have cut the slot short).
    let mapped_end = base + LEN.load(Ordering::Relaxed);
    let slot = base + top * size;
    crate::arena::GROW_LIMIT.store(slot, Ordering::SeqCst);
    // SAFETY: a used slot holds an arena, and its release needs the lock we hold.
    let arena = unsafe { &*(slot as *const Arena) };
    let end = crate::layout::align_up(arena.reach.load(Ordering::SeqCst), crate::layout::GRANULE)
        .min(mapped_end);
    crate::arena::GROW_LIMIT.store(end, Ordering::SeqCst);
    if end < mapped_end {
        LEN.atomic().store(end - base, Ordering::Release);
        // SAFETY: past everything the last arena committed or is committing, holding nothing;
        // `LEN` no longer covers it.
        unsafe { os::release(end, mapped_end - end) };
    }
}

/// Takes a free slot and builds an arena in it. Reserves the address space on first use.
/// Returns `None` when no arena can be had; the caller then passes allocations through.
/// Crate-private: the arena it returns belongs to the calling thread (see `region/`), and its
/// owner-only methods must never be reached from another thread.
pub(crate) fn acquire_arena(
    slot_size: usize,
    reserve_bytes: usize,
    cfg: ArenaConfig,
) -> Option<&'static Arena> {
    let mut table = TABLE.lock();
    if !init_locked(&mut table, slot_size, reserve_bytes) {
        ARENA_DENIED.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    // A limit lowered since the last look (by a system call the preload library does not see).
    if let Some(budget) = os::address_space_budget() {
        fit_locked(&mut table, budget);
        if LEN.load(Ordering::Relaxed) == 0 {
            ARENA_DENIED.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    }
    let slot_size = 1usize << SLOT_SHIFT.load(Ordering::Relaxed);
    let base = BASE.load(Ordering::Relaxed);
    // Arenas without an owner first: orphans with warm memory (their slots and pinned
    // granules get used again), then released ones (warm), then the other orphans.
    if let Some(arena) = adopt_locked(&mut table, &cfg, true) {
        return Some(arena);
    }
    if table.n_parked > 0 {
        table.n_parked -= 1;
        let i = table.parked[table.n_parked] as usize;
        // SAFETY: a parked slot holds a released arena (see `release_locked`): its owner
        // exited, nothing in it is live and no thread uses it; the slot stays ours (its bit is
        // set).
        let arena = unsafe { Arena::reuse(&*((base + i * slot_size) as *const Arena), cfg) };
        arena.slot_index.store(i, Ordering::Relaxed);
        return Some(arena);
    }
    if let Some(arena) = adopt_locked(&mut table, &cfg, false) {
        return Some(arena);
    }
    let free = (0..table.slots).find(|&i| !bit(&table.used, i));
    if let Some(i) = free.or_else(|| grow_locked(&mut table)) {
        // SAFETY: slot `i` is unused, aligned to `slot_size` and inside the reservation (the
        // last one may be cut short by a trim: its arena's commits stop at `GROW_LIMIT`).
        let arena = unsafe { Arena::create(base + i * slot_size, slot_size, cfg) }?;
        set_bit(&mut table.used, i, true);
        arena.slot_index.store(i, Ordering::Relaxed);
        return Some(arena);
    }
    ARENA_DENIED.fetch_add(1, Ordering::Relaxed);
    None
}

/// The calling thread is exiting and owns `arena`: hands it over. An arena with nothing live
/// is released at once (and parked with its warm start while there is room); one with live
/// blocks waits for its last free by another thread, and if it is `adoptable`
/// ([`Arena::may_hand_on_live`]) it is offered for adoption meanwhile, keeping its warm start while
/// fewer than [`WARM_MAX`] orphans do.
///
/// # Safety
/// `arena` came from [`acquire_arena`] and the calling thread owns it; it never uses it again.
pub(crate) unsafe fn retire_arena(arena: &'static Arena, adoptable: bool) {
    let i = arena.slot_index.load(Ordering::Relaxed);
    let empty = arena.nothing_live();
    // An orphan that keeps warm memory takes one of the `n_warm` places now; it is marked
    // `warm` (which `trim_unowned` looks at) only once orphaned, below.
    let (keep_warm, warm_place) = {
        let mut table = TABLE.lock();
        if empty {
            (table.n_parked < WARM_MAX, false)
        } else if adoptable && table.n_warm < WARM_MAX {
            table.n_warm += 1;
            (true, true)
        } else {
            (false, false)
        }
    };
    // The system calls of the give-back run without the lock.
    let waits = arena.prepare_orphan(keep_warm);
    let mut table = TABLE.lock();
    // Under the lock: a free that releases the arena from now on waits for it, and then finds
    // the bits set below.
    if arena.complete_orphan() {
        if warm_place {
            table.n_warm -= 1;
        }
        // SAFETY: we won the release claim: the owner (us) is gone and nothing is live.
        unsafe { release_locked(&mut table, arena) };
    } else if adoptable {
        set_bit(&mut table.adoptable, i, true);
        set_bit(&mut table.warm, i, warm_place);
        if waits && warm_place {
            // Once listed, under the lock that `expire_unowned` holds while it clears and
            // scans: noted before, a scan running meanwhile could miss the arena and forget
            // its time.
            note_warm_until(arena.warm_until_ms());
        }
    }
    drop(table);
    expire_unowned_if_due();
}

/// Adopts an orphaned arena offered for adoption (only one that kept warm memory, with
/// `warm_only`): the calling thread becomes its owner.
fn adopt_locked(
    table: &mut SlotTable,
    cfg: &ArenaConfig,
    warm_only: bool,
) -> Option<&'static Arena> {
    let base = BASE.load(Ordering::Relaxed);
    let size = slot_size();
    for w in 0..table.slots.div_ceil(64) {
        let mut candidates = table.adoptable[w] & if warm_only { table.warm[w] } else { !0 };
        while candidates != 0 {
            let i = w * 64 + candidates.trailing_zeros() as usize;
            candidates &= candidates - 1;
            // Adopted or not, it is no longer offered: it is ours now, being released by its
            // last free, or configured for another mode.
            set_bit(&mut table.adoptable, i, false);
            if bit(&table.warm, i) {
                set_bit(&mut table.warm, i, false);
                table.n_warm -= 1;
            }
            // SAFETY: an adoptable slot holds an orphaned arena (see `retire_arena`), not
            // released (release clears the bit under the lock we hold).
            let arena = unsafe { &*((base + i * size) as *const Arena) };
            // SAFETY: as just said; we hold the table lock.
            if unsafe { arena.adopt(cfg) } {
                return Some(arena);
            }
        }
    }
    None
}

/// Releases the slot of an arena with no live blocks and an owner that has exited.
///
/// # Safety
/// `arena` came from [`acquire_arena`], its owner has exited and no block of it is live
/// (the caller won [`Arena::free_remote`]'s release claim).
pub(crate) unsafe fn release_arena(arena: &'static Arena) {
    let mut table = TABLE.lock();
    // SAFETY: obligation, passed on.
    unsafe { release_locked(&mut table, arena) };
}

/// [`release_arena`] with the table locked: parks the arena for the next thread that wants one
/// while there is room and it holds little memory, otherwise gives its memory back and frees
/// the slot.
///
/// # Safety
/// As [`release_arena`].
unsafe fn release_locked(table: &mut SlotTable, arena: &'static Arena) {
    let i = arena.slot_index.load(Ordering::Relaxed);
    set_bit(&mut table.adoptable, i, false);
    if bit(&table.warm, i) {
        set_bit(&mut table.warm, i, false);
        table.n_warm -= 1;
    }
    let stats = arena.stats();
    add_stats(&mut table.retired, &stats);
    // One that kept more for the purge delay is parked too (`expire_unowned_if_due`).
    let waits = arena.warm_until_ms() != 0;
    if table.n_parked < WARM_MAX && (stats.resident_bytes <= PARKED_RESIDENT_MAX || waits) {
        let n = table.n_parked;
        table.parked[n] = i as u16;
        table.n_parked = n + 1;
        if waits {
            // Listed, under the lock (see `retire_arena`).
            note_warm_until(arena.warm_until_ms());
        }
        return;
    }
    // SAFETY: obligation, passed on.
    unsafe { free_slot_locked(table, arena) };
}

/// The earliest time (`os::monotonic_ms`) at which an arena without an owner gives back the
/// free memory it kept past its warm start for the purge delay (see `Arena::prepare_orphan`);
/// 0 when none waits. It may name an arena a thread has taken since (which then gives its
/// memory back itself): the next look finds nothing due and sets it anew.
static WARM_UNTIL: AtomicU64 = AtomicU64::new(0);

fn note_warm_until(at: u64) {
    if at == 0 {
        return;
    }
    let mut cur = WARM_UNTIL.load(Ordering::Relaxed);
    while cur == 0 || at < cur {
        match WARM_UNTIL.compare_exchange_weak(cur, at, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => cur = now,
        }
    }
}

/// Gives back what arenas without an owner kept for the purge delay, once its time has come:
/// called by process mode's periodic looks (any thread's) and at thread exits. One load while
/// none waits.
#[inline]
pub fn expire_unowned_if_due() {
    let at = WARM_UNTIL.load(Ordering::Relaxed);
    if at != 0 {
        expire_unowned(at);
    }
}

#[cold]
#[inline(never)]
fn expire_unowned(at: u64) {
    let now = os::monotonic_ms();
    if now < at {
        return;
    }
    // Never waits on the lock from an allocation path: a thread holding it is starting or
    // exiting, and the next look will do.
    let Some(table) = TABLE.try_lock() else {
        return;
    };
    WARM_UNTIL.store(0, Ordering::Relaxed);
    let base = BASE.load(Ordering::Relaxed);
    let size = slot_size();
    let mut next = 0u64;
    let parked = table.parked[..table.n_parked].iter().map(|&i| i as usize);
    let warm = (0..table.slots).filter(|&i| bit(&table.warm, i));
    for i in parked.chain(warm) {
        // SAFETY: a parked slot holds a released arena nobody uses, a warm one an orphan not
        // released (release clears the bit under the lock we hold); nobody takes either while
        // we hold the lock.
        let arena = unsafe { &*((base + i * size) as *const Arena) };
        let until = arena.warm_until_ms();
        if until == 0 {
            continue;
        }
        if until <= now {
            // SAFETY: as just said.
            unsafe { arena.give_back_past_warm_start() };
        } else if next == 0 || until < next {
            next = until;
        }
    }
    drop(table);
    if next != 0 {
        note_warm_until(next);
    }
}

/// Gives back the warm memory of arenas without an owner: frees every parked arena's slot and
/// discards the warm start of adoptable ones (`malloc_trim`, `resizealloc::trim`).
pub fn trim_unowned() {
    let mut table = TABLE.lock();
    let base = BASE.load(Ordering::Relaxed);
    let size = slot_size();
    while table.n_parked > 0 {
        table.n_parked -= 1;
        let i = table.parked[table.n_parked] as usize;
        // SAFETY: a parked slot holds a released arena nobody uses (see `release_locked`).
        unsafe { free_slot_locked(&mut table, &*((base + i * size) as *const Arena)) };
    }
    for i in 0..table.slots {
        if bit(&table.warm, i) {
            set_bit(&mut table.warm, i, false);
            table.n_warm -= 1;
            // SAFETY: a warm slot holds an orphaned arena not released (release clears the
            // bit under the lock we hold), and nobody adopts it while we hold the lock.
            unsafe { (*((base + i * size) as *const Arena)).give_back_orphaned() };
        }
    }
}

/// Gives the memory of a released arena back and marks its slot unused.
///
/// # Safety
/// As [`release_arena`]; `table` is the locked slot table.
unsafe fn free_slot_locked(table: &mut SlotTable, arena: &'static Arena) {
    let i = arena.slot_index.load(Ordering::Relaxed);
    let base = arena.slot_base();
    // The mapped part of the slot (the last one may have been cut short by a trim).
    let size = (1usize << SLOT_SHIFT.load(Ordering::Relaxed))
        .min(BASE.load(Ordering::Relaxed) + LEN.load(Ordering::Relaxed) - base);
    let committed_end = arena.committed_end();
    // SAFETY: obligation: nothing in the slot is live, and we hold the table lock so no stats
    // reader is looking at the arena while its memory goes away.
    if !unsafe { os::decommit(base, size) } {
        // Locked memory: the kernel kept the pages, readable and writable. The next arena in
        // this slot relies on reading zeros (its tables, and memory it takes as fresh), as after
        // a decommit: clear what this one used.
        // SAFETY: `[base, committed_end)` is this slot's committed memory and nothing in it is
        // live (obligation).
        unsafe { core::ptr::write_bytes(base as *mut u8, 0, committed_end - base) };
    }
    set_bit(&mut table.used, i, false);
}

fn add_stats(sum: &mut ArenaStats, s: &ArenaStats) {
    sum.arena_capacity += s.arena_capacity;
    sum.arena_committed += s.arena_committed;
    sum.high_water += s.high_water;
    sum.region_allocs += s.region_allocs;
    sum.overflow_allocs += s.overflow_allocs;
    sum.spilled_allocs += s.spilled_allocs;
    sum.resizes += s.resizes;
    sum.resident_bytes += s.resident_bytes;
    // Read from other threads, live bytes can be momentarily off; never let a sum wrap.
    sum.live_bytes = sum.live_bytes.saturating_add(s.live_bytes);
    sum.given_back_granules += s.given_back_granules;
    sum.bound_closures += s.bound_closures;
    sum.bytes_turned_away += s.bytes_turned_away;
    sum.bytes_routed_away += s.bytes_routed_away;
}

/// Sums of every arena, live or orphaned, plus the released ones' counters (a parked arena
/// adds only the memory it keeps: resident and committed bytes).
/// Returns `(live sums, retired sums, live arenas, orphaned arenas)`.
pub fn totals() -> (ArenaStats, ArenaStats, u64, u64) {
    let table = TABLE.lock();
    let mut live = ArenaStats::default();
    let (mut n_live, mut n_orphaned) = (0, 0);
    let base = BASE.load(Ordering::Relaxed);
    let size = slot_size();
    for i in 0..table.slots {
        if bit(&table.used, i) {
            // SAFETY: a used slot holds an arena, and release needs the lock we hold.
            let arena = unsafe { &*((base + i * size) as *const Arena) };
            let stats = arena.stats();
            if table.parked[..table.n_parked].contains(&(i as u16)) {
                // Its figures are retired; only the memory it keeps is still the process's.
                live.resident_bytes += stats.resident_bytes;
                live.arena_committed += stats.arena_committed;
                continue;
            }
            add_stats(&mut live, &stats);
            if arena.is_orphaned() {
                n_orphaned += 1;
            } else {
                n_live += 1;
            }
        }
    }
    let mut retired = table.retired;
    retired.arena_capacity = 0;
    retired.arena_committed = 0;
    retired.high_water = 0;
    retired.resident_bytes = 0;
    retired.live_bytes = 0;
    (live, retired, n_live, n_orphaned)
}

/// Fork support: hold the table lock across `fork` so the child never inherits it locked by a
/// thread that does not exist there. False when it could not be had in time (see `fork.rs`).
pub fn fork_prepare() -> bool {
    crate::fork::wait_for(|| TABLE.try_lock().map(core::mem::forget).is_some())
}

/// Fork support: the parent and the child both release the lock taken in [`fork_prepare`].
///
/// # Safety
/// Called once after a [`fork_prepare`] that returned true, by the thread that called it (or
/// its copy in the child): the lock is then held by that call and nobody else. Or in a child
/// whose only thread is that copy, to reset the lock.
pub unsafe fn fork_finish() {
    // SAFETY: the caller's obligation: the lock is held by our own `fork_prepare`.
    unsafe { TABLE.force_unlock() };
}
