//! The per-thread state: the region depth, the thread's arenas and flags, in one 64-byte block
//! that the preload library's assembly entry points read at fixed offsets.

use core::cell::Cell;
use core::ptr;

use crate::arena::Arena;
use crate::slab;

/// The thread is inside arena acquisition: allocations made there go to the next allocator.
pub(super) const BUSY: u8 = 1;
/// The thread's exit destructor ran: never route to an arena again.
pub(super) const DEAD: u8 = 2;
/// Process mode: the thread has joined its implicit, never-ending outer region.
pub(crate) const JOINED: u8 = 4;
/// Acquiring an arena failed once: do not retry on every allocation.
pub(super) const DENIED: u8 = 8;
/// The thread is inside the allocation profiler (profile/): its own allocations are not sampled.
pub(crate) const PROFILING: u8 = 16;
/// The thread is inside a call from the preload library to the next allocator (a wrapper or
/// another allocator after it in the chain): glibc's `__libc_*` names, which such an allocator
/// may call, go to glibc, never back into the library.
pub(super) const IN_NEXT: u8 = 32;

/// One thread's region state.
///
/// `active` is null (the thread has not been routed yet: look at the mode),
/// [`SETTLED`](super::SETTLED) (outside any region, mode known: straight to the next
/// allocator), [`COUNTDOWN`](super::COUNTDOWN) (the same, past the profiler's countdown),
/// [`PREDICT`](super::PREDICT) (through the lifetime predictor), or the thread's arena.
/// Invariant: when it is an arena it equals `arena`; it is an arena exactly while the thread is
/// inside a region (explicit, or process mode) and holds an arena.
#[repr(C)]
pub struct ThreadState {
    /// Offset 0 (read directly by `load_active` on x86-64 Linux).
    pub(super) active: Cell<*const Arena>,
    /// Offset 8 (read directly by `load_own`).
    pub(super) arena: Cell<*const Arena>,
    /// Offset 16 ([`FREE_ARENA_OFFSET`]): `arena`, or [`NO_ARENA`] when that is null. Never
    /// null, so that `free`'s assembly entry point (preload/src/entry_x86_64.rs) reads its words
    /// without a null test first. Invariant: set with `arena`, by `set_arena`.
    #[cfg_attr(
        not(all(
            target_arch = "x86_64",
            target_os = "linux",
            not(feature = "tls-thread-local")
        )),
        allow(dead_code)
    )]
    pub(super) free_arena: Cell<*const Arena>,
    pub(super) depth: Cell<u32>,
    pub(crate) flags: Cell<u8>,
    /// Process mode: frees to the next allocator left before the next sampled one (at most
    /// `NEXT_FREE_SAMPLE`).
    pub(super) next_frees_left: Cell<u16>,
    /// The allocation profiler (profile/): the part of the gap to the next sampled allocation
    /// that is not in `sample_left` yet.
    pub(crate) sample_carry: Cell<u32>,
    /// The allocation profiler's slot for this thread (0: none yet).
    pub(crate) profile_slot: Cell<u32>,
    /// Process mode: estimated bytes freed to the next allocator, not yet added to the front
    /// end's process-wide count.
    pub(super) next_freed_bytes: Cell<u64>,
    /// The thread's small-block heap (slab/), or null until it needs one.
    pub(super) heap: Cell<*mut slab::Heap>,
    /// The allocation profiler (profile/): bytes the thread may allocate before it looks at
    /// the countdown again (0 until its first look). Invariant: below
    /// [`ALWAYS_SAMPLED`](crate::profile::ALWAYS_SAMPLED), so that one compare tells a request
    /// to count down from one to look at (larger than it, or always sampled). A word, so that
    /// `malloc`'s entry point counts down with one subtraction in memory (its borrow tells a
    /// request larger than what is left, whatever its size).
    pub(crate) sample_left: Cell<u64>,
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
    pub(super) const fn new() -> Self {
        ThreadState {
            active: Cell::new(ptr::null()),
            arena: Cell::new(ptr::null()),
            free_arena: Cell::new(no_arena()),
            depth: Cell::new(0),
            flags: Cell::new(0),
            next_frees_left: Cell::new(0),
            sample_carry: Cell::new(0),
            profile_slot: Cell::new(0),
            next_freed_bytes: Cell::new(0),
            heap: Cell::new(ptr::null_mut()),
            sample_left: Cell::new(0),
        }
    }

    /// Sets the thread's own arena (or none: null), and `free_arena` with it.
    pub(super) fn set_arena(&self, arena: *const Arena) {
        self.arena.set(arena);
        self.free_arena
            .set(if arena.is_null() { no_arena() } else { arena });
    }
}

/// What `free_arena` names for a thread with no arena: 128 bytes, every word 1. The words at
/// the offsets `free`'s entry point reads (`asm_layout::BELOW_TOP`, `UNCOUNTED` and `TOP`) are
/// then 1, the address of no block header (they lie in the arena reservation), so its LIFO test
/// fails, its uncounted range `[1, 1)` is empty, and the free goes on to
/// `free_arena_block_other`, which sees this address and takes the slow path.
#[repr(C, align(64))]
pub struct NoArena([usize; 16]);

/// See [`NoArena`].
pub static NO_ARENA: NoArena = NoArena([1; 16]);

const _: () = assert!(
    crate::arena::asm_layout::BELOW_TOP < core::mem::size_of::<NoArena>()
        && crate::arena::asm_layout::UNCOUNTED < core::mem::size_of::<NoArena>()
        && crate::arena::asm_layout::TOP < core::mem::size_of::<NoArena>(),
    "NO_ARENA must cover the words free's entry point reads"
);

/// [`NO_ARENA`] as an arena pointer: compared, never dereferenced as an `Arena`.
pub const fn no_arena() -> *const Arena {
    &NO_ARENA as *const NoArena as *const Arena
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

/// Byte offset of the thread's own arena (null when it has none) in its state block: what
/// `load_own` reads.
pub const OWN_OFFSET: usize = 8;
/// Byte offset of `free_arena` (the own arena, or [`NO_ARENA`]; never null) in the thread's
/// state block: what `free`'s assembly entry point (preload/src/entry_x86_64.rs) reads.
pub const FREE_ARENA_OFFSET: usize = 16;
/// Byte offset of `sample_left` (the profiler's countdown, a `u64`) in the thread's state
/// block: what `malloc`'s assembly entry point counts down while the profiler runs.
pub const SAMPLE_LEFT_OFFSET: usize = 56;

const _: () = assert!(
    core::mem::offset_of!(ThreadState, active) == 0
        && core::mem::offset_of!(ThreadState, arena) == OWN_OFFSET
        && core::mem::offset_of!(ThreadState, free_arena) == FREE_ARENA_OFFSET
        && core::mem::offset_of!(ThreadState, sample_left) == SAMPLE_LEFT_OFFSET,
    "load_active/load_own, the TLS block's image and free's entry point read these offsets"
);
