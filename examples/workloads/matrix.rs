//! The region matrix in Rust: the cells of `scripts/matrix.c` (the same sizes, the same free
//! orders, the same seeds) through a Rust heap: the binary's `#[global_allocator]`, or bumpalo's
//! explicit arena (`examples/workloads_bumpalo.rs`). `scripts/matrix_rust.sh` runs it as
//! `workloads_<alloc> --matrix [--quick] [--only CELL,...]`; it prints
//! `RESULT <cell> <ns per allocation>` (an allocation and its free, or a growth step).
//!
//! Cells are ORDER/SIZES/LIVE, as in C:
//! * ORDER: `pairs` (each block freed right after its allocation, LIVE 1), `lifo` (freed last
//!   first), `fifo` (in allocation order: a `Vec` of values dropped), `random` (a fixed random
//!   order), `none` (read back at the region's end, freed after it in allocation order);
//! * SIZES: `s128` (16-128 bytes), `s512` (16-512 bytes), `big` (16 bytes to 1 MiB, log-uniform);
//! * LIVE: 64 or 10,000 (`big`: 64);
//!
//! and four more: `tree/s48/1023` (a binary tree of 1,023 boxed nodes of 48 bytes built and
//! dropped: children before their parent), `grow/vec/13` (a `Vec<u8>` pushed from 16 bytes to
//! 64 KiB: 12 doublings), `grow/string/256` (a `String` grown 16 bytes at a time to 4 KiB with
//! `reserve_exact`: a realloc chain of 255 steps), `grow/mixed/64` (64 `Vec<u8>` grown 16 bytes
//! at a time in turn, to 512 bytes each: no buffer is the last block for long). Every block gets
//! its first 16 bytes written and one read back before its free.

use std::alloc::Layout;
use std::hint::black_box;
use std::time::Instant;

/// How the cells allocate: a region around a closure, blocks by layout, and the three growth
/// cells, whose containers are the heap's own (`std`'s, or bumpalo's).
pub trait Heap {
    fn region<T>(f: impl FnOnce() -> T) -> T;
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    unsafe fn alloc(l: Layout) -> *mut u8;
    /// # Safety
    /// As `GlobalAlloc::dealloc`.
    unsafe fn free(p: *mut u8, l: Layout);
    /// One region of `grow/vec/13`; returns the growth steps and a checksum.
    fn grow_vec() -> (usize, usize);
    /// One region of `grow/string/256`.
    fn grow_string() -> (usize, usize);
    /// One region of `grow/mixed/64`.
    fn grow_mixed() -> (usize, usize);
}

/// The binary's global allocator, with `R`'s regions.
pub struct Global<R>(std::marker::PhantomData<R>);

impl<R: super::Region> Heap for Global<R> {
    fn region<T>(f: impl FnOnce() -> T) -> T {
        R::run(f)
    }
    unsafe fn alloc(l: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { std::alloc::alloc(l) }
    }
    unsafe fn free(p: *mut u8, l: Layout) {
        // SAFETY: forwarded.
        unsafe { std::alloc::dealloc(p, l) }
    }
    fn grow_vec() -> (usize, usize) {
        grow_vec(Vec::with_capacity(16))
    }
    fn grow_string() -> (usize, usize) {
        grow_string(String::with_capacity(16))
    }
    fn grow_mixed() -> (usize, usize) {
        grow_mixed(|| Vec::with_capacity(16))
    }
}

/// A growable byte buffer: `std`'s `Vec<u8>`, or an arena's.
pub trait Bytes {
    fn len(&self) -> usize;
    fn capacity(&self) -> usize;
    fn resize(&mut self, n: usize, value: u8);
    fn reserve_exact(&mut self, n: usize);
    fn extend_from_slice(&mut self, s: &[u8]);
    fn last_byte(&self) -> u8;
}

/// A growable string: `std`'s `String`, or an arena's.
pub trait Text {
    fn len(&self) -> usize;
    fn reserve_exact(&mut self, n: usize);
    fn push_str(&mut self, s: &str);
    fn byte(&self, i: usize) -> u8;
}

/// Implements [`Bytes`] for `$bytes` and [`Text`] for `$text`, types whose inherent methods
/// have the names of `Vec<u8>`'s and `String`'s.
#[macro_export]
macro_rules! impl_bytes_and_text {
    ($bytes:ty, $text:ty) => {
        impl $crate::common::matrix::Bytes for $bytes {
            fn len(&self) -> usize {
                self.len()
            }
            fn capacity(&self) -> usize {
                self.capacity()
            }
            fn resize(&mut self, n: usize, value: u8) {
                self.resize(n, value)
            }
            fn reserve_exact(&mut self, n: usize) {
                self.reserve_exact(n)
            }
            fn extend_from_slice(&mut self, s: &[u8]) {
                self.extend_from_slice(s)
            }
            fn last_byte(&self) -> u8 {
                self[self.len() - 1]
            }
        }

        impl $crate::common::matrix::Text for $text {
            fn len(&self) -> usize {
                self.len()
            }
            fn reserve_exact(&mut self, n: usize) {
                self.reserve_exact(n)
            }
            fn push_str(&mut self, s: &str) {
                self.push_str(s)
            }
            fn byte(&self, i: usize) -> u8 {
                self.as_bytes()[i]
            }
        }
    };
}

impl_bytes_and_text!(Vec<u8>, String);

/// `grow/vec/13` on `v`, an empty buffer of 16 bytes' capacity: filled, then doubled by
/// `resize` (a push past the capacity, which doubles it) to 64 KiB. Returns the growth steps and
/// a checksum.
pub fn grow_vec(mut v: impl Bytes) -> (usize, usize) {
    v.extend_from_slice(&[1; 16]);
    let mut steps = 0;
    while v.len() < 65536 {
        let n = v.len();
        v.resize(2 * n, 2);
        steps += 1;
    }
    (steps, v.last_byte() as usize + v.capacity())
}

/// `grow/string/256` on `s`, an empty string of 16 bytes' capacity: grown 16 bytes at a time
/// through `reserve_exact` to 4 KiB (a realloc chain).
pub fn grow_string(mut s: impl Text) -> (usize, usize) {
    s.push_str("0123456789abcdef");
    let mut steps = 0;
    while s.len() < 4096 {
        s.reserve_exact(16);
        s.push_str("fedcba9876543210");
        steps += 1;
    }
    (steps, s.len() + s.byte(100) as usize)
}

/// `grow/mixed/64`: 64 buffers from `new` (empty, 16 bytes' capacity) grown 16 bytes at a time
/// in turn, to 512 bytes each.
pub fn grow_mixed<B: Bytes>(new: impl Fn() -> B) -> (usize, usize) {
    let mut bufs: Vec<B> = (0..64)
        .map(|_| {
            let mut b = new();
            b.extend_from_slice(&[4; 16]);
            b
        })
        .collect();
    let mut steps = 0;
    for _ in 0..31 {
        for b in bufs.iter_mut() {
            b.reserve_exact(16);
            b.extend_from_slice(&[5; 16]);
            steps += 1;
        }
    }
    (steps, bufs.iter().map(|b| b.last_byte() as usize).sum())
}

/// xorshift64, as `scripts/matrix.c`'s `xs`.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn sizes_of(kind: &str, n: usize, r: &mut Rng) -> Vec<usize> {
    (0..n)
        .map(|_| match kind {
            "s128" => 16 + (r.next() % 113) as usize,
            "s512" => 16 + (r.next() % 497) as usize,
            _ => {
                let u = (r.next() >> 11) as f64 / (1u64 << 53) as f64;
                (16f64.ln() + u * (1048576f64.ln() - 16f64.ln())).exp() as usize
            }
        })
        .collect()
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 16).unwrap()
}

/// Allocates a block and writes its first 16 bytes (every size is at least 16).
///
/// # Safety
/// As [`Heap::alloc`].
#[inline(always)]
unsafe fn touch<H: Heap>(size: usize) -> *mut u8 {
    // SAFETY: forwarded; a block of `size >= 16` bytes when not null.
    unsafe {
        let p = H::alloc(layout(size));
        assert!(!p.is_null());
        p.write_bytes(0x5a, 16);
        p
    }
}

/// Reads a block's first byte back and frees it.
///
/// # Safety
/// `p` is a live block of `size` bytes from [`touch`].
#[inline(always)]
unsafe fn check_free<H: Heap>(p: *mut u8, size: usize, sink: &mut u64) {
    // SAFETY: caller's obligation.
    unsafe {
        *sink += p.read_volatile() as u64;
        H::free(p, layout(size));
    }
}

/// One region of `order` over `sizes`; `blocks` and `perm` as long as `sizes`.
fn region_step<H: Heap>(
    order: &str,
    sizes: &[usize],
    perm: &[usize],
    blocks: &mut [*mut u8],
    sink: &mut u64,
) {
    // SAFETY (every block below): from `touch`, freed once, with its own size.
    H::region(|| unsafe {
        if order == "pairs" {
            for &s in sizes {
                check_free::<H>(touch::<H>(s), s, sink);
            }
            return;
        }
        for (b, &s) in blocks.iter_mut().zip(sizes) {
            *b = touch::<H>(s);
        }
        match order {
            "lifo" => (0..sizes.len())
                .rev()
                .for_each(|i| check_free::<H>(blocks[i], sizes[i], sink)),
            "fifo" => (0..sizes.len()).for_each(|i| check_free::<H>(blocks[i], sizes[i], sink)),
            "random" => perm
                .iter()
                .for_each(|&i| check_free::<H>(blocks[i], sizes[i], sink)),
            // Read back at the region's end: after it, an explicit arena's blocks are gone.
            _ => blocks
                .iter()
                .for_each(|&b| *sink += b.read_volatile() as u64),
        }
    });
    if order == "none" {
        for (&b, &s) in blocks.iter().zip(sizes) {
            // SAFETY: as above.
            unsafe { H::free(b, layout(s)) };
        }
    }
}

struct Node {
    left: *mut Node,
    right: *mut Node,
    value: [u64; 4],
}

/// Builds a tree of `2^(depth+1) - 1` nodes in pre-order, as a recursive `Box` build does.
///
/// # Safety
/// As [`Heap::alloc`].
unsafe fn build<H: Heap>(depth: u32, n: &mut u64) -> *mut Node {
    // SAFETY: a fresh block of a `Node`'s layout, written whole before it is read.
    unsafe {
        let t = H::alloc(Layout::new::<Node>()) as *mut Node;
        assert!(!t.is_null());
        *n += 1;
        let (left, right) = if depth > 0 {
            (build::<H>(depth - 1, n), build::<H>(depth - 1, n))
        } else {
            (std::ptr::null_mut(), std::ptr::null_mut())
        };
        t.write(Node {
            left,
            right,
            value: [*n, 0, 0, 0],
        });
        t
    }
}

/// Drops the tree children first, as `Box<Node>`'s drop does.
///
/// # Safety
/// `t` is null or a tree from [`build`], dropped once.
unsafe fn drop_tree<H: Heap>(t: *mut Node, sink: &mut u64) {
    if t.is_null() {
        return;
    }
    // SAFETY: caller's obligation.
    unsafe {
        drop_tree::<H>((*t).left, sink);
        drop_tree::<H>((*t).right, sink);
        *sink += (*t).value[0];
        H::free(t as *mut u8, Layout::new::<Node>());
    }
}

fn wanted(only: &Option<String>, cell: &str) -> bool {
    only.as_ref()
        .is_none_or(|o| o.split(',').any(|c| c == cell))
}

/// Runs the matrix (or the cells `only` names) and prints a `RESULT` line per cell.
pub fn main<H: Heap>(quick: bool, only: Option<String>) {
    let scale = if quick { 0.1 } else { 1.0 };
    let mut sink = 0u64;
    for (k, kind) in ["s128", "s512", "big"].into_iter().enumerate() {
        for order in ["pairs", "lifo", "fifo", "random", "none"] {
            for live in [64usize, 10_000] {
                let live = if order == "pairs" {
                    if live > 64 {
                        continue;
                    }
                    1
                } else {
                    live
                };
                if kind == "big" && live > 64 {
                    continue;
                }
                let cell = format!("{order}/{kind}/{live}");
                if !wanted(&only, &cell) {
                    continue;
                }
                let mut r = Rng(0x9E3779B97F4A7C15u64.wrapping_add(k as u64));
                // A pair region makes as many allocations as a region of 64 live blocks.
                let per = if order == "pairs" { 64 } else { live };
                let sizes = sizes_of(kind, per, &mut r);
                let mut perm: Vec<usize> = (0..per).collect();
                for i in (2..=per).rev() {
                    let j = (r.next() % i as u64) as usize;
                    perm.swap(i - 1, j);
                }
                let mut blocks = vec![std::ptr::null_mut(); per];
                let total = (if kind == "big" { 2e5 } else { 2e6 } * scale) as usize;
                let steps = total / per + 1;
                // Warm-up: the first region sizes the arena.
                region_step::<H>(order, &sizes, &perm, &mut blocks, &mut sink);
                let t0 = Instant::now();
                for _ in 0..steps {
                    region_step::<H>(order, &sizes, &perm, &mut blocks, &mut sink);
                }
                let ns = t0.elapsed().as_nanos() as f64 / (steps * per) as f64;
                println!("RESULT {cell} {ns:.2} ns");
            }
        }
    }
    let steps = (2000.0 * scale) as usize + 1;
    if wanted(&only, "tree/s48/1023") {
        let mut step = || {
            H::region(|| {
                let mut n = 0;
                // SAFETY: a tree built and dropped once.
                unsafe { drop_tree::<H>(build::<H>(9, &mut n), &mut sink) };
            })
        };
        step();
        let t0 = Instant::now();
        for _ in 0..steps {
            step();
        }
        let ns = t0.elapsed().as_nanos() as f64 / (steps * 1023) as f64;
        println!("RESULT tree/s48/1023 {ns:.2} ns");
    }
    type Grow = fn() -> (usize, usize);
    let grows: [(&str, Grow, usize); 3] = [
        ("grow/vec/13", H::grow_vec, 20_000),
        ("grow/string/256", H::grow_string, 4000),
        ("grow/mixed/64", H::grow_mixed, 500),
    ];
    for (cell, grow, n) in grows {
        if !wanted(&only, cell) {
            continue;
        }
        let n = (n as f64 * scale) as usize + 1;
        H::region(grow);
        let (mut ops, t0) = (0, Instant::now());
        for _ in 0..n {
            let (steps, check) = H::region(grow);
            ops += steps;
            sink += check as u64;
        }
        let ns = t0.elapsed().as_nanos() as f64 / ops as f64;
        println!("RESULT {cell} {ns:.2} ns");
    }
    black_box(sink);
}
