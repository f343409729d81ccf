//! The region matrix (`examples/workloads/matrix.rs`) on bumpalo's explicit arena: every block
//! bumps a thread's `Bump`, a free does nothing, and each region ends with `Bump::reset`; the
//! growth cells grow bumpalo's own `Vec` and `String` (in place while they are the arena's last
//! allocation). What a program gets by rewriting its allocations against an arena by hand, and
//! only where it frees nothing it needs again before the region ends. bumpalo is no global
//! allocator, so the request workloads do not apply: this binary runs `--matrix` only.
#[allow(dead_code)] // the request workloads: not for an explicit arena
#[path = "workloads/common.rs"]
mod common;

use std::alloc::Layout;
use std::cell::Cell;

use bumpalo::collections::{String as BumpString, Vec as BumpVec};
use bumpalo::Bump;
use common::matrix::{self, Heap};

thread_local! {
    /// The thread's arena, made at its first use and never freed.
    static ARENA: Cell<*mut Bump> = const { Cell::new(std::ptr::null_mut()) };
}

/// The thread's arena.
#[inline(always)]
fn arena() -> &'static Bump {
    let mut a = ARENA.get();
    if a.is_null() {
        a = Box::into_raw(Box::new(Bump::new()));
        ARENA.set(a);
    }
    // SAFETY: leaked above, so it lives as long as the program; only `Heap::region` makes a
    // `&mut` of it, for its reset, when no block or collection of the region is left.
    unsafe { &*a }
}

struct BumpHeap;

impl Heap for BumpHeap {
    fn region<T>(f: impl FnOnce() -> T) -> T {
        arena();
        let r = f();
        // SAFETY: the region's blocks are dead (the matrix frees or forgets them all inside it,
        // `none` excepted, whose frees after the end do nothing) and no reference into the
        // arena is held: the reset may take it `&mut`.
        unsafe { (*ARENA.get()).reset() };
        r
    }
    unsafe fn alloc(l: Layout) -> *mut u8 {
        arena().alloc_layout(l).as_ptr()
    }
    unsafe fn free(_: *mut u8, _: Layout) {}
    fn grow_vec() -> (usize, usize) {
        matrix::grow_vec(BumpVec::with_capacity_in(16, arena()))
    }
    fn grow_string() -> (usize, usize) {
        matrix::grow_string(BumpString::with_capacity_in(16, arena()))
    }
    fn grow_mixed() -> (usize, usize) {
        matrix::grow_mixed(|| BumpVec::with_capacity_in(16, arena()))
    }
}

impl_bytes_and_text!(BumpVec<'_, u8>, BumpString<'_>);

fn main() {
    let args = common::args();
    if !args.matrix {
        eprintln!("workloads_bumpalo: bumpalo is no global allocator; run it with --matrix");
        std::process::exit(2);
    }
    common::matrix::main::<BumpHeap>(args.quick, args.only)
}
