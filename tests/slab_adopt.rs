//! The small-block heap: an adopted page whose free list is not empty leaves the blocks other
//! threads freed to it on its `thread_free` list (no walk over them), and the allocation path
//! takes them once the free list runs out. Its own binary: the abandoned lists are process-wide,
//! and another test's pages of the same class would be adopted instead.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::thread;

use resizealloc::router::{alloc_small, free_small, owns_small};
use resizealloc::slab::PAGE_SIZE;
use resizealloc::stats;

const SIZE: usize = 1024; // the largest class: 63 blocks per 64 KiB page (128-byte header)
const BLOCKS: usize = 63 * 4; // four full pages

fn key_byte(p: usize) -> u8 {
    (p >> 4) as u8 ^ 0x5a
}

fn fill(p: usize) {
    // SAFETY: a live block of SIZE bytes.
    unsafe { std::ptr::write_bytes(p as *mut u8, key_byte(p), SIZE) };
}

fn intact(p: usize) -> bool {
    // SAFETY: a live block of SIZE bytes.
    (0..SIZE).all(|i| unsafe { *(p as *const u8).add(i) } == key_byte(p))
}

#[test]
fn an_adopted_page_serves_the_blocks_other_threads_freed_to_it() {
    let before = stats().small;
    // The producer fills four pages of one class, and stays alive (so its heap is not handed
    // to the thread that adopts).
    let (blocks_tx, blocks_rx) = mpsc::channel::<Vec<usize>>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let producer = thread::spawn(move || {
        let blocks: Vec<usize> = (0..BLOCKS)
            .map(|_| {
                let p = alloc_small(SIZE) as usize;
                assert!(p != 0 && owns_small(p as *mut u8));
                fill(p);
                p
            })
            .collect();
        // One more: the slow path that serves it sets the fourth page aside as full (a page
        // goes full when an allocation finds it without a free block).
        let extra = alloc_small(SIZE);
        blocks_tx.send(blocks).unwrap();
        done_rx.recv().unwrap();
        // SAFETY: our live block, freed once.
        unsafe { free_small(extra) };
    });
    let blocks = blocks_rx.recv().unwrap();
    let pages: BTreeSet<usize> = blocks.iter().map(|&p| p & !(PAGE_SIZE - 1)).collect();
    // This thread frees every other block: the first free to each full page detaches it onto
    // the abandoned list with that block on its free list; the later ones go to its
    // `thread_free` list.
    let freed: Vec<usize> = blocks.iter().step_by(2).copied().collect();
    let kept: Vec<usize> = blocks.iter().skip(1).step_by(2).copied().collect();
    for &p in &freed {
        assert!(intact(p));
        // SAFETY: a live block of the producer, freed once.
        unsafe { free_small(p as *mut u8) };
    }
    // A new thread allocates as many blocks of the class: it adopts the detached pages and,
    // once their free lists run out, takes the blocks waiting on `thread_free`. It needs no new
    // page: every block it gets is one this thread freed.
    let n = freed.len();
    let got: Vec<usize> = thread::spawn(move || {
        (0..n)
            .map(|_| {
                let p = alloc_small(SIZE) as usize;
                assert!(p != 0);
                p
            })
            .collect()
    })
    .join()
    .unwrap();
    let freed_set: BTreeSet<usize> = freed.iter().copied().collect();
    let reused = got.iter().filter(|p| freed_set.contains(p)).count();
    assert_eq!(
        reused,
        n,
        "every freed block served again, no new page ({} pages)",
        pages.len()
    );
    for &p in &kept {
        assert!(intact(p), "a live block kept its contents");
    }
    let after = stats().small;
    assert!(
        after.pages_adopted >= before.pages_adopted + pages.len() as u64,
        "{before:?} -> {after:?}"
    );
    for p in kept.into_iter().chain(got) {
        // SAFETY: live blocks, each freed once.
        unsafe { free_small(p as *mut u8) };
    }
    done_tx.send(()).unwrap();
    producer.join().unwrap();
}
