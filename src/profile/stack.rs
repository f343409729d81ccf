//! Call stacks for the profiler, from the unwinder (`_Unwind_Backtrace` in libgcc_s, which reads
//! the `.eh_frame` tables every x86-64 object has, so it needs no frame pointers). It does not
//! allocate; should it ever call `malloc`, the thread's profiler flag keeps that call out of the
//! samples.
//!
//! A frame is its instruction pointer (a return address, but for the innermost) and the stack
//! address the unwinder gives for it (`_Unwind_GetCFA`: the frame's stack pointer at its call
//! into the next frame, which is the callee's canonical frame address). Two stacks share an
//! *invocation* at depth `d` when their frames `0..=d`, counted from the root, have the same
//! stack addresses and the same return addresses into them: the call is then the very same
//! one, or a later call of the same function from the same place (whose addresses match too,
//! which the per-thread history of `state.rs` tells apart).

use core::ffi::{c_int, c_void};

/// Frames kept per stack: the innermost ones (deeper stacks keep their depth, see [`Stack`]).
pub(crate) const MAX_FRAMES: usize = 64;
/// Depth the unwinder is followed to at most (frames past it are not counted).
pub(crate) const MAX_DEPTH: usize = 256;

/// One frame.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) ip: usize,
    pub(crate) cfa: usize,
}

/// A call stack, root first. Invariant: `len <= MAX_FRAMES`, `len <= total <= MAX_DEPTH`;
/// `frames[..len]` are the innermost `len` frames, at depths `total - len ..total`.
pub(crate) struct Stack {
    pub(crate) frames: [Frame; MAX_FRAMES],
    pub(crate) len: usize,
    pub(crate) total: usize,
}

impl Stack {
    pub(crate) const fn empty() -> Self {
        Stack {
            frames: [Frame { ip: 0, cfa: 0 }; MAX_FRAMES],
            len: 0,
            total: 0,
        }
    }

    /// The depth of `frames[0]`.
    pub(crate) fn base(&self) -> usize {
        self.total - self.len
    }

    /// The frame at depth `d`, if kept.
    pub(crate) fn at(&self, d: usize) -> Option<Frame> {
        let b = self.base();
        (d >= b && d < self.total).then(|| self.frames[d - b])
    }

    /// Whether the invocations at depth `d` of `self` and `other` are the same, as far as both
    /// stacks tell (a depth one of them did not keep counts as the same).
    fn same_invocation(&self, other: &Stack, d: usize) -> bool {
        let (Some(a), Some(b)) = (self.at(d), other.at(d)) else {
            return true;
        };
        if a.cfa != b.cfa {
            return false;
        }
        // The return address into the frame is its caller's instruction pointer.
        match (
            d.checked_sub(1).and_then(|p| self.at(p)),
            d.checked_sub(1).and_then(|p| other.at(p)),
        ) {
            (Some(x), Some(y)) => x.ip == y.ip,
            _ => true,
        }
    }

    /// How many invocations, from the root, `self` and `other` share.
    pub(crate) fn common_depth(&self, other: &Stack) -> usize {
        let n = self.total.min(other.total);
        (0..n)
            .find(|&d| !self.same_invocation(other, d))
            .unwrap_or(n)
    }
}

#[repr(C)]
struct UnwindContext {
    _opaque: [u8; 0],
}

type TraceFn = extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int;

extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(ctx: *mut UnwindContext) -> usize;
    fn _Unwind_GetCFA(ctx: *mut UnwindContext) -> usize;
}

/// `_URC_NO_REASON`: go on. Anything else stops the walk.
const GO_ON: c_int = 0;
const STOP: c_int = 5;

/// The walk's state: frames are written innermost first, then reversed.
struct Walk<'a> {
    out: &'a mut Stack,
    /// Frames whose stack pointer is at or below this stack address are the profiler's own.
    above: usize,
    /// The library's own code, `[lo, hi)`, when it is a shared object of its own (the preload
    /// library): frames in it are skipped too. Empty otherwise.
    own: (usize, usize),
}

extern "C" fn trace(ctx: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Walk` that `capture` passed, alive for the whole walk; `ctx` is the
    // unwinder's context for this frame.
    let (w, ip, cfa) = unsafe {
        (
            &mut *(arg as *mut Walk),
            _Unwind_GetIP(ctx),
            _Unwind_GetCFA(ctx),
        )
    };
    if ip == 0 {
        return STOP;
    }
    if cfa <= w.above {
        return GO_ON;
    }
    if w.out.total == 0 && ip >= w.own.0 && ip < w.own.1 {
        return GO_ON;
    }
    if w.out.len < MAX_FRAMES {
        w.out.frames[w.out.len] = Frame { ip, cfa };
        w.out.len += 1;
    }
    w.out.total += 1;
    if w.out.total >= MAX_DEPTH {
        STOP
    } else {
        GO_ON
    }
}

/// The calling thread's stack above the function whose frame holds the stack address `above`
/// (the profiler's entry point, whose caller is the front end or the program), without the
/// library's own frames.
pub(crate) fn capture(out: &mut Stack, above: usize, own: (usize, usize)) {
    out.len = 0;
    out.total = 0;
    let mut w = Walk { out, above, own };
    // SAFETY: `trace` matches the callback type and only touches `w` through `arg`.
    unsafe { _Unwind_Backtrace(trace, &mut w as *mut Walk as *mut c_void) };
    let s = w.out;
    s.frames[..s.len].reverse();
}
