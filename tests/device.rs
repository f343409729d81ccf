//! The device pool against the host-memory mock backend: reuse rules, resize policy, out of
//! memory, bad input, and a property test against a model.

use resizealloc::device::mock::{HostBackend, MockError};
use resizealloc::device::pool::{DevicePool, PoolError, GRANULE, MIN_SEGMENT};
use resizealloc::device::{Capture, DevPtr};
use std::sync::atomic::Ordering::Relaxed;

const MIB: usize = 1 << 20;

fn pool(capacity: usize) -> DevicePool<HostBackend> {
    DevicePool::new(HostBackend::new(capacity))
}

fn write(p: DevPtr, n: usize, v: u8) {
    // SAFETY: the mock backend's device memory is host memory; `p..p+n` is a live block.
    unsafe { std::ptr::write_bytes(p as *mut u8, v, n) };
}

fn read_all(p: DevPtr, n: usize, v: u8) -> bool {
    // SAFETY: as in `write`.
    unsafe { std::slice::from_raw_parts(p as *const u8, n) }
        .iter()
        .all(|&b| b == v)
}

#[test]
fn memory_is_kept_across_synchronisations() {
    let mut p = pool(64 * MIB);
    for _ in 0..1000 {
        let a = p.alloc(10, 0).unwrap();
        write(a, 10, 1);
        p.free(a).unwrap();
        p.on_synchronize();
    }
    assert_eq!(
        p.backend().allocs,
        1,
        "one driver allocation serves a thousand alloc/free/sync rounds"
    );
    assert_eq!(p.backend().frees, 0);
    assert_eq!(
        p.stats().own_syncs,
        0,
        "the program's own syncs were enough"
    );
    p.check_invariants().unwrap();
}

#[test]
fn a_synchronously_freed_block_is_not_reused_before_a_sync() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(MIB, 0).unwrap();
    p.free(a).unwrap();
    let b = p.alloc(MIB, 0).unwrap();
    assert_ne!(a, b, "reused before any synchronisation");
    p.on_synchronize();
    p.free(b).unwrap();
    p.on_synchronize();
    let c = p.alloc(MIB, 0).unwrap();
    assert!(c == a || c == b, "after a sync the memory is reused");
    p.check_invariants().unwrap();
}

#[test]
fn a_free_that_races_with_a_sync_waits_for_the_next_one() {
    let mut p = pool(64 * MIB);
    let early = p.alloc(MIB / 2, 0).unwrap();
    let late = p.alloc(MIB / 2, 0).unwrap();
    p.free(early).unwrap();
    let mark = p.sync_mark(); // the program's cuCtxSynchronize starts here
    p.free(late).unwrap(); // another thread frees while the sync runs
    p.on_synchronize_since(mark);
    let a = p.alloc(MIB / 2, 0).unwrap();
    let b = p.alloc(MIB / 2, 0).unwrap();
    assert_eq!(a, early, "freed before the sync: reusable");
    assert_ne!(b, late, "freed during the sync: not covered by it");
    assert_eq!(
        p.stats().own_syncs,
        0,
        "the segment had room: no sync of the pool's own"
    );
    p.on_synchronize();
    p.free(a).unwrap();
    p.free(b).unwrap();
    p.check_invariants().unwrap();
}

#[test]
fn one_own_sync_per_batch_of_frees_when_the_pool_would_grow() {
    let mut p = pool(64 * MIB);
    let blocks: Vec<DevPtr> = (0..4)
        .map(|_| p.alloc(MIN_SEGMENT / 4, 0).unwrap())
        .collect();
    assert_eq!(p.backend().allocs, 1);
    for b in blocks {
        p.free(b).unwrap();
    }
    // The segment is full of pending blocks: the next allocation syncs once instead of growing.
    let again: Vec<DevPtr> = (0..4)
        .map(|_| p.alloc(MIN_SEGMENT / 4, 0).unwrap())
        .collect();
    assert_eq!(
        p.stats().own_syncs,
        1,
        "one sync for the batch, not one per free"
    );
    assert_eq!(p.backend().syncs, 1);
    assert_eq!(p.backend().allocs, 1, "no growth needed");
    for b in again {
        p.free(b).unwrap();
    }
    p.check_invariants().unwrap();
}

#[test]
fn async_frees_are_reusable_at_once_on_their_stream_only() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(4096, 7).unwrap();
    p.free_async(a, 7).unwrap();
    let other = p.alloc(4096, 8).unwrap();
    assert_ne!(other, a, "another stream must wait for a dependency");
    let same = p.alloc(4096, 7).unwrap();
    assert_eq!(same, a, "the same stream reuses at once");
    p.free_async(same, 7).unwrap();
    p.free_async(other, 8).unwrap();
    p.on_synchronize();
    let after = p.alloc(4096, 9).unwrap();
    assert!(
        after == a || after == other,
        "after a sync any stream may reuse"
    );
    assert_eq!(p.stats().own_syncs, 0);
    p.check_invariants().unwrap();
}

#[test]
fn an_overflowing_region_is_replaced_by_one_segment_of_its_peak() {
    let mut p = pool(1024 * MIB);
    let work = |p: &mut DevicePool<HostBackend>| {
        p.region_begin();
        let blocks: Vec<DevPtr> = (0..24)
            .map(|i| p.alloc(MIB + i * 4096, 0).unwrap())
            .collect();
        for b in blocks {
            p.free(b).unwrap();
        }
        p.on_synchronize();
        p.region_end();
    };
    work(&mut p);
    let first = p.stats();
    assert!(
        first.overflow_blocks > 0,
        "the first region must overflow a 2 MiB segment"
    );
    assert!(first.high_water >= 24 * MIB as u64);
    for _ in 0..10 {
        work(&mut p);
    }
    let later = p.stats();
    assert_eq!(
        later.overflow_blocks, first.overflow_blocks,
        "later regions fit with zero overflow"
    );
    assert_eq!(
        later.segments, 1,
        "one segment covering the peak; surplus handed back"
    );
    assert!(
        later.reserved >= later.high_water
            && later.reserved < later.high_water + 2 * MIN_SEGMENT as u64
    );
    assert_eq!(p.backend().outstanding(), 1);
    p.check_invariants().unwrap();
}

#[test]
fn out_of_memory_releases_the_cache_and_retries_before_failing() {
    let mut p = pool(8 * MIB);
    let a = p.alloc(3 * MIB, 0).unwrap();
    p.free(a).unwrap();
    // 6 MiB does not fit next to the cached 4 MiB segment: the pool must give it back first.
    let big = p.alloc(6 * MIB, 0).unwrap();
    write(big, 6 * MIB, 3);
    assert!(read_all(big, 6 * MIB, 3));
    // More than the device has: the driver's own error, and the pool stays intact.
    assert_eq!(
        p.alloc(64 * MIB, 0),
        Err(PoolError::Backend(MockError::OutOfMemory))
    );
    assert_eq!(
        p.alloc(usize::MAX - 10, 0),
        Err(PoolError::Backend(MockError::OutOfMemory))
    );
    p.check_invariants().unwrap();
    p.free(big).unwrap();
    p.trim().unwrap();
    assert_eq!(p.stats().reserved, 0);
    assert_eq!(p.backend().outstanding(), 0);
}

#[test]
fn bad_input_gets_an_error_and_leaves_the_pool_intact() {
    let mut p = pool(64 * MIB);
    assert_eq!(p.alloc(0, 0), Err(PoolError::ZeroSize));
    let a = p.alloc(1000, 0).unwrap();
    assert_eq!(
        p.free(a + 512),
        Err(PoolError::InvalidPointer),
        "interior pointer"
    );
    assert_eq!(
        p.free(12345),
        Err(PoolError::InvalidPointer),
        "unknown pointer"
    );
    p.free(a).unwrap();
    assert_eq!(p.free(a), Err(PoolError::InvalidPointer), "double free");
    assert_eq!(
        p.free_async(a, 3),
        Err(PoolError::InvalidPointer),
        "double free, async"
    );
    p.check_invariants().unwrap();
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn address_ranges_answer_for_the_suballocated_block() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(3000, 0).unwrap();
    let b = p.alloc(100, 0).unwrap();
    assert_eq!(p.find(a), Some((a, 3072)));
    assert_eq!(p.find(a + 2999), Some((a, 3072)));
    assert_eq!(p.find(b + 50), Some((b, GRANULE)));
    p.free(b).unwrap();
    assert_eq!(p.find(b), None, "a freed block is not a live range");
}

mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Alloc {
            size: usize,
            stream: u64,
        },
        Free(usize),
        FreeAsync(usize),
        Sync,
        Begin,
        End,
        Trim,
        /// Freed on a stream of another context (1 or 2).
        FreeForeign(usize, u64),
        /// That context synchronised.
        DomainSync(u64),
        /// A capture begins or ends (0 none, 1 relaxed, 2 global).
        Capture(u8),
        /// A cap on cached bytes (0: none).
        Cap(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1usize..3 * MIB, 0u64..3).prop_map(|(size, stream)| Op::Alloc { size, stream }),
            3 => any::<usize>().prop_map(Op::Free),
            2 => any::<usize>().prop_map(Op::FreeAsync),
            1 => Just(Op::Sync),
            1 => Just(Op::Begin),
            1 => Just(Op::End),
            1 => Just(Op::Trim),
            2 => (any::<usize>(), 1u64..3).prop_map(|(i, d)| Op::FreeForeign(i, d)),
            1 => (1u64..3).prop_map(Op::DomainSync),
            1 => (0u8..3).prop_map(Op::Capture),
            1 => (0usize..4).prop_map(|m| Op::Cap(m * MIB)),
        ]
    }

    struct Live {
        ptr: DevPtr,
        size: usize,
        stream: u64,
        fill: u8,
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
        #[test]
        fn pool_never_overlaps_and_respects_the_reuse_rules(ops in proptest::collection::vec(op(), 1..200)) {
            let mut p = pool(256 * MIB);
            let mut live: Vec<Live> = Vec::new();
            // Blocks freed since the last sync the pool knows of, with the stream that may reuse
            // them early (None: synchronous free), and the other context whose sync they wait
            // for (0: the pool's own).
            let mut unsynced: Vec<(DevPtr, usize, Option<u64>, u64)> = Vec::new();
            let mut fill = 0u8;
            for op in ops {
                match op {
                    Op::Alloc { size, stream } => {
                        let syncs_before = p.backend().syncs;
                        let ptr = match p.alloc(size, stream) {
                            Ok(ptr) => ptr,
                            Err(PoolError::Capturing) if p.backend().capture == Capture::Global => continue,
                            Err(e) => return Err(TestCaseError::fail(format!("alloc: {e:?}"))),
                        };
                        if p.backend().syncs != syncs_before {
                            // The pool synchronised itself, and the other contexts it waits for.
                            unsynced.clear();
                        }
                        // The pool's block is the request rounded up to its granule.
                        let end = ptr + size.next_multiple_of(GRANULE) as DevPtr;
                        for l in &live {
                            let l_end = l.ptr + l.size.next_multiple_of(GRANULE) as DevPtr;
                            prop_assert!(end <= l.ptr || ptr >= l_end, "overlaps a live block");
                        }
                        for &(q, n, s, _) in &unsynced {
                            let overlaps = !(end <= q || ptr >= q + n as DevPtr);
                            prop_assert!(!overlaps || s == Some(stream), "reused memory freed after the last sync");
                        }
                        // Same-stream reuse: the reused part is the new block's now; what is left
                        // of the old free still waits.
                        let mut rest = Vec::new();
                        unsynced.retain(|&(q, n, s, d)| {
                            let qend = q + n as DevPtr;
                            if end <= q || ptr >= qend {
                                return true;
                            }
                            if q < ptr {
                                rest.push((q, (ptr - q) as usize, s, d));
                            }
                            if end < qend {
                                rest.push((end, (qend - end) as usize, s, d));
                            }
                            false
                        });
                        unsynced.extend(rest);
                        fill = fill.wrapping_add(1);
                        write(ptr, size, fill);
                        live.push(Live { ptr, size, stream, fill });
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let l = live.swap_remove(i % live.len());
                        prop_assert!(read_all(l.ptr, l.size, l.fill), "contents changed");
                        p.free(l.ptr).unwrap();
                        unsynced.push((l.ptr, l.size.next_multiple_of(GRANULE), None, 0));
                    }
                    Op::FreeAsync(i) if !live.is_empty() => {
                        let l = live.swap_remove(i % live.len());
                        prop_assert!(read_all(l.ptr, l.size, l.fill), "contents changed");
                        p.free_async(l.ptr, l.stream).unwrap();
                        unsynced.push((l.ptr, l.size.next_multiple_of(GRANULE), Some(l.stream), 0));
                    }
                    Op::FreeForeign(i, d) if !live.is_empty() => {
                        let l = live.swap_remove(i % live.len());
                        prop_assert!(read_all(l.ptr, l.size, l.fill), "contents changed");
                        p.free_async_foreign(l.ptr, d).unwrap();
                        unsynced.push((l.ptr, l.size.next_multiple_of(GRANULE), None, d));
                    }
                    Op::Sync => {
                        p.on_synchronize();
                        unsynced.retain(|u| u.3 != 0);
                    }
                    Op::DomainSync(d) => {
                        p.on_domain_synchronized(d, p.sync_mark());
                        unsynced.retain(|u| u.3 != d);
                    }
                    Op::Capture(m) => {
                        p.backend_mut().capture = [Capture::None, Capture::Relaxed, Capture::Global][m as usize];
                    }
                    Op::Cap(bytes) => p.set_max_cached(if bytes == 0 { usize::MAX } else { bytes }),
                    Op::Begin => p.region_begin(),
                    Op::End => p.region_end(),
                    Op::Trim => {
                        let syncs_before = p.backend().syncs;
                        p.trim().unwrap();
                        if p.backend().syncs != syncs_before {
                            unsynced.clear();
                        }
                    }
                    _ => {}
                }
                if let Err(e) = p.check_invariants() {
                    return Err(TestCaseError::fail(e));
                }
                prop_assert_eq!(p.backend().illegal_calls, 0, "a driver call the capture forbids");
            }
            for l in &live {
                prop_assert!(read_all(l.ptr, l.size, l.fill));
            }
        }
    }
}

#[test]
fn the_cudarc_backend_reports_a_missing_driver_instead_of_panicking() {
    use resizealloc::device::cuda::{CudaPool, CudaUnavailable, CudarcDriver};
    match CudarcDriver::new() {
        // CI and this project's machines: no libcuda at all.
        Err(CudaUnavailable::NoDriverLibrary) => {}
        // A driver without a usable GPU: cuInit's own error.
        Err(CudaUnavailable::InitFailed(e)) => assert_ne!(e as i32, 0),
        // A driver and a GPU, but no context current on this thread.
        Err(CudaUnavailable::NoContext) => {}
        // A real GPU: the pool must work on it.
        Ok(driver) => {
            let mut pool = CudaPool::new(driver);
            if let Ok(p) = pool.alloc(1 << 20, 0) {
                pool.free(p).unwrap();
                pool.trim().unwrap();
            }
            pool.check_invariants().unwrap();
        }
    }
}

#[test]
fn freed_blocks_are_reused_whole_and_merged_back_before_the_pool_grows() {
    let mut p = pool(64 * MIB);
    // Fill one segment with 1 KiB blocks, free them all, sync: they wait whole in the cache.
    let n = MIN_SEGMENT / 1024;
    let blocks: Vec<DevPtr> = (0..n).map(|_| p.alloc(1024, 0).unwrap()).collect();
    assert_eq!(p.backend().allocs, 1);
    for &b in &blocks {
        p.free(b).unwrap();
    }
    p.on_synchronize();
    p.check_invariants().unwrap();
    // The same size is served from the cache: the last block freed comes back first.
    let again = p.alloc(1000, 0).unwrap();
    assert_eq!(again, *blocks.last().unwrap());
    p.free(again).unwrap();
    p.on_synchronize();
    // A bigger size: the cached blocks are merged back instead of growing the pool.
    let big = p.alloc(MIN_SEGMENT / 2, 0).unwrap();
    assert_eq!(
        p.backend().allocs,
        1,
        "merged cache served the request; no new segment"
    );
    write(big, MIN_SEGMENT / 2, 7);
    p.check_invariants().unwrap();
    // A cached block cannot be freed again (double free), and the pool stays intact.
    let c = p.alloc(1024, 0).unwrap();
    p.free(c).unwrap();
    p.on_synchronize();
    assert_eq!(p.free(c), Err(PoolError::InvalidPointer));
    assert_eq!(p.free_async(c, 3), Err(PoolError::InvalidPointer));
    assert_eq!(p.find(c), None, "a cached block is not a live block");
    p.free(big).unwrap();
    p.trim().unwrap();
    assert_eq!(p.stats().reserved, 0, "trim gives cached blocks back too");
    p.check_invariants().unwrap();
}

#[test]
fn a_destroyed_streams_frees_wait_for_a_sync() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(4096, 7).unwrap();
    p.free_async(a, 7).unwrap();
    p.forget_stream(7);
    let b = p.alloc(4096, 7).unwrap();
    assert_ne!(
        a, b,
        "a new stream with the old handle must not get the old stream's block"
    );
    p.check_invariants().unwrap();
    p.on_synchronize();
    let c = p.alloc(4096, 9).unwrap();
    assert_eq!(c, a, "after a sync the block is anyone's");
    p.check_invariants().unwrap();
}

#[test]
fn a_dropped_pool_gives_every_segment_back_to_the_driver() {
    let mut p = pool(64 * MIB);
    let counters = p.backend().counters();
    // Segments in every state: a live block, a cached one, one in flight on a stream, and a
    // second segment that a big request forced.
    let live = p.alloc(4096, 0).unwrap();
    let cached = p.alloc(8192, 0).unwrap();
    p.free(cached).unwrap();
    p.on_synchronize();
    let in_flight = p.alloc(1024, 5).unwrap();
    p.free_async(in_flight, 5).unwrap();
    let big = p.alloc(3 * MIN_SEGMENT, 0).unwrap();
    write(live, 4096, 1);
    write(big, 3 * MIN_SEGMENT, 2);
    assert_eq!(
        counters.allocs.load(Relaxed),
        2,
        "two segments from the driver"
    );
    drop(p);
    assert_eq!(
        counters.leaked_at_drop.load(Relaxed),
        0,
        "the pool left segments behind for the driver to clean up"
    );
    assert_eq!(
        counters.frees.load(Relaxed),
        counters.allocs.load(Relaxed),
        "every segment freed once"
    );
    assert_eq!(counters.live(), 0);
}

#[test]
fn a_pool_whose_memory_the_driver_already_freed_is_forgotten_without_frees() {
    // A destroyed context takes its memory with it: the pool must not free it again.
    let mut p = pool(64 * MIB);
    let counters = p.backend().counters();
    let _live = p.alloc(4096, 0).unwrap();
    p.forget_segments();
    assert_eq!(p.stats().reserved, 0);
    assert_eq!(p.find(_live), None);
    p.check_invariants().unwrap();
    drop(p);
    assert_eq!(counters.frees.load(Relaxed), 0, "nothing freed twice");
    assert_eq!(counters.leaked_at_drop.load(Relaxed), 1);
}

// ---------------------------------------------------------------------------- stream capture

#[test]
fn a_relaxed_capture_never_synchronises_and_grows_instead() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(MIB, 0).unwrap();
    let b = p.alloc(MIB, 0).unwrap(); // the first segment is full
    p.free(a).unwrap();
    p.free(b).unwrap();
    p.backend_mut().capture = Capture::Relaxed;
    // Without capture the pool would sync once and reuse `a`; during capture it must not.
    let c = p.alloc(MIB, 0).unwrap();
    assert_ne!(c, a);
    assert_ne!(c, b);
    assert_eq!(p.backend().syncs, 0, "no synchronisation during a capture");
    assert_eq!(
        p.backend().allocs,
        2,
        "a relaxed capture allows a new segment"
    );
    p.trim().unwrap();
    assert_eq!(
        p.backend().syncs,
        0,
        "trim does not sync during a capture either"
    );
    assert_eq!(p.backend().illegal_calls, 0);
    p.backend_mut().capture = Capture::None;
    p.free(c).unwrap();
    p.trim().unwrap();
    assert_eq!(
        p.backend().syncs,
        1,
        "after the capture, frees in flight are synced as usual"
    );
    p.check_invariants().unwrap();
}

#[test]
fn a_global_capture_makes_no_driver_call_and_refuses_what_needs_one() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(MIB, 0).unwrap();
    let b = p.alloc(MIB / 2, 0).unwrap();
    p.free(a).unwrap();
    p.on_synchronize();
    p.backend_mut().capture = Capture::Global;
    // What the pool holds still serves.
    let c = p.alloc(MIB, 0).unwrap();
    assert_eq!(
        c, a,
        "a block that is safe to reuse serves during a capture"
    );
    // What needs a sync or a segment is refused: the caller lets the driver answer.
    p.free(c).unwrap();
    assert_eq!(p.alloc(MIB, 0), Err(PoolError::Capturing));
    assert_eq!(p.alloc(8 * MIB, 0), Err(PoolError::Capturing));
    assert_eq!(p.stats().capture_refusals, 2);
    // A resize that retires segments keeps them until the capture is over.
    p.region_begin();
    let big = [p.alloc(MIB / 2, 0).unwrap()];
    p.free(big[0]).unwrap();
    p.free(b).unwrap();
    p.on_synchronize(); // the program's own sync (outside the capture, say on another context)
    p.release_cached();
    p.region_end();
    assert_eq!(
        p.backend().illegal_calls,
        0,
        "no driver call during the global capture"
    );
    assert_eq!(p.backend().frees, 0);
    p.backend_mut().capture = Capture::None;
    p.trim().unwrap();
    assert_eq!(
        p.backend().outstanding(),
        0,
        "segments go back once the capture is over"
    );
    assert_eq!(p.stats().reserved, 0);
    p.check_invariants().unwrap();
}

#[test]
fn a_segment_emptied_during_a_global_capture_is_freed_after_it() {
    let mut p = pool(64 * MIB);
    p.region_begin();
    let a = p.alloc(MIB, 0).unwrap();
    let b = p.alloc(3 * MIB, 0).unwrap(); // overflow: a second segment
    p.free(b).unwrap();
    p.on_synchronize();
    p.region_end(); // both segments retire; the second one is empty now
    let frees = p.backend().frees;
    p.backend_mut().capture = Capture::Global;
    p.free(a).unwrap();
    p.on_synchronize(); // the first segment empties during the capture
    assert_eq!(
        p.backend().frees,
        frees,
        "no cuMemFree during a global capture"
    );
    assert!(
        p.stats().reserved > 0,
        "a postponed segment still counts as reserved"
    );
    assert_eq!(p.backend().illegal_calls, 0);
    p.backend_mut().capture = Capture::None;
    p.release_cached();
    assert_eq!(p.backend().outstanding(), 0);
    p.check_invariants().unwrap();
}

// ------------------------------------------------------------------- contexts and locking

#[test]
fn a_block_freed_on_another_contexts_stream_waits_for_that_contexts_sync() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(MIB, 0).unwrap();
    let _fill = p.alloc(MIB, 0).unwrap();
    p.free_async_foreign(a, 2).unwrap();
    p.on_synchronize(); // the pool's own context: does not cover context 2's stream
                        // (`synced`: the pool grows rather than syncing itself, which would cover context 2.)
    let b = p.alloc_without_sync(MIB, 0, true).unwrap();
    assert_ne!(a, b, "reused after a sync of the wrong context");
    p.on_domain_synchronized(3, p.sync_mark()); // yet another context: no
    let c = p.alloc_without_sync(MIB, 0, true).unwrap();
    assert_ne!(a, c, "reused after a sync of an unrelated context");
    p.on_domain_synchronized(2, p.sync_mark());
    let d = p.alloc_without_sync(MIB, 0, true).unwrap();
    assert_eq!(d, a, "reusable once its own context synchronised");
    p.check_invariants().unwrap();
}

#[test]
fn the_pools_own_sync_also_synchronises_the_foreign_contexts_it_waits_for() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(MIB, 0).unwrap();
    let _b = p.alloc(MIB, 0).unwrap();
    p.free_async_foreign(a, 7).unwrap();
    let c = p.alloc(MIB, 0).unwrap(); // would grow: the pool syncs first
    assert_eq!(c, a);
    assert_eq!(p.backend().domain_syncs, vec![7]);
    p.check_invariants().unwrap();
}

#[test]
fn alloc_without_sync_leaves_the_synchronisation_to_the_caller() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(MIB, 0).unwrap();
    let _b = p.alloc(MIB, 0).unwrap();
    p.free(a).unwrap();
    assert_eq!(
        p.alloc_without_sync(MIB, 0, false),
        Err(PoolError::NeedsSync)
    );
    assert_eq!(p.backend().syncs, 0);
    let mark = p.sync_mark();
    // (the caller drops its lock and synchronises here; another thread frees meanwhile)
    p.own_sync_done(mark);
    assert_eq!(p.alloc_without_sync(MIB, 0, true), Ok(a));
    assert_eq!(p.stats().own_syncs, 1);
    // `synced`: nothing pending that a sync would give back, so the pool grows.
    let c = p.alloc_without_sync(MIB, 0, true).unwrap();
    assert_eq!(p.backend().allocs, 2);
    p.free(c).unwrap();
    p.check_invariants().unwrap();
}

// ------------------------------------------------------------------------------- pressure

#[test]
fn cached_bytes_above_the_cap_go_back_at_a_synchronisation() {
    let mut p = pool(256 * MIB);
    p.set_max_cached(4 * MIB);
    let blocks: Vec<DevPtr> = (0..6).map(|_| p.alloc(3 * MIB, 0).unwrap()).collect();
    assert_eq!(p.backend().outstanding(), 6);
    for &b in &blocks {
        p.free(b).unwrap();
    }
    assert_eq!(
        p.backend().outstanding(),
        6,
        "nothing goes back before a synchronisation"
    );
    p.on_synchronize();
    let s = p.stats();
    assert!(
        s.reserved - s.in_use <= 4 * MIB as u64,
        "cached {} > cap",
        s.reserved - s.in_use
    );
    assert!(s.pressure_releases >= 5);
    p.check_invariants().unwrap();
}

#[test]
fn an_idle_pool_gives_its_cache_back() {
    let mut p = pool(64 * MIB);
    let a = p.alloc(MIB, 0).unwrap();
    p.free(a).unwrap();
    p.on_synchronize();
    assert_eq!(
        p.release_if_idle(1_000, 100),
        0,
        "first look: starts the clock"
    );
    assert_eq!(p.release_if_idle(1_050, 100), 0, "not idle long enough");
    let b = p.alloc(MIB, 0).unwrap();
    p.free(b).unwrap();
    p.on_synchronize();
    assert_eq!(
        p.release_if_idle(1_150, 100),
        0,
        "an allocation restarts the clock"
    );
    assert_eq!(p.release_if_idle(1_300, 100), MIN_SEGMENT);
    assert_eq!(p.backend().outstanding(), 0);
    assert_eq!(p.stats().pressure_releases, 1);
    p.check_invariants().unwrap();
}

// ------------------------------------------------------------------------------- identity

#[test]
fn every_handout_has_its_own_buffer_id() {
    let mut p = pool(64 * MIB);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..100 {
        let a = p.alloc(4096, 0).unwrap();
        let id = p.buffer_id(a + 100).unwrap();
        assert!(seen.insert(id), "buffer id {id} handed out twice");
        p.free(a).unwrap();
        assert_eq!(p.buffer_id(a), None, "a freed block has no buffer id");
        p.on_synchronize();
    }
}
