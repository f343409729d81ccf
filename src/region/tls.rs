//! Where the thread state lives: on x86-64 Linux a 64-byte initial-exec TLS block of our own,
//! reached in two instructions (its image and its loads are the core crate's only assembly);
//! elsewhere a `thread_local!` with a `const` initialiser.

use super::thread_state::ThreadState;
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
use super::thread_state::{FREE_ARENA_OFFSET, NO_ARENA};
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
use crate::arena::Arena;

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

/// Reads the pointer at byte `OFFSET` of this thread's state block with one fs-relative load.
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    not(feature = "tls-thread-local")
))]
#[inline(always)]
pub(super) fn load_state_word<const OFFSET: usize>() -> *const Arena {
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
