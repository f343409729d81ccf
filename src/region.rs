//! Per-thread region state: the nesting depth, the thread's arena, and whether allocations go
//! to it right now. Region markers, the closure form and the guard live here.
//!
//! The thread state is a `thread_local!` with a `const` initialiser and no `Drop`, so touching it
//! never allocates and registers no TLS destructor (which could allocate and recurse). Thread
//! exit is caught by a pthread key destructor instead, which orphans the arena: it stays until
//! its last block is freed, by any thread.

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr;
use core::sync::atomic::{AtomicU8, Ordering};

use crate::arena::{Arena, ArenaConfig};
use crate::options::{self, RegionMode};
use crate::published::Published;
use crate::reservation;
use crate::slab;

/// The thread is inside arena acquisition: allocations made there go to the next allocator.
const BUSY: u8 = 1;
/// The thread's exit destructor ran: never route to an arena again.
const DEAD: u8 = 2;
/// Process mode: the thread has joined its implicit, never-ending outer region.
const JOINED: u8 = 4;
/// Acquiring an arena failed once: do not retry on every allocation.
const DENIED: u8 = 8;

/// One thread's region state.
///
/// `active` is null (the thread has not been routed yet: look at the mode), [`SETTLED`] (outside
/// any region, mode known: straight to the next allocator), or the thread's arena.
/// Invariant: when it is an arena it equals `arena`; it is an arena exactly while the thread is
/// inside a region (explicit, or process mode) and holds an arena.
#[repr(C)]
pub struct ThreadState {
    /// Offset 0 (read directly by `load_active` on x86-64 Linux).
    active: Cell<*const Arena>,
    /// Offset 8 (read directly by `load_own`).
    arena: Cell<*const Arena>,
    /// Offset 16 ([`FREE_ARENA_OFFSET`]): `arena`, or [`NO_ARENA`] when that is null. Never
    /// null, so that `free`'s assembly entry point (preload/src/malloc.rs) reads its words
    /// without a null test first. Invariant: set with `arena`, by `set_arena`.
    #[cfg_attr(
        not(all(
            target_arch = "x86_64",
            target_os = "linux",
            not(feature = "tls-thread-local")
        )),
        allow(dead_code)
    )]
    free_arena: Cell<*const Arena>,
    depth: Cell<u32>,
    flags: Cell<u8>,
    /// Process mode: frees to the next allocator left before the next sampled one.
    next_frees_left: Cell<u32>,
    /// Process mode: estimated bytes freed to the next allocator, not yet added to the front
    /// end's process-wide count.
    next_freed_bytes: Cell<u64>,
    /// The thread's small-block heap (slab.rs), or null until it needs one.
    heap: Cell<*mut slab::Heap>,
}

impl ThreadState {
    /// The TLS block's image (`resizealloc_thread_state` below, x86-64 Linux) is this value
    /// written out by hand: zero bytes but for `free_arena`. A change here must be made there.
    #[cfg_attr(
        all(
            target_arch = "x86_64",
            target_os = "linux",
            not(feature = "tls-thread-local")
        ),
        allow(dead_code)
    )]
    const fn new() -> Self {
        ThreadState {
            active: Cell::new(ptr::null()),
            arena: Cell::new(ptr::null()),
            free_arena: Cell::new(no_arena()),
            depth: Cell::new(0),
            flags: Cell::new(0),
            next_frees_left: Cell::new(0),
            next_freed_bytes: Cell::new(0),
            heap: Cell::new(ptr::null_mut()),
        }
    }

    /// Sets the thread's own arena (or none: null), and `free_arena` with it.
    fn set_arena(&self, arena: *const Arena) {
        self.arena.set(arena);
        self.free_arena
            .set(if arena.is_null() { no_arena() } else { arena });
    }
}

/// What `free_arena` names for a thread with no arena: 128 bytes, every word 1. The words at
/// the offsets `free`'s entry point reads (`asm_layout::BELOW_TOP` and `UNCOUNTED`) are then 1,
/// the address of no block header (they lie in the arena reservation), so its LIFO test fails
/// and the free goes on to `free_arena_block_other`, which sees this address and takes the
/// slow path.
#[repr(C, align(64))]
pub struct NoArena([usize; 16]);

/// See [`NoArena`].
pub static NO_ARENA: NoArena = NoArena([1; 16]);

const _: () = assert!(
    crate::arena::asm_layout::BELOW_TOP < core::mem::size_of::<NoArena>()
        && crate::arena::asm_layout::UNCOUNTED < core::mem::size_of::<NoArena>(),
    "NO_ARENA must cover the words free's entry point reads"
);

/// [`NO_ARENA`] as an arena pointer: compared, never dereferenced as an `Arena`.
pub const fn no_arena() -> *const Arena {
    &NO_ARENA as *const NoArena as *const Arena
}

#[cfg(not(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
)))]
thread_local! {
    static STATE: ThreadState = const { ThreadState::new() };
}

/// The calling thread's state. Valid for as long as the thread runs (TLS destructors included:
/// the state has none of its own).
#[cfg(not(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
)))]
#[inline(always)]
pub fn state() -> &'static ThreadState {
    // SAFETY: the reference never leaves the thread (ThreadState is !Sync) and const,
    // drop-free thread locals live until the thread's stack and TLS block are gone.
    STATE.with(|s| unsafe { &*(s as *const ThreadState) })
}

// On x86-64 Linux the state lives in a static TLS block of our own, reached with the
// initial-exec model: two instructions, no `__tls_get_addr` call even inside a shared library
// (stable Rust cannot ask for that model), and no allocation on first touch. Its initial image
// is `ThreadState::new()`: zero bytes (null pointers, depth 0, no flags) but for `free_arena`,
// which names `NO_ARENA` (the dynamic linker relocates the image before any thread copies it).
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
core::arch::global_asm!(
    ".pushsection .tdata,\"awT\",@progbits",
    ".p2align 6",
    ".globl resizealloc_thread_state",
    ".hidden resizealloc_thread_state",
    ".type resizealloc_thread_state,@object",
    ".size resizealloc_thread_state,64",
    "resizealloc_thread_state:",
    ".zero {free_arena}",
    ".quad {no_arena}",
    ".zero 64 - {free_arena} - 8",
    ".popsection",
    free_arena = const FREE_ARENA_OFFSET,
    no_arena = sym NO_ARENA,
);

#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
const _: () = assert!(
    core::mem::size_of::<ThreadState>() <= 64 && core::mem::align_of::<ThreadState>() <= 64
);

/// The calling thread's state. Valid for as long as the thread runs (TLS destructors included:
/// the state has none of its own).
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
#[inline(always)]
pub fn state() -> &'static ThreadState {
    let p: usize;
    // SAFETY: reads the thread pointer and the GOT's TLS offset of our own TLS symbol; no
    // memory is written. The result is this thread's 64-byte, 64-aligned block, a copy of
    // `ThreadState::new()` at thread start (the block's image), which only this thread touches
    // (ThreadState is !Sync).
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr [rip + resizealloc_thread_state@GOTTPOFF]",
            "add {p}, qword ptr fs:[0]",
            p = out(reg) p,
            options(pure, readonly, nostack),
        );
        &*(p as *const ThreadState)
    }
}

// ------------------------------------------------------------------------------ global mode

/// `MODE_*` bits: zero means "markers decide" and lets the pass-through path skip any work.
pub(crate) static MODE: AtomicU8 = AtomicU8::new(MODE_UNINIT);
pub(crate) const MODE_MARKERS: u8 = 0;
pub(crate) const MODE_UNINIT: u8 = 1;
pub(crate) const MODE_PROCESS: u8 = 2;
pub(crate) const MODE_OFF: u8 = 4;
/// Modes the pass-through allocation path must look at.
pub(crate) const MODE_ATTENTION: u8 = MODE_UNINIT | MODE_PROCESS;

/// Frees that go to the next allocator need a look when this is not zero: `WATCH_PROCESS`
/// while the mode is process mode (they are sampled), `WATCH_FRONT_END` once a front end asked
/// (it served blocks itself that must not reach the next allocator). Zero otherwise, so the
/// pass-through `free` costs one load and one test beyond the range check (the preload
/// library's `free` reads it from assembly, hence public, read-only outside the crate).
pub static FOREIGN_WATCH: Published<AtomicU8> = Published::new(AtomicU8::new(0));
pub(crate) const WATCH_PROCESS: u8 = 1;
pub(crate) const WATCH_FRONT_END: u8 = 2;
/// The small-block heap (slab.rs) exists: its blocks must not reach the next allocator.
pub(crate) const WATCH_SLAB: u8 = 4;

/// Called when the small-block heap makes its reservation, before its first block is handed out.
pub(crate) fn watch_slab_frees() {
    FOREIGN_WATCH
        .atomic()
        .fetch_or(WATCH_SLAB, Ordering::Relaxed);
}

/// One free to the next allocator in this many is sampled (see `router::note_next_free`).
pub const NEXT_FREE_SAMPLE: u32 = 16;
/// A thread adds its estimate of bytes freed to the next allocator to the front end's count in
/// batches of this many.
pub const NEXT_FREED_BATCH: u64 = 4 << 20;

/// Counts one free to the next allocator; true for one in [`NEXT_FREE_SAMPLE`].
#[inline(always)]
pub(crate) fn count_next_free() -> bool {
    let ts = state();
    let left = ts.next_frees_left.get();
    if left > 1 {
        ts.next_frees_left.set(left - 1);
        return false;
    }
    ts.next_frees_left.set(NEXT_FREE_SAMPLE);
    true
}

/// Adds `bytes` to the calling thread's estimate of bytes freed to the next allocator; returns
/// a batch of at least [`NEXT_FREED_BATCH`] bytes (and starts over) when there is one.
pub fn add_next_freed(bytes: u64) -> Option<u64> {
    let ts = state();
    let sum = ts.next_freed_bytes.get() + bytes;
    if sum < NEXT_FREED_BATCH {
        ts.next_freed_bytes.set(sum);
        return None;
    }
    ts.next_freed_bytes.set(0);
    Some(sum)
}

/// Called by [`options::set`].
pub(crate) fn mode_changed(m: RegionMode) {
    let bits = match m {
        RegionMode::Markers => MODE_MARKERS,
        RegionMode::Process => MODE_PROCESS,
        RegionMode::Off => MODE_OFF,
    };
    MODE.store(bits, Ordering::Relaxed);
    if bits & MODE_PROCESS != 0 {
        FOREIGN_WATCH
            .atomic()
            .fetch_or(WATCH_PROCESS, Ordering::Relaxed);
    } else {
        FOREIGN_WATCH
            .atomic()
            .fetch_and(!WATCH_PROCESS, Ordering::Relaxed);
    }
}

extern "C" {
    /// glibc's environment pointer: null until libc has initialised itself.
    static environ: *const *const libc::c_char;
}

/// The mode, reading the environment first if nobody has yet. While libc is still starting
/// (no `environ` yet) it answers "markers" without deciding, and asks again next time.
#[inline]
pub(crate) fn mode() -> u8 {
    let m = MODE.load(Ordering::Relaxed);
    if m == MODE_UNINIT {
        return mode_first_look();
    }
    m
}

/// [`mode`] before anyone read the options: out of line, so that callers need no stack frame
/// for it.
#[cold]
#[inline(never)]
fn mode_first_look() -> u8 {
    // SAFETY: reading a pointer-sized libc global; a torn read is impossible on our targets.
    if unsafe { environ.is_null() } {
        return MODE_MARKERS;
    }
    options::init_from_env();
    MODE.load(Ordering::Relaxed)
}

/// True once the options were read (lazily or by [`options::init_from_env`]).
pub fn options_ready() -> bool {
    MODE.load(Ordering::Relaxed) != MODE_UNINIT
}

// ------------------------------------------------------------------------------ arena routing

/// True when the thread state lives in the initial-exec TLS block `resizealloc_thread_state`
/// (x86-64 Linux without the `tls-thread-local` feature), which the preload library's `malloc`
/// entry point reads from assembly. The preload library checks at compile time that it agrees:
/// Cargo can turn on this crate's feature without the preload library's.
pub const STATE_IN_TLS_BLOCK: bool = cfg!(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
));

/// `ThreadState::active` of a thread outside regions whose mode is known: allocations go straight
/// to the next allocator, without looking at the global mode.
pub const SETTLED: *const Arena = SETTLED_BITS as *const Arena;
/// [`SETTLED`] as an integer, for assembly that tests `ThreadState::active` (the preload
/// library's `malloc` entry point).
pub const SETTLED_BITS: usize = 1;

/// `ThreadState::active` of a thread whose allocations go through the lifetime predictor to its
/// arena (`ThreadState::arena`): process mode, and regions of an arena whose regions leave blocks
/// behind (see lifetime.rs).
pub const PREDICT: *const Arena = PREDICT_BITS as *const Arena;
/// [`PREDICT`] as an integer: every larger `active` value is an arena (see [`is_arena`]).
pub const PREDICT_BITS: usize = 2;

/// True when an `active` value is an arena (not null, not [`SETTLED`], not [`PREDICT`]).
#[inline(always)]
pub fn is_arena(a: *const Arena) -> bool {
    a as usize > PREDICT as usize
}

/// The arena allocations should go to through the predictor now, or null.
#[inline(always)]
pub(crate) fn predicted_arena(ts: &ThreadState) -> *const Arena {
    if ts.active.get() == PREDICT {
        ts.arena.get()
    } else {
        ptr::null()
    }
}

/// True while the thread is inside a region (explicit, or process mode) with an arena, whether
/// or not its allocations go through the predictor.
#[inline(always)]
pub(crate) fn in_arena_region(ts: &ThreadState) -> bool {
    is_arena(ts.active.get()) || ts.active.get() == PREDICT
}

/// The arena allocations should go to now, or null.
#[inline(always)]
pub(crate) fn active_arena(ts: &ThreadState) -> *const Arena {
    let a = ts.active.get();
    if is_arena(a) {
        a
    } else {
        ptr::null()
    }
}

/// What `active` becomes when the thread leaves its regions: [`SETTLED`] once the mode is known
/// (markers or off), else null so that the next allocation looks at the mode again.
fn outside_value() -> *const Arena {
    if MODE.load(Ordering::Relaxed) & (MODE_UNINIT | MODE_PROCESS) == 0 {
        SETTLED
    } else {
        ptr::null()
    }
}

/// Marks the calling thread as routed to the next allocator while outside regions (called by
/// the router once it has looked at the mode).
pub(crate) fn settle_outside() {
    let ts = state();
    if ts.active.get().is_null() {
        ts.active.set(outside_value());
    }
}

/// The calling thread's arena (in a region or not), or null.
#[inline(always)]
pub(crate) fn own_arena(ts: &ThreadState) -> *const Arena {
    ts.arena.get()
}

/// The raw `active` value (null, [`SETTLED`] or an arena) in one fs-relative load (x86-64
/// Linux), else through `state()`.
#[inline(always)]
pub(crate) fn load_active() -> *const Arena {
    #[cfg(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    ))]
    return load_state_word::<0>();
    #[cfg(not(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    )))]
    return state().active.get();
}

/// `own_arena(state())` in one fs-relative load (x86-64 Linux), else through `state()`.
#[inline(always)]
pub(crate) fn load_own() -> *const Arena {
    #[cfg(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    ))]
    return load_state_word::<OWN_OFFSET>();
    #[cfg(not(all(
        target_arch = "x86_64",
        target_os = "linux",
        not(feature = "tls-thread-local")
    )))]
    return own_arena(state());
}

/// The calling thread's small-block heap, or null when it has none yet.
#[inline(always)]
pub(crate) fn slab_heap() -> *mut slab::Heap {
    slab_heap_of(state())
}

/// The small-block heap of the thread whose state is `ts`, or null when it has none yet.
#[inline(always)]
pub(crate) fn slab_heap_of(ts: &ThreadState) -> *mut slab::Heap {
    ts.heap.get()
}

/// Gives the calling thread a small-block heap (null when it cannot have one: exiting, or no
/// heap left), and makes sure its exit hook will abandon it.
#[cold]
#[inline(never)]
pub(crate) fn acquire_slab_heap() -> *mut slab::Heap {
    let ts = state();
    let h = ts.heap.get();
    if !h.is_null() || ts.flags.get() & (BUSY | DEAD) != 0 || !exit_hook::install() {
        return h;
    }
    let h = slab::acquire_heap();
    if !h.is_null() {
        if ts.arena.get().is_null() {
            exit_hook::arm_without_arena();
        }
        ts.heap.set(h);
    }
    h
}

/// Byte offset of the thread's own arena (null when it has none) in its state block: what
/// `load_own` reads.
pub const OWN_OFFSET: usize = 8;
/// Byte offset of `free_arena` (the own arena, or [`NO_ARENA`]; never null) in the thread's
/// state block: what `free`'s assembly entry point (preload/src/malloc.rs) reads.
pub const FREE_ARENA_OFFSET: usize = 16;

const _: () = assert!(
    core::mem::offset_of!(ThreadState, active) == 0
        && core::mem::offset_of!(ThreadState, arena) == OWN_OFFSET
        && core::mem::offset_of!(ThreadState, free_arena) == FREE_ARENA_OFFSET,
    "load_active/load_own, the TLS block's image and free's entry point read these offsets"
);

/// Reads the pointer at byte `OFFSET` of this thread's state block with one fs-relative load.
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
#[inline(always)]
fn load_state_word<const OFFSET: usize>() -> *const Arena {
    let a: *const Arena;
    // SAFETY: reads a pointer field (`active` at 0, `arena` at 8; `ThreadState` is repr(C)) of
    // this thread's state block (see `state`); only this thread ever writes it.
    unsafe {
        core::arch::asm!(
            "mov {a}, qword ptr [rip + resizealloc_thread_state@GOTTPOFF]",
            "mov {a}, qword ptr fs:[{a} + {off}]",
            a = out(reg) a,
            off = const OFFSET,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    a
}

/// Process mode: make the thread's allocations go to its arena from now on. Returns the arena
/// or null when none can be had (busy, exiting, or no slot).
#[cold]
#[inline(never)]
pub(crate) fn join_process(ts: &ThreadState) -> *const Arena {
    if ts.flags.get() & JOINED != 0 {
        // Null while `outside_regions` sends the thread to the next allocator.
        return predicted_arena(ts);
    }
    let a = ensure_arena(ts);
    if !a.is_null() {
        ts.flags.set(ts.flags.get() | JOINED);
        ts.active.set(PREDICT);
    }
    a
}

#[cold]
#[inline(never)]
fn ensure_arena(ts: &ThreadState) -> *const Arena {
    let a = ts.arena.get();
    if !a.is_null() {
        return a;
    }
    if ts.flags.get() & (BUSY | DEAD | DENIED) != 0 {
        return ptr::null();
    }
    ts.flags.set(ts.flags.get() | BUSY);
    let o = options::get();
    let cfg = ArenaConfig {
        initial_capacity: o.initial_arena,
        min_alloc: o.min_size,
        max_alloc: o.max_size,
        recycle: o.region == RegionMode::Process,
    };
    let got = if exit_hook::install() {
        reservation::acquire_arena(o.max_arena, o.reserve, cfg)
    } else {
        None
    };
    let mut flags = ts.flags.get() & !BUSY;
    match got {
        Some(arena) => {
            ts.set_arena(arena);
            exit_hook::arm(arena);
        }
        None => flags |= DENIED,
    }
    ts.flags.set(flags);
    ts.arena.get()
}

mod exit_hook {
    //! Thread exit through a pthread key destructor (see the module docs above).
    use core::sync::atomic::{AtomicU32, Ordering};

    use super::{state, DEAD, JOINED};
    use crate::arena::Arena;
    use crate::reservation;

    /// 0: not created, u32::MAX: creation failed, otherwise key + 1.
    static KEY: AtomicU32 = AtomicU32::new(0);
    static LOCK: spin::Mutex<()> = spin::Mutex::new(());

    pub(super) fn install() -> bool {
        let k = KEY.load(Ordering::Acquire);
        if k != 0 {
            return k != u32::MAX;
        }
        let _g = LOCK.lock();
        if KEY.load(Ordering::Acquire) == 0 {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: `key` is a valid out pointer; `on_exit` has the destructor signature.
            let rc = unsafe { libc::pthread_key_create(&mut key, Some(on_exit)) };
            KEY.store(if rc == 0 { key + 1 } else { u32::MAX }, Ordering::Release);
        }
        KEY.load(Ordering::Acquire) != u32::MAX
    }

    pub(super) fn arm(arena: &'static Arena) {
        let k = KEY.load(Ordering::Acquire);
        // SAFETY: the key exists (install succeeded); a non-null value makes glibc call the
        // destructor at thread exit.
        unsafe { libc::pthread_setspecific(k - 1, arena as *const Arena as *const libc::c_void) };
    }

    /// The key's value of a thread that has a small-block heap and no arena: not null, so that
    /// the destructor runs, and never an arena's address.
    const NO_ARENA: *mut libc::c_void = 1 as *mut libc::c_void;

    pub(super) fn arm_without_arena() {
        let k = KEY.load(Ordering::Acquire);
        // SAFETY: as in `arm`.
        unsafe { libc::pthread_setspecific(k - 1, NO_ARENA) };
    }

    extern "C" fn on_exit(value: *mut libc::c_void) {
        let ts = state();
        // A process-mode arena may be adopted by a new thread (see `Arena::adopt`).
        let adoptable = ts.flags.get() & JOINED != 0;
        // Null the slot first: glibc may still call free() after this (freeres), and those
        // frees must take the remote path.
        ts.active.set(core::ptr::null());
        ts.set_arena(core::ptr::null());
        ts.depth.set(0);
        ts.flags.set(ts.flags.get() | DEAD);
        let heap = ts.heap.replace(core::ptr::null_mut());
        if !heap.is_null() {
            // SAFETY: the thread's own heap; the thread state no longer names it, so the
            // thread never uses it again (its later frees of small blocks are remote).
            unsafe { crate::slab::abandon(heap) };
        }
        if value.is_null() || value == NO_ARENA {
            return;
        }
        // SAFETY: the value is the arena armed by this thread; it lives until released.
        let arena = unsafe { &*(value as *const Arena) };
        // SAFETY: our own arena; the thread state no longer names it.
        unsafe { reservation::retire_arena(arena, adoptable) };
    }
}

// ------------------------------------------------------------------------------ markers

/// Error from [`region_end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// `region_end` without a matching `region_begin` on this thread.
    NotInRegion,
}

impl core::fmt::Display for RegionError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("region_end without a matching region_begin on this thread")
    }
}

impl std::error::Error for RegionError {}

/// Enters a region on the calling thread. Regions nest; only the outermost end resets and
/// resizes the arena. With `RESIZEALLOC_REGION=off` the depth is counted but nothing is routed.
pub fn region_begin() {
    // A Rust program may begin a region before its first allocation through `ResizeAlloc`
    // (the C API's entry points call `region_begin_with`; the preload library registered the
    // handlers at load time).
    crate::fork::register_handlers();
    region_begin_with(state());
}

/// [`region_begin`] for the calling thread's state `ts` (from [`state`]).
#[doc(hidden)]
#[inline]
pub fn region_begin_with(ts: &ThreadState) {
    let depth = ts.depth.get();
    if depth == u32::MAX {
        return;
    }
    ts.depth.set(depth + 1);
    if ts.flags.get() & JOINED != 0 {
        // Process mode (or joined it earlier, markers now): the outermost region is the
        // process, and the program's markers only nest. A process-mode arena takes no
        // checkpoints: it reuses freed memory by laps (see `Arena::push_checkpoint`).
        return;
    }
    let m = mode();
    if m & MODE_OFF != 0 {
        return;
    }
    if m & MODE_PROCESS != 0 {
        join_process(ts);
        return;
    }
    if depth == 0 {
        let a = match ts.arena.get() {
            a if !a.is_null() => a,
            _ => ensure_arena(ts),
        };
        ts.active.set(if a.is_null() {
            outside_value()
        // SAFETY: our own arena.
        } else if unsafe { (*a).predicting() } {
            PREDICT
        } else {
            a
        });
    } else if in_arena_region(ts) {
        // SAFETY: `arena` is our own arena.
        unsafe { (*ts.arena.get()).push_checkpoint() };
    }
}

/// Leaves the innermost region. The outermost end resets the arena and resizes it to the
/// region's peak. An end without a begin is an error value, never a panic.
pub fn region_end() -> Result<(), RegionError> {
    region_end_with(state())
}

/// [`region_end`] for the calling thread's state `ts` (from [`state`]).
#[doc(hidden)]
#[inline]
pub fn region_end_with(ts: &ThreadState) -> Result<(), RegionError> {
    let depth = ts.depth.get();
    if depth == 0 {
        return Err(RegionError::NotInRegion);
    }
    ts.depth.set(depth - 1);
    if ts.flags.get() & JOINED != 0 {
        return Ok(()); // process mode: the markers only nest (see `region_begin`)
    }
    let a = ts.arena.get();
    if a.is_null() || MODE.load(Ordering::Relaxed) & MODE_OFF != 0 {
        // No arena, or markers are ignored (begin pushed nothing either).
        return Ok(());
    }
    // SAFETY: `a` is this thread's own arena.
    let arena = unsafe { &*a };
    if !in_arena_region(ts) {
        // Entered while markers were off (or no arena): nothing to undo.
    } else if depth == 1 {
        ts.active.set(outside_value());
        arena.reset();
    } else {
        arena.pop_checkpoint();
    }
    Ok(())
}

/// [`region_begin`] for a thread (state `ts`) that joined process mode, where the markers only
/// nest: true when it counted the region, false when the caller must call [`region_begin`].
/// The C API tries it first: programs mark every step, and this path needs no stack frame.
#[doc(hidden)]
#[inline(always)]
pub fn region_begin_if_joined(ts: &ThreadState) -> bool {
    // The flag first: a thread in markers mode pays one test.
    if ts.flags.get() & JOINED == 0 {
        return false;
    }
    let depth = ts.depth.get();
    if depth == u32::MAX {
        return false;
    }
    ts.depth.set(depth + 1);
    true
}

/// [`region_end`] for a thread (state `ts`) that joined process mode and is in a region: the
/// depth it leaves the thread at, or `None` when the caller must call [`region_end`].
#[doc(hidden)]
#[inline(always)]
pub fn region_end_if_joined(ts: &ThreadState) -> Option<u32> {
    // As in `region_begin_if_joined`.
    if ts.flags.get() & JOINED == 0 {
        return None;
    }
    let depth = ts.depth.get();
    if depth == 0 {
        return None;
    }
    ts.depth.set(depth - 1);
    Some(depth - 1)
}

/// Region nesting depth of the calling thread (0 outside regions).
pub fn region_depth() -> u32 {
    state().depth.get()
}

/// Runs `f` inside a region. The region ends when `f` returns or unwinds.
pub fn region<R>(f: impl FnOnce() -> R) -> R {
    let _guard = RegionGuard::enter();
    f()
}

/// Ends the region it began when dropped. Not `Send`: a region belongs to one thread.
#[must_use = "the region ends when the guard is dropped"]
pub struct RegionGuard {
    _not_send: PhantomData<*const ()>,
}

impl RegionGuard {
    /// Begins a region that ends when the guard is dropped.
    pub fn enter() -> Self {
        region_begin();
        RegionGuard {
            _not_send: PhantomData,
        }
    }
}

impl Drop for RegionGuard {
    fn drop(&mut self) {
        // The guard's own begin makes the depth at least 1 here unless the user ended it by
        // hand; then there is nothing left to end and the error is the right answer to ignore.
        let _ = region_end();
    }
}

/// Runs `f` with the calling thread's allocations going to the next allocator, whatever its
/// region state; frees are unaffected. For bookkeeping that must not live in a region arena
/// (the device pools' own maps). The state is restored when `f` returns or unwinds.
pub fn outside_regions<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(*const Arena);
    impl Drop for Restore {
        fn drop(&mut self) {
            state().active.set(self.0);
        }
    }
    let ts = state();
    let _restore = Restore(ts.active.get());
    // SETTLED routes straight to the next allocator without looking at the mode.
    ts.active.set(SETTLED);
    f()
}

/// Gives memory the calling thread's arena does not need back to the kernel, and the warm
/// memory kept by arenas of exited threads and by the small-block heap's page pool.
pub fn trim() {
    crate::fork::register_handlers(); // as in `region_begin`: this takes the slot table's lock
    reservation::trim_unowned();
    slab::trim_warm();
    let a = state().arena.get();
    if !a.is_null() {
        // SAFETY: our own arena.
        unsafe { (*a).trim() };
    }
}
