//! The region matrix (`examples/workloads/matrix.rs`) on bumpalo's explicit arena: every block
//! bumps a thread's `Bump`, a free does nothing, and each region ends with `Bump::reset`; the
//! growth cells grow bumpalo's own `Vec` and `String` (in place while they are the arena's last
//! allocation). What a program gets by rewriting its allocations against an arena by hand, and
//! only where it frees nothing it needs again before the region ends. bumpalo is no global
//! allocator, so of the request workloads only `tree` is here, rewritten against the arena
//! (nodes are `&'bump` references, dropped with the reset): `--only tree` runs it with the
//! same output and checksum as the other binaries' `tree`. Everything else is `--matrix`.
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

/// `common.rs`'s boxed tree, on the arena: the same nodes in the same order.
struct Node<'a> {
    left: Option<&'a Node<'a>>,
    right: Option<&'a Node<'a>>,
    value: u64,
}

fn build<'a>(bump: &'a Bump, depth: u32, next: &mut u64) -> &'a Node<'a> {
    *next += 1;
    let value = *next;
    let (left, right) = if depth == 0 {
        (None, None)
    } else {
        (
            Some(build(bump, depth - 1, next)),
            Some(build(bump, depth - 1, next)),
        )
    };
    bump.alloc(Node { left, right, value })
}

fn sum(n: &Node) -> u64 {
    n.value + n.left.map_or(0, sum) + n.right.map_or(0, sum)
}

fn tree_step() -> usize {
    BumpHeap::region(|| {
        let mut next = 0;
        sum(build(arena(), 11, &mut next)) as usize
    })
}

/// The request loop of `common::main` for `tree`: a warm-up request, then the timed ones, on
/// each of `threads` threads; prints the same `RESULT` line.
fn tree_requests(quick: bool, threads: usize) {
    let n = if quick { 1500 / 10 + 1 } else { 1500 };
    let v: Vec<(f64, usize)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut check = std::hint::black_box(tree_step());
                    let t0 = std::time::Instant::now();
                    for _ in 0..n {
                        check = check.wrapping_add(std::hint::black_box(tree_step()));
                    }
                    (t0.elapsed().as_nanos() as f64 / n as f64, check)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let check = v.iter().fold(0usize, |a, x| a.wrapping_add(x.1));
    let ns = v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64;
    println!("RESULT tree/{threads}t {ns:.0} ns check={check}");
    common::report_peak_rss();
}

fn main() {
    let args = common::args();
    if args.matrix {
        return common::matrix::main::<BumpHeap>(args.quick, args.only);
    }
    if args.only.as_deref() != Some("tree") {
        eprintln!("workloads_bumpalo: bumpalo is no global allocator; run it with --matrix, or --only tree");
        std::process::exit(2);
    }
    tree_requests(args.quick, args.threads)
}
