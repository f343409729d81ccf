//! Arenas of exited threads handed on to new threads (`reservation::retire_arena`): a released
//! arena parked with its warm memory and reused, and an orphaned process-mode arena, live
//! blocks included, adopted by the next thread that wants an arena.
//!
//! One test function runs the scenarios in turn: they count arenas of the whole process, so no
//! other test's thread may start or exit meanwhile.

use std::alloc::{GlobalAlloc, Layout};

use resizealloc::options::{self, Options, RegionMode};
use resizealloc::{lifetime, region, stats, ResizeAlloc};

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

#[test]
fn arenas_of_exited_threads_are_handed_on() {
    for (name, scenario) in [
        (
            "adoption",
            a_new_thread_adopts_the_arena_of_an_exited_one_with_its_live_blocks as fn(),
        ),
        (
            "parking",
            an_arena_with_nothing_live_is_reused_warm_and_its_memory_is_not_taken_for_zero,
        ),
        (
            "trim",
            trim_gives_back_the_warm_memory_of_arenas_without_an_owner,
        ),
        ("race", adoption_and_last_frees_race_without_losing_a_block),
    ] {
        // Start from no parked arena and no warm orphan.
        resizealloc::trim();
        eprintln!("scenario: {name}");
        scenario();
    }
}

/// Markers mode (only regions use the arena) or process mode (every thread has one). New
/// threads' arenas follow; arenas made before keep theirs.
fn set_mode(region: RegionMode) {
    options::set(Options {
        region,
        ..options::get()
    });
}

/// Process mode, with the sizes the scenario allocates predicted short-lived: the Rust front
/// end has no allocation sites, so the blocks the scenarios keep across thread exits would
/// otherwise teach the predictor to route their size classes away from the arena.
fn process_mode(sizes: &[usize]) {
    set_mode(RegionMode::Process);
    for &size in sizes {
        lifetime::learn_short(lifetime::key(0, size), u8::MAX);
    }
}

/// The slot (arena) a block of the reservation lies in.
fn slot_of(p: usize) -> usize {
    assert!(
        resizealloc::router::owns(p as *mut u8),
        "{p:#x} is not an arena block"
    );
    p & !(resizealloc::reservation::slot_size() - 1)
}

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 16).unwrap()
}

/// Allocates `size` bytes in a region of a new thread, fills them with `byte`, and returns
/// the block's address (kept: nothing frees it) after the thread has exited.
fn block_of_an_exited_thread(size: usize, byte: u8) -> usize {
    std::thread::spawn(move || {
        region(|| {
            // SAFETY: a valid layout; the block is freed by `check_and_free` with it.
            let p = unsafe { A.alloc(layout(size)) };
            assert!(!p.is_null());
            // SAFETY: a fresh block of `size` bytes.
            unsafe { p.write_bytes(byte, size) };
            p as usize
        })
    })
    .join()
    .unwrap()
}

/// Frees a block of [`block_of_an_exited_thread`] after checking its contents.
fn check_and_free(p: usize, size: usize, byte: u8) {
    // SAFETY: a live block of `size` bytes (see block_of_an_exited_thread).
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, size) };
    assert!(bytes.iter().all(|&b| b == byte), "a kept block changed");
    // SAFETY: allocated by `A` with this layout, freed once.
    unsafe { A.dealloc(p as *mut u8, layout(size)) };
}

fn a_new_thread_adopts_the_arena_of_an_exited_one_with_its_live_blocks() {
    process_mode(&[3000, 1200, 5000]);
    let kept = block_of_an_exited_thread(3000, 0x5A);
    let orphaned = stats().process.arenas_orphaned;
    assert!(orphaned >= 1, "the kept block holds the arena: {orphaned}");
    let (adopted_slot, freed_inside) = std::thread::spawn(move || {
        // Temporaries all over the arena must go round the kept block.
        let mut slot = 0;
        for round in 0..200u32 {
            let v: Vec<Vec<u32>> = (0..16).map(|i| vec![round ^ i; 300]).collect();
            slot = slot_of(v[0].as_ptr() as usize);
            for (i, x) in v.iter().enumerate() {
                assert!(x.iter().all(|&y| y == round ^ i as u32));
            }
        }
        // The adopter frees the old owner's block (an owner free now).
        check_and_free(kept, 3000, 0x5A);
        let after = Box::new([7u8; 5000]);
        (slot, slot_of(after.as_ptr() as usize) == slot)
    })
    .join()
    .unwrap();
    assert_eq!(
        adopted_slot,
        slot_of(kept),
        "the new thread took the exited thread's arena"
    );
    assert!(freed_inside);
    assert!(
        stats().process.arenas_orphaned < orphaned,
        "adopted: no longer orphaned"
    );
}

fn an_arena_with_nothing_live_is_reused_warm_and_its_memory_is_not_taken_for_zero() {
    set_mode(RegionMode::Markers);
    // A thread dirties memory and frees all of it: its arena is released and parked.
    let dirty_slot = std::thread::spawn(|| {
        region(|| {
            let v: Vec<Vec<u8>> = (0..64).map(|_| vec![0xEEu8; 4000]).collect();
            slot_of(v[0].as_ptr() as usize)
        })
    })
    .join()
    .unwrap();
    // The next thread gets that arena, warm: zeroed allocations must still read zero.
    let (slot, faults) = std::thread::spawn(|| {
        region(|| {
            let before = minor_faults();
            let v: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 4000]).collect();
            let faults = minor_faults() - before;
            for x in &v {
                assert!(x.iter().all(|&b| b == 0), "calloc memory not zero");
            }
            (slot_of(v[0].as_ptr() as usize), faults)
        })
    })
    .join()
    .unwrap();
    assert_eq!(slot, dirty_slot, "the released arena was parked and reused");
    // 256 KiB of fresh pages would be 64 faults; warm ones take almost none.
    assert!(faults < 32, "{faults} page faults on warm memory");
}

fn trim_gives_back_the_warm_memory_of_arenas_without_an_owner() {
    let touch_256k = || {
        let v: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 4000]).collect();
        std::hint::black_box(&v);
    };
    // A parked arena (markers mode), then an orphan that kept its warm start (process mode).
    set_mode(RegionMode::Markers);
    std::thread::spawn(move || region(touch_256k))
        .join()
        .unwrap();
    assert_trim_gives_back_200k("a parked arena's memory");
    process_mode(&[4000, 3000]);
    let kept = std::thread::spawn(move || {
        touch_256k();
        // SAFETY: a valid layout; freed by `check_and_free` with it.
        let p = unsafe { A.alloc(layout(3000)) };
        // SAFETY: a fresh block of 3000 bytes.
        unsafe { p.write_bytes(3, 3000) };
        p as usize
    })
    .join()
    .unwrap();
    slot_of(kept);
    assert_trim_gives_back_200k("an orphan's warm memory");
    check_and_free(kept, 3000, 3);
}

/// `resizealloc::trim` takes the process's resident bytes down by at least 200 KiB (`what`
/// kept 256 KiB warm).
fn assert_trim_gives_back_200k(what: &str) {
    let before = stats().memory.process_resident;
    resizealloc::trim();
    let after = stats().memory.process_resident;
    assert!(
        after + (200 << 10) <= before,
        "trim kept {what}: {before} -> {after} resident bytes"
    );
}

/// Adoption races the last free of the arena's blocks by another thread: whichever wins, each
/// arena is adopted or released exactly once, and no block is lost or overwritten.
fn adoption_and_last_frees_race_without_losing_a_block() {
    for round in 0..300u32 {
        process_mode(&[2000, 300]);
        let byte = round as u8;
        let blocks: Vec<usize> = (0..8)
            .map(|_| block_of_an_exited_thread(2000, byte))
            .collect();
        for &p in &blocks {
            slot_of(p);
        }
        let freer = std::thread::spawn(move || {
            for p in blocks {
                check_and_free(p, 2000, byte);
            }
        });
        let adopter = std::thread::spawn(move || {
            let v: Vec<Box<[u8]>> = (0..32).map(|_| vec![!byte; 300].into()).collect();
            assert!(v.iter().all(|b| b.iter().all(|&x| x == !byte)));
        });
        freer.join().unwrap();
        adopter.join().unwrap();
    }
}

/// Minor page faults of the calling thread.
fn minor_faults() -> i64 {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    usage.ru_minflt
}
