//! `ResizeAlloc` as the `#[global_allocator]` of this test binary: regions, escapes, threads,
//! the bounded-memory promise and a property test against a shadow model.
//!
//! The whole test harness allocates through `ResizeAlloc` too, which is a stress of its own.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::mpsc;

use proptest::prelude::*;
use resizealloc::{
    region, region_begin, region_depth, region_end, stats, RegionError, RegionGuard, ResizeAlloc,
    GRANULE,
};

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

fn in_arena<T>(p: *const T) -> bool {
    resizealloc::router::owns(p as *mut u8)
}

#[test]
fn allocations_inside_a_region_come_from_the_arena_and_outside_from_system() {
    let outside = Box::new(1u64);
    assert!(!in_arena(&*outside));
    region(|| {
        let inside = Box::new(2u64);
        assert!(in_arena(&*inside));
        assert_eq!(region_depth(), 1);
    });
    assert_eq!(region_depth(), 0);
    let after = Box::new(3u64);
    assert!(!in_arena(&*after));
}

#[test]
fn unbalanced_end_is_an_error_value() {
    assert_eq!(region_end(), Err(RegionError::NotInRegion));
    region_begin();
    assert_eq!(region_end(), Ok(()));
    assert_eq!(region_end(), Err(RegionError::NotInRegion));
    assert_eq!(region_depth(), 0);
}

#[test]
fn nested_regions_reset_only_at_the_outermost_end() {
    region(|| {
        let resizes = stats().thread.resizes;
        // On the heap on purpose: a block of the outer region that the nested ends must keep.
        #[allow(clippy::useless_vec)]
        let outer = vec![1u8; 100];
        for _ in 0..100 {
            region(|| {
                let v = vec![7u8; 10_000];
                assert_eq!(v.iter().map(|&b| b as usize).sum::<usize>(), 70_000);
            });
        }
        assert_eq!(region_depth(), 1);
        assert_eq!(
            stats().thread.resizes,
            resizes,
            "a nested end resized the arena"
        );
        assert!(outer.iter().all(|&b| b == 1));
        // The nested regions gave their memory back: the outer one is still small.
        assert!(stats().thread.arena_committed < 4 << 20);
    });
}

#[test]
fn guard_ends_the_region_on_drop_and_on_unwind() {
    {
        let _g = RegionGuard::enter();
        assert_eq!(region_depth(), 1);
    }
    assert_eq!(region_depth(), 0);
    let r = std::panic::catch_unwind(|| region(|| panic!("inside")));
    assert!(r.is_err());
    assert_eq!(region_depth(), 0);
}

#[test]
fn a_vec_that_escapes_keeps_its_contents_across_thousands_of_regions() {
    let escaped: Vec<u64> = region(|| (0..1000).collect());
    assert!(in_arena(escaped.as_ptr()));
    for i in 0..5000u64 {
        region(|| {
            let junk: Vec<u64> = vec![i; 2000];
            std::hint::black_box(&junk);
        });
    }
    assert!(
        escaped.iter().copied().eq(0..1000),
        "escaped contents were overwritten"
    );
    // Growing it outside a region moves it out of the arena.
    let mut escaped = escaped;
    escaped.extend(1000..100_000);
    assert!(!in_arena(escaped.as_ptr()));
    assert!(escaped.iter().copied().eq(0..100_000));
}

#[test]
fn an_escaped_vec_can_be_freed_on_another_thread() {
    let v: Vec<u64> = region(|| (0..4096).collect());
    let t = std::thread::spawn(move || {
        assert!(v.iter().copied().eq(0..4096));
        drop(v);
    });
    t.join().unwrap();
    // The arena keeps working and never hands that memory out twice.
    for _ in 0..1000 {
        region(|| {
            let a: Vec<u64> = (0..4096).collect();
            assert!(a.iter().copied().eq(0..4096));
        });
    }
}

#[test]
fn blocks_outlive_the_thread_that_made_them() {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let kept: Vec<Vec<u32>> = region(|| (0..64).map(|i| vec![i; 1000]).collect());
        tx.send(kept).unwrap();
    });
    t.join().unwrap();
    let kept = rx.recv().unwrap();
    assert!(stats().process.arenas_orphaned >= 1);
    for _ in 0..2000 {
        region(|| std::hint::black_box(vec![0xFFu32; 5000]));
    }
    for (i, v) in kept.iter().enumerate() {
        assert!(
            v.iter().all(|&x| x == i as u32),
            "block of an exited thread was reused"
        );
    }
    drop(kept); // the last free releases the orphaned arena
}

/// Every region leaks one small object and frees it 100 regions later: memory stays within
/// the no-escape footprint plus one granule per escaped object and an eighth more. (The
/// regions' runs step over the granules the escapes pin; a region's 48 KiB temporary does not
/// fit in the three free granules between two pins until one of them is freed, and those
/// holes are the eighth.)
#[test]
fn escapes_cost_at_most_one_granule_each() {
    let work = |i: usize| {
        let v: Vec<u8> = vec![i as u8; 48 * 1024];
        std::hint::black_box(&v);
    };
    // Footprint without escapes, on a fresh thread so the arena is this test's alone.
    let footprint = std::thread::spawn(move || {
        for i in 0..300 {
            region(|| work(i));
        }
        stats().thread.arena_committed
    })
    .join()
    .unwrap();
    let (worst, committed_at_end) = std::thread::spawn(move || {
        let mut pending: std::collections::VecDeque<Box<[u8; 24]>> = Default::default();
        let mut worst = 0;
        for i in 0..2000 {
            region(|| {
                work(i);
                pending.push_back(Box::new([i as u8; 24]));
            });
            if pending.len() > 100 {
                let old = pending.pop_front().unwrap();
                assert!(old.iter().all(|&b| b == (i - 100) as u8));
            }
            worst = worst.max(stats().thread.arena_committed);
        }
        (worst, stats().thread.arena_committed)
    })
    .join()
    .unwrap();
    let bound = footprint + (101 + 101 / 8) * GRANULE as u64;
    println!("footprint {footprint} B, worst with escapes {worst} B, bound {bound} B, at end {committed_at_end} B");
    assert!(
        worst <= bound,
        "escapes cost more than a granule each: {worst} > {bound}"
    );
}

#[test]
fn two_threads_one_million_operations_with_cross_thread_frees() {
    const OPS: usize = 600_000; // per thread: 1.2 million allocations plus their frees
    let (tx_a, rx_b) = mpsc::sync_channel::<Vec<Box<[u64]>>>(64);
    let (tx_b, rx_a) = mpsc::sync_channel::<Vec<Box<[u64]>>>(64);
    let worker =
        |tx: mpsc::SyncSender<Vec<Box<[u64]>>>, rx: mpsc::Receiver<Vec<Box<[u64]>>>, seed: u64| {
            move || {
                let mut rng = seed;
                let mut ops = 0;
                while ops < OPS {
                    let batch: Vec<Box<[u64]>> = region(|| {
                        let mut keep = Vec::new();
                        for _ in 0..256 {
                            rng ^= rng << 13;
                            rng ^= rng >> 7;
                            rng ^= rng << 17;
                            let n = 1 + (rng % 64) as usize;
                            let b: Box<[u64]> = vec![rng; n].into_boxed_slice();
                            if rng.is_multiple_of(4) {
                                keep.push(b);
                            }
                            ops += 1;
                        }
                        keep
                    });
                    let _ = tx.try_send(batch);
                    while let Ok(theirs) = rx.try_recv() {
                        for b in theirs {
                            assert!(b.iter().all(|&x| x == b[0]), "cross-thread block corrupted");
                        }
                    }
                }
                drop(tx);
                for theirs in rx {
                    for b in theirs {
                        assert!(b.iter().all(|&x| x == b[0]));
                    }
                }
            }
        };
    let a = std::thread::spawn(worker(tx_a, rx_a, 0x9E37_79B9_7F4A_7C15));
    let b = std::thread::spawn(worker(tx_b, rx_b, 0xD1B5_4A32_D192_ED03));
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
fn bad_layouts_get_null_not_a_crash() {
    // black_box: LLVM may otherwise drop an unused malloc and assume it succeeded.
    use std::hint::black_box;
    region(|| {
        // SAFETY: GlobalAlloc contract: a valid layout; huge sizes must fail with null.
        let p = black_box(unsafe {
            A.alloc(black_box(
                Layout::from_size_align(isize::MAX as usize - 4096, 16).unwrap(),
            ))
        });
        assert!(p.is_null(), "huge size: {p:p}, in arena: {}", in_arena(p));
        // SAFETY: as above.
        let p = black_box(unsafe {
            A.alloc(black_box(
                Layout::from_size_align(1 << 40, 1 << 20).unwrap(),
            ))
        });
        assert!(
            p.is_null(),
            "huge alignment: {p:p}, in arena: {}",
            in_arena(p)
        );
    });
}

#[test]
fn alignments_through_the_global_allocator() {
    region(|| {
        for shift in 0..=20 {
            let layout = Layout::from_size_align(100, 1 << shift).unwrap();
            // SAFETY: non-zero layout; freed below with the same layout.
            unsafe {
                let p = A.alloc(layout);
                assert!(!p.is_null() && (p as usize).is_multiple_of(1 << shift));
                p.write_bytes(1, 100);
                let q = A.realloc(p, layout, 5000);
                assert!((q as usize).is_multiple_of(1 << shift));
                assert_eq!(*q.add(99), 1);
                A.dealloc(q, Layout::from_size_align(5000, 1 << shift).unwrap());
            }
        }
    });
}

#[test]
fn zeroed_allocations_are_zero_even_on_reused_memory() {
    for _ in 0..10 {
        region(|| {
            let v = vec![0xAAu8; 4096];
            drop(v);
            let z = vec![0u8; 4096];
            assert!(z.iter().all(|&b| b == 0));
        });
    }
}

#[test]
fn repeated_work_has_zero_overflow_after_the_first_region() {
    std::thread::spawn(|| {
        let work = || {
            let vs: Vec<Vec<u8>> = (0..200).map(|i| vec![1u8; 1000 + i * 37]).collect();
            std::hint::black_box(vs);
        };
        region(work);
        let s = stats().thread;
        // A fresh arena (64 KiB planned) overflows in this first region; one that an exited
        // thread of another test handed on may be planned for it already.
        assert!(
            s.overflow_allocs > 0 || s.arena_capacity >= s.high_water,
            "the first region neither overflowed nor fitted: {s:?}"
        );
        for _ in 0..100 {
            region(work);
        }
        assert_eq!(
            stats().thread.overflow_allocs,
            s.overflow_allocs,
            "{s:?} {:?}",
            stats().thread
        );
        assert!(stats().thread.arena_capacity >= s.high_water);
    })
    .join()
    .unwrap();
}

// ------------------------------------------------------------------------------ property test

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        size: usize,
        align_shift: u8,
    },
    Free(usize),
    Realloc {
        index: usize,
        size: usize,
    },
    Begin,
    End,
    /// Another thread frees the block (its arena's remote free, or the next allocator's).
    FreeElsewhere(usize),
    /// A short-lived thread: frees `frees` of the live blocks (made by this thread or by
    /// earlier ones, whose arena it may have adopted), runs a region of `allocs` blocks, keeps
    /// `keep` of them past its region and its own exit (they join the live blocks, freed later
    /// by this thread or by the next ones), frees the rest and exits.
    Thread {
        frees: u8,
        allocs: u8,
        keep: u8,
        seed: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..20_000, 0u8..8).prop_map(|(size, align_shift)| Op::Alloc { size, align_shift }),
        3 => any::<usize>().prop_map(Op::Free),
        2 => (any::<usize>(), 1usize..40_000).prop_map(|(index, size)| Op::Realloc { index, size }),
        1 => Just(Op::Begin),
        1 => Just(Op::End),
        1 => any::<usize>().prop_map(Op::FreeElsewhere),
        1 => (0u8..4, 1u8..60, 0u8..4, any::<u64>()).prop_map(|(frees, allocs, keep, seed)| Op::Thread { frees, allocs, keep, seed }),
    ]
}

/// A block handed to another thread (raw pointers are not `Send`).
struct Sent(usize, Layout, u8);

/// Checks the contents of a live block handed over and frees it.
fn check_and_free(Sent(p, layout, fill): Sent) {
    check_block(&Block {
        ptr: p as *mut u8,
        layout,
        fill,
        mine: false,
    });
    // SAFETY: a live block handed over to be freed once, with its layout.
    unsafe { A.dealloc(p as *mut u8, layout) };
}

/// [`Op::Thread`]'s thread: frees `frees`, then in a region allocates `allocs` blocks of sizes
/// drawn from `seed` and keeps `keep` of them; returns the kept ones.
fn short_thread(frees: Vec<Sent>, allocs: u8, keep: u8, seed: u64) -> Vec<Sent> {
    std::thread::spawn(move || {
        for b in frees {
            check_and_free(b);
        }
        let mut x = seed | 1;
        region(|| {
            let mut made = Vec::new();
            for i in 0..allocs {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let layout = Layout::from_size_align(1 + (x % 3000) as usize, 16).unwrap();
                // SAFETY: non-zero layout.
                let p = unsafe { A.alloc(layout) };
                assert!(!p.is_null());
                let fill = 0x80 | i;
                // SAFETY: fresh block of `layout.size()` bytes.
                unsafe { p.write_bytes(fill, layout.size()) };
                made.push(Sent(p as usize, layout, fill));
            }
            let kept: Vec<Sent> = made.drain(..(keep as usize).min(made.len())).collect();
            for b in made {
                check_and_free(b);
            }
            kept
        })
    })
    .join()
    .unwrap()
}

struct Block {
    ptr: *mut u8,
    layout: Layout,
    fill: u8,
    /// Made by the test's thread (the others' arenas are theirs or orphaned: only their owner
    /// may check their invariants).
    mine: bool,
}

fn check_block(b: &Block) {
    // SAFETY: live block of `layout.size()` bytes.
    let s = unsafe { std::slice::from_raw_parts(b.ptr, b.layout.size()) };
    assert!(s.iter().all(|&x| x == b.fill), "block contents changed");
}

fn check_model(live: &[Block]) {
    let mut spans: Vec<(usize, usize)> = live
        .iter()
        .map(|b| (b.ptr as usize, b.ptr as usize + b.layout.size()))
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "live blocks overlap: {:x?} {:x?}",
            w[0],
            w[1]
        );
    }
    for b in live {
        check_block(b);
    }
    // Granule counts agree with the shadow model: the granules a live arena block of this
    // thread starts (header) and ends in have units on them. The block ends at its usable size,
    // which may exceed the layout's (a block `realloc` moved got slack to grow into).
    for b in live {
        if b.mine && in_arena(b.ptr) {
            // SAFETY: a live arena block.
            let arena = unsafe { resizealloc::reservation::arena_of(b.ptr) };
            // SAFETY: a live arena block.
            let usable = unsafe { resizealloc::router::usable_size(b.ptr) };
            assert!(usable >= b.layout.size(), "usable size below the layout's");
            assert!(
                arena.live_at(b.ptr as usize - resizealloc::arena::HEADER) > 0
                    && arena.live_at(b.ptr as usize + usable - 1) > 0
            );
            arena.check_invariants().unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn random_operations_never_overlap_and_keep_contents(ops in proptest::collection::vec(op(), 1..300)) {
        let mut live: Vec<Block> = Vec::new();
        let mut depth = 0;
        let mut fill = 0u8;
        for op in ops {
            match op {
                Op::Alloc { size, align_shift } => {
                    let layout = Layout::from_size_align(size, 1 << align_shift).unwrap();
                    // SAFETY: non-zero layout.
                    let ptr = unsafe { A.alloc(layout) };
                    prop_assert!(!ptr.is_null());
                    prop_assert_eq!(ptr as usize % layout.align(), 0);
                    fill = fill.wrapping_add(1);
                    // SAFETY: fresh block.
                    unsafe { ptr.write_bytes(fill, size) };
                    live.push(Block { ptr, layout, fill, mine: true });
                }
                Op::Free(i) if !live.is_empty() => {
                    let b = live.swap_remove(i % live.len());
                    check_block(&b);
                    // SAFETY: live block freed once with its layout.
                    unsafe { A.dealloc(b.ptr, b.layout) };
                }
                Op::Realloc { index, size } if !live.is_empty() => {
                    let i = index % live.len();
                    let b = &mut live[i];
                    // SAFETY: live block; new size non-zero.
                    let q = unsafe { A.realloc(b.ptr, b.layout, size) };
                    prop_assert!(!q.is_null());
                    let keep = b.layout.size().min(size);
                    // SAFETY: the first `keep` bytes survive realloc; the rest is ours to fill.
                    unsafe {
                        prop_assert!(std::slice::from_raw_parts(q, keep).iter().all(|&x| x == b.fill));
                        q.write_bytes(b.fill, size);
                    }
                    b.ptr = q;
                    b.layout = Layout::from_size_align(size, b.layout.align()).unwrap();
                }
                Op::FreeElsewhere(i) if !live.is_empty() => {
                    let b = live.swap_remove(i % live.len());
                    check_block(&b);
                    let sent = Sent(b.ptr as usize, b.layout, b.fill);
                    std::thread::spawn(move || {
                        let Sent(p, layout, _) = sent;
                        // SAFETY: a live block handed over to be freed once, with its layout.
                        unsafe { A.dealloc(p as *mut u8, layout) };
                    })
                    .join()
                    .unwrap();
                }
                Op::Thread { frees, allocs, keep, seed } => {
                    let n = (frees as usize).min(live.len());
                    let handed: Vec<Sent> = live
                        .drain(live.len() - n..)
                        .map(|b| Sent(b.ptr as usize, b.layout, b.fill))
                        .collect();
                    for Sent(p, layout, fill) in short_thread(handed, allocs, keep, seed) {
                        live.push(Block { ptr: p as *mut u8, layout, fill, mine: false });
                    }
                }
                Op::Begin => {
                    region_begin();
                    depth += 1;
                }
                Op::End => {
                    let r = region_end();
                    if depth == 0 {
                        prop_assert_eq!(r, Err(RegionError::NotInRegion));
                    } else {
                        prop_assert_eq!(r, Ok(()));
                        depth -= 1;
                    }
                }
                _ => {}
            }
            check_model(&live);
        }
        for b in live {
            // SAFETY: live block freed once.
            unsafe { A.dealloc(b.ptr, b.layout) };
        }
        while depth > 0 {
            region_end().unwrap();
            depth -= 1;
        }
    }
}

/// Exited threads' arenas are released by whichever free is last, while other frees of the same
/// arena may still be in flight on other threads (the release handshake must not touch the
/// arena after its final add).
#[test]
fn concurrent_last_frees_of_exited_threads_release_each_arena_once() {
    for _ in 0..50 {
        let blocks: Vec<Box<[u8]>> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    region(|| {
                        (0..64)
                            .map(|k| vec![(i + k) as u8; 200].into_boxed_slice())
                            .collect::<Vec<_>>()
                    })
                })
            })
            .flat_map(|t| t.join().unwrap())
            .collect();
        for (n, b) in blocks.iter().enumerate() {
            let expected = (n / 64 + n % 64) as u8;
            assert!(
                b.iter().all(|&x| x == expected),
                "a block of an exited thread changed"
            );
        }
        let (a, b): (Vec<_>, Vec<_>) = blocks
            .into_iter()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        let ta = std::thread::spawn(move || drop(a));
        let tb = std::thread::spawn(move || drop(b));
        ta.join().unwrap();
        tb.join().unwrap();
    }
}
