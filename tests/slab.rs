//! The small-block heap (src/slab/) through the router's functions, as the preload library
//! uses it: blocks freed on their own thread and on others, full pages taken back or detached,
//! pages left by exited threads, memory given back, and a property test against a shadow model.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread;

use proptest::prelude::*;
use resizealloc::router::{alloc_small, free_small, owns_small, usable_size_small};
use resizealloc::slab::{self, MAX_SMALL, PAGE_SIZE};
use resizealloc::stats;

fn fill(p: *mut u8, n: usize, key: u64) {
    for i in 0..n {
        // SAFETY: `p` is a live block of at least `n` bytes (callers).
        unsafe { *p.add(i) = (key as u8).wrapping_mul(31).wrapping_add(i as u8) };
    }
}

fn intact(p: *const u8, n: usize, key: u64) -> bool {
    // SAFETY: as in `fill`.
    (0..n).all(|i| unsafe { *p.add(i) } == (key as u8).wrapping_mul(31).wrapping_add(i as u8))
}

/// A block that may be sent to another thread to be freed there.
struct Sent(usize, usize, u64);

fn alloc_checked(size: usize, key: u64) -> Sent {
    let p = alloc_small(size);
    assert!(!p.is_null(), "alloc_small({size})");
    assert!(owns_small(p), "served by the small-block heap");
    assert_eq!(p as usize % 16, 0, "16-byte alignment");
    // SAFETY: a live small-block heap block.
    let usable = unsafe { usable_size_small(p) };
    assert!(usable >= size && usable <= size.max(16) * 5 / 4 + 16);
    fill(p, size, key);
    Sent(p as usize, size, key)
}

fn free_checked(b: Sent) {
    let p = b.0 as *mut u8;
    assert!(
        intact(p, b.1, b.2),
        "block {:#x} of {} bytes intact",
        b.0,
        b.1
    );
    // SAFETY: a live block handed out by `alloc_checked`, freed once.
    unsafe { free_small(p) };
}

#[test]
fn requests_outside_the_small_range_are_declined() {
    assert!(alloc_small(0).is_null());
    assert!(alloc_small(MAX_SMALL + 1).is_null());
    assert!(alloc_small(usize::MAX).is_null());
    let b = alloc_checked(MAX_SMALL, 1);
    free_checked(b);
    let b = alloc_checked(1, 2);
    free_checked(b);
}

#[test]
fn blocks_freed_on_other_threads_are_reused_and_full_pages_change_hands() {
    let before = stats().small;
    // The producer fills pages (they go full), the consumer frees every other block of them on
    // its thread (each page's first such free detaches it, half live, onto the abandoned list),
    // and the producer's next batch adopts those pages.
    let (to_consumer, batches) = mpsc::channel::<Vec<Sent>>();
    let (to_producer, acks) = mpsc::channel::<()>();
    let consumer = thread::spawn(move || {
        let mut kept = Vec::new();
        for batch in batches {
            for (i, b) in batch.into_iter().enumerate() {
                if i % 2 == 0 {
                    free_checked(b);
                } else {
                    kept.push(b);
                }
            }
            to_producer.send(()).unwrap();
        }
        kept
    });
    let producer = thread::spawn(move || {
        let mut last = Vec::new();
        for round in 0..3u64 {
            let batch: Vec<Sent> = (0..20_000u64)
                .map(|k| alloc_checked(40, round << 32 | k))
                .collect();
            if round == 2 {
                last = batch;
                break;
            }
            to_consumer.send(batch).unwrap();
            acks.recv().unwrap();
        }
        drop(to_consumer);
        last
    });
    let last = producer.join().unwrap();
    let kept = consumer.join().unwrap();
    let after = stats().small;
    assert!(
        after.pages_adopted > before.pages_adopted,
        "detached pages adopted: {before:?} -> {after:?}"
    );
    for b in kept.into_iter().chain(last) {
        free_checked(b);
    }
}

#[test]
fn blocks_outlive_their_thread_and_its_pages_are_settled() {
    let before = stats().small;
    let kept: Vec<Vec<Sent>> = (0..4u64)
        .map(|t| {
            thread::spawn(move || {
                (0..3_000u64)
                    .map(|k| alloc_checked(16 + (k as usize * 7) % 300, t << 32 | k))
                    .collect::<Vec<_>>()
            })
            .join()
            .unwrap()
        })
        .collect();
    // The threads are gone: their pages are abandoned. Free half, let a new thread allocate
    // (it adopts abandoned pages), then free the rest: every page is given back.
    let mut rest = Vec::new();
    for v in kept {
        for (i, b) in v.into_iter().enumerate() {
            if i % 2 == 0 {
                free_checked(b);
            } else {
                rest.push(b);
            }
        }
    }
    let fresh = thread::spawn(|| {
        (0..6_000u64)
            .map(|k| alloc_checked(16 + (k as usize * 7) % 300, 99 << 32 | k))
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    for b in rest.into_iter().chain(fresh) {
        free_checked(b);
    }
    // Empty pages are kept warm up to a bound, then given back; the warm ones go on a trim.
    slab::trim_warm();
    let after = stats().small;
    assert!(
        after.pages_adopted > before.pages_adopted,
        "{before:?} -> {after:?}"
    );
    assert!(
        after.pages_given_back > before.pages_given_back,
        "{before:?} -> {after:?}"
    );
}

#[test]
fn bulk_frees_give_pages_back() {
    let before = stats().small;
    let n = 200_000u64;
    // (Only the count of pages given back can be compared: tests running at the same time
    // take and return pages too.)
    let v: Vec<Sent> = (0..n).map(|k| alloc_checked(64, k)).collect();
    let bytes = (n as usize * 64) as u64;
    for b in v {
        free_checked(b);
    }
    // All but the pages kept warm for the next heap (at most `WARM_PAGES`) once the purge
    // delay is over (up to 512 more wait for it): the pool looks whenever it takes back or
    // hands out a page.
    std::thread::sleep(std::time::Duration::from_millis(
        resizealloc::options::purge_delay_ms() as u64 + 50,
    ));
    let w: Vec<Sent> = (0..20_000).map(|k| alloc_checked(64, k)).collect();
    for b in w {
        free_checked(b);
    }
    let after = stats().small;
    let pages = bytes / PAGE_SIZE as u64 - slab::WARM_PAGES as u64;
    assert!(
        after.pages_given_back - before.pages_given_back >= pages * 9 / 10,
        "{pages} pages of blocks freed, {before:?} -> {after:?}"
    );
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize),
    /// Free the live block at this index (modulo the number live), here.
    Free(usize),
    /// Free it on another thread.
    FreeRemote(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1..=MAX_SMALL).prop_map(Op::Alloc),
        2 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::FreeRemote),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Live blocks never overlap and keep their contents, whatever mix of local and remote
    /// frees came before.
    #[test]
    fn no_overlap_and_contents_intact(ops in proptest::collection::vec(op(), 1..600)) {
        let (tx, rx) = mpsc::channel::<Sent>();
        let remote = thread::spawn(move || {
            for b in rx {
                free_checked(b);
            }
        });
        let mut live: Vec<Sent> = Vec::new();
        let mut by_addr: BTreeMap<usize, usize> = BTreeMap::new();
        for (k, o) in ops.into_iter().enumerate() {
            match o {
                Op::Alloc(size) => {
                    let b = alloc_checked(size, k as u64);
                    // SAFETY: live block.
                    let usable = unsafe { usable_size_small(b.0 as *mut u8) };
                    if let Some((&a, &len)) = by_addr.range(..=b.0).next_back() {
                        prop_assert!(a + len <= b.0, "overlaps the block below");
                    }
                    if let Some((&a, _)) = by_addr.range(b.0 + 1..).next() {
                        prop_assert!(b.0 + usable <= a, "overlaps the block above");
                    }
                    by_addr.insert(b.0, usable);
                    live.push(b);
                }
                Op::Free(i) | Op::FreeRemote(i) if !live.is_empty() => {
                    let b = live.swap_remove(i % live.len());
                    by_addr.remove(&b.0);
                    if matches!(o, Op::Free(_)) {
                        free_checked(b);
                    } else {
                        prop_assert!(intact(b.0 as *const u8, b.1, b.2));
                        tx.send(b).unwrap();
                    }
                }
                _ => {}
            }
        }
        for b in &live {
            prop_assert!(intact(b.0 as *const u8, b.1, b.2));
        }
        for b in live {
            free_checked(b);
        }
        drop(tx);
        remote.join().unwrap();
    }
}

#[test]
fn class_sizes_are_what_usable_size_reports() {
    for size in [1, 16, 17, 128, 129, 500, 1000, MAX_SMALL] {
        let b = alloc_checked(size, size as u64);
        // SAFETY: live block.
        let usable = unsafe { usable_size_small(b.0 as *mut u8) };
        assert_eq!(
            usable,
            slab::CLASS_SIZE[slab::class_of(size)] as usize,
            "size {size}"
        );
        free_checked(b);
    }
}
