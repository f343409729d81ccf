//! The Rust front end in process mode: small requests come from the small-block heap (slab/),
//! as in `libresizealloc.so`, and its blocks are freed, grown, shrunk and zeroed through
//! `ResizeAlloc` on any thread. Its own binary: it switches the whole process to process mode.

use std::alloc::{GlobalAlloc, Layout};

use resizealloc::options::{self, Options, RegionMode};
use resizealloc::{slab, ResizeAlloc};

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

fn is_small_heap<T: ?Sized>(p: *const T) -> bool {
    slab::owns(p as *const u8)
}

#[test]
fn process_mode_serves_small_requests_from_the_small_block_heap() {
    options::set(Options {
        region: RegionMode::Process,
        ..options::get()
    });
    // A new thread: its arena and heap are made in process mode.
    std::thread::spawn(|| {
        let b = Box::new([7u8; 100]);
        assert!(
            is_small_heap(&*b),
            "a small box comes from the small-block heap"
        );

        // Grown through realloc from the heap to a larger side and back, contents kept.
        let mut v: Vec<u32> = Vec::with_capacity(4);
        assert!(is_small_heap(v.as_ptr()));
        for i in 0..2000u32 {
            v.push(i.wrapping_mul(2_654_435_761));
        }
        assert!(!is_small_heap(v.as_ptr()), "8,000 bytes are not small");
        v.truncate(50);
        v.shrink_to_fit(); // the arena shrinks its blocks in place
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i as u32).wrapping_mul(2_654_435_761)));

        // Zeroed blocks over reused, dirty ones read as zero.
        for _ in 0..100 {
            drop(vec![0xAAu8; 512]);
            let z = vec![0u8; 512];
            assert!(is_small_heap(z.as_ptr()));
            assert!(
                z.iter().all(|&x| x == 0),
                "alloc_zeroed over a reused block"
            );
        }

        // An alignment the heap does not give goes elsewhere, and comes back whole.
        let layout = Layout::from_size_align(100, 64).unwrap();
        // SAFETY: a valid layout; freed below with it.
        let p = unsafe { A.alloc(layout) };
        assert!(!p.is_null() && (p as usize).is_multiple_of(64) && !is_small_heap(p));
        // SAFETY: allocated above with this layout.
        unsafe { A.dealloc(p, layout) };

        // In place while the new size fits the block's class, moved when it does not.
        let layout = Layout::from_size_align(300, 16).unwrap();
        // SAFETY: a valid layout.
        let p = unsafe { A.alloc(layout) };
        assert!(is_small_heap(p));
        // SAFETY: a fresh block of 300 bytes.
        unsafe { p.write_bytes(0x33, 300) };
        // SAFETY: a live block of `A` with `layout`; 200 bytes fit its class.
        let q = unsafe { A.realloc(p, layout, 200) };
        assert_eq!(q, p, "shrinking within the class keeps the block");
        // SAFETY: as above, now 200 bytes.
        let r = unsafe { A.realloc(q, Layout::from_size_align(200, 16).unwrap(), 20) };
        assert_ne!(r, q, "a much smaller size moves to a smaller class");
        // SAFETY: `r` is live with at least 20 bytes.
        assert!(unsafe { std::slice::from_raw_parts(r, 20) }
            .iter()
            .all(|&x| x == 0x33));
        // SAFETY: allocated by `A`, 20 bytes now.
        unsafe { A.dealloc(r, Layout::from_size_align(20, 16).unwrap()) };

        // Blocks freed by another thread.
        let boxes: Vec<Box<[u64; 8]>> = (0..10_000u64).map(|i| Box::new([i; 8])).collect();
        assert!(boxes.iter().all(|b| is_small_heap(&**b)));
        std::thread::spawn(move || {
            for (i, b) in boxes.into_iter().enumerate() {
                assert!(b.iter().all(|&x| x == i as u64));
            }
        })
        .join()
        .unwrap();
        assert_eq!(b[99], 7);
    })
    .join()
    .unwrap();
}
