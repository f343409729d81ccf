//! Call stacks for the profiler, from the `.eh_frame` tables every x86-64 object has, so no frame
//! pointers are needed: the fast walk of `unwind.rs` with its cache of rules, or where it
//! declines, the unwinder (`_Unwind_Backtrace` in libgcc_s), which gives the same frames. Neither
//! allocates; should the unwinder ever call `malloc`, the thread's profiler flag keeps that call
//! out of the samples.
//!
//! A frame is its instruction pointer (a return address, but for the innermost) and the stack
//! address the unwinder gives for it (`_Unwind_GetCFA`: the frame's stack pointer at its call
//! into the next frame, which is the callee's canonical frame address). Two stacks share an
//! *invocation* at depth `d` when their frames `0..=d`, counted from the root, have the same
//! stack addresses and the same return addresses into them: the call is then the very same
//! one, or a later call of the same function from the same place (whose addresses match too,
//! which the per-thread history of `state.rs` tells apart).

use core::ffi::{c_int, c_void};

use super::unwind::Cache;

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

impl Walk<'_> {
    /// Takes one frame as either walker gives it; false to stop.
    fn frame(&mut self, ip: usize, cfa: usize) -> bool {
        if ip == 0 {
            return false;
        }
        if cfa <= self.above {
            return true;
        }
        if self.out.total == 0 && ip >= self.own.0 && ip < self.own.1 {
            return true;
        }
        if self.out.len < MAX_FRAMES {
            self.out.frames[self.out.len] = Frame { ip, cfa };
            self.out.len += 1;
        }
        self.out.total += 1;
        self.out.total < MAX_DEPTH
    }
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
    if w.frame(ip, cfa) {
        GO_ON
    } else {
        STOP
    }
}

/// The calling thread's stack above the function whose frame holds the stack address `above`
/// (the profiler's entry point, whose caller is the front end or the program), without the
/// library's own frames: from the fast walk of `unwind.rs` where it can follow every frame,
/// else from the unwinder. True when the fast walk took it.
pub(crate) fn capture(
    out: &mut Stack,
    above: usize,
    own: (usize, usize),
    cache: &mut Cache,
) -> bool {
    out.len = 0;
    out.total = 0;
    let mut w = Walk { out, above, own };
    #[cfg(target_arch = "x86_64")]
    let fast = super::unwind::walk(cache, MAX_DEPTH + MAX_FRAMES, |ip, cfa| w.frame(ip, cfa))
        == super::unwind::Walked::Done;
    #[cfg(not(target_arch = "x86_64"))]
    let fast = {
        let _ = cache;
        false
    };
    if !fast {
        w.out.len = 0;
        w.out.total = 0;
        // SAFETY: `trace` matches the callback type and only touches `w` through `arg`.
        unsafe { _Unwind_Backtrace(trace, &mut w as *mut Walk as *mut c_void) };
    }
    let s = w.out;
    s.frames[..s.len].reverse();
    fast
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::unwind;
    use super::*;

    /// Both walkers, from the same frame: the fast walk, and the unwinder alone.
    #[inline(never)]
    fn both(cache: &mut Cache) -> (Stack, Stack, bool) {
        let marker = 0u8;
        let above = core::hint::black_box(&marker) as *const u8 as usize;
        let mut fast = Stack::empty();
        let mut w = Walk {
            out: &mut fast,
            above,
            own: (0, 0),
        };
        let done = unwind::walk(cache, MAX_DEPTH + MAX_FRAMES, |ip, cfa| w.frame(ip, cfa))
            == unwind::Walked::Done;
        let mut slow = Stack::empty();
        let mut w = Walk {
            out: &mut slow,
            above,
            own: (0, 0),
        };
        // SAFETY: as in `capture`.
        unsafe { _Unwind_Backtrace(trace, &mut w as *mut Walk as *mut c_void) };
        core::hint::black_box(&marker);
        (fast, slow, done)
    }

    fn same(a: &Stack, b: &Stack) -> bool {
        a.len == b.len && a.total == b.total && a.frames[..a.len] == b.frames[..b.len]
    }

    #[inline(never)]
    fn nested(depth: usize, cache: &mut Cache) -> (Stack, Stack, bool) {
        if depth == 0 {
            return both(cache);
        }
        let r = nested(depth - 1, cache);
        core::hint::black_box(depth);
        r
    }

    #[test]
    fn the_fast_walk_gives_the_unwinders_frames() {
        unwind::start();
        let mut cache = Box::new(Cache::new());
        for depth in [0, 3, 40, 300] {
            // Twice: once reading the tables, once from the cache.
            for _ in 0..2 {
                let (fast, slow, done) = nested(depth, &mut cache);
                assert!(done, "the fast walk declined at depth {depth}");
                assert!(slow.total > depth.min(MAX_DEPTH - 8));
                assert!(
                    same(&fast, &slow),
                    "depth {depth}: {} / {} frames against {} / {}",
                    fast.len,
                    fast.total,
                    slow.len,
                    slow.total
                );
            }
        }
    }

    /// Through frames of the C library (its `qsort` calls back into the comparison).
    #[test]
    fn the_fast_walk_crosses_the_c_library() {
        use std::cell::RefCell;
        thread_local! {
            static SEEN: RefCell<Option<(Stack, Stack, bool)>> = const { RefCell::new(None) };
            static CACHE: RefCell<Option<Box<Cache>>> = const { RefCell::new(None) };
        }
        extern "C" fn compare(a: *const c_void, b: *const c_void) -> c_int {
            CACHE.with(|c| {
                let mut c = c.borrow_mut();
                let cache = c.get_or_insert_with(|| Box::new(Cache::new()));
                SEEN.with(|s| *s.borrow_mut() = Some(both(cache)));
            });
            // SAFETY: qsort passes pointers to two elements of the array, u32s.
            unsafe { (*(a as *const u32)).cmp(&*(b as *const u32)) as c_int }
        }
        unwind::start();
        let mut v = [5u32, 3, 9, 1];
        // SAFETY: the array, its length and element size; the comparison reads two elements.
        unsafe { libc::qsort(v.as_mut_ptr().cast(), v.len(), 4, Some(compare)) };
        assert_eq!(v, [1, 3, 5, 9]);
        let (fast, slow, done) = SEEN.with(|s| s.borrow_mut().take()).unwrap();
        assert!(done, "the fast walk declined through qsort");
        assert!(same(&fast, &slow));
    }
}
