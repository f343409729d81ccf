//! Regions for async code under tokio's multi-thread runtime, with `ResizeAlloc` as the global
//! allocator: every poll of an `InRegion` (or a `#[resizealloc::region] async fn`) runs in a
//! region on the thread that polls it; what lives across an `.await` escapes and stays valid,
//! wherever the next poll or the drop runs; cancelled and panicking tasks end their regions.

use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use proptest::prelude::*;
use resizealloc::{region_depth, InRegionExt, ResizeAlloc};
use tokio::sync::mpsc;

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap()
}

/// A block whose every byte says who made it: checked before it is dropped.
fn block(tag: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (tag as usize * 31 + i) as u8).collect()
}

fn check(b: &[u8], tag: u32) {
    for (i, &x) in b.iter().enumerate() {
        assert_eq!(
            x,
            (tag as usize * 31 + i) as u8,
            "block {tag} byte {i} changed"
        );
    }
}

#[test]
fn polls_on_the_workers_keep_values_across_awaits_and_another_thread_frees_them() {
    let rt = runtime(4);
    let allocs_before = resizealloc::stats().process.region_allocs;
    let threads = Arc::new(Mutex::new(HashSet::<ThreadId>::new()));
    let (tx, mut rx) = mpsc::unbounded_channel::<(u32, Vec<u8>)>();
    rt.block_on(async {
        let tasks: Vec<_> = (0..64u32)
            .map(|t| {
                let tx = tx.clone();
                let threads = threads.clone();
                tokio::spawn(
                    async move {
                        let mut kept: Vec<(u32, Vec<u8>)> = Vec::new();
                        let mut sent = 0;
                        for step in 0..20u32 {
                            assert!(region_depth() >= 1, "a poll outside a region");
                            threads.lock().unwrap().insert(std::thread::current().id());
                            // Temporaries of the poll: made and dropped before the await.
                            let words: Vec<String> =
                                (0..50).map(|i| format!("w{t}-{step}-{i}")).collect();
                            assert_eq!(words.len(), 50);
                            let tag = t * 1000 + step;
                            kept.push((
                                tag,
                                block(tag, 64 + (t as usize * 37 + step as usize * 11) % 2000),
                            ));
                            if step % 3 == 0 {
                                let (tag, b) = kept.remove(0);
                                tx.send((tag, b)).unwrap();
                                sent += 1;
                            }
                            tokio::task::yield_now().await;
                            for (tag, b) in &kept {
                                check(b, *tag);
                            }
                        }
                        sent
                    }
                    .in_region(),
                )
            })
            .collect();
        drop(tx);
        // The collector is this future, which runs on the test's thread, never a worker: every
        // block it frees was made on another thread.
        let mut received = 0;
        while let Some((tag, b)) = rx.recv().await {
            check(&b, tag);
            received += 1;
        }
        let mut sent = 0;
        for t in tasks {
            sent += t.await.unwrap();
        }
        assert_eq!(received, sent);
    });
    assert!(
        !threads
            .lock()
            .unwrap()
            .contains(&std::thread::current().id()),
        "a poll ran on the collector's thread"
    );
    // The polls' temporaries came from the arenas: 64 tasks x 20 polls x 50 words, of which
    // a thread's first regions, before its arena is sized, send some elsewhere.
    let served = resizealloc::stats().process.region_allocs - allocs_before;
    assert!(
        served >= 64 * 20 * 50 / 2,
        "only {served} allocations in regions"
    );
}

#[test]
fn a_thread_that_polls_in_regions_plans_its_arena_for_many_tasks() {
    std::thread::spawn(|| {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let mut f = std::pin::pin!(async {
            let v: Vec<u64> = (0..100).collect();
            v.iter().sum::<u64>()
        }
        .in_region());
        assert_eq!(f.as_mut().poll(&mut cx), std::task::Poll::Ready(4950));
        let s = resizealloc::stats().thread;
        assert!(
            s.arena_capacity >= resizealloc::region::POLL_PLAN as u64,
            "capacity {} after a poll in a region",
            s.arena_capacity
        );
        // And the plan holds over later regions whose peaks are small.
        for _ in 0..50 {
            resizealloc::region(|| std::hint::black_box(vec![1u8; 100]));
        }
        assert!(
            resizealloc::stats().thread.arena_capacity >= resizealloc::region::POLL_PLAN as u64
        );
    })
    .join()
    .unwrap();
}

#[resizealloc::region]
async fn handler(
    id: u32,
    backend: mpsc::UnboundedSender<(u32, tokio::sync::oneshot::Sender<String>)>,
) -> Result<String, String> {
    assert!(region_depth() >= 1);
    let request = format!("{{\"id\":{id},\"items\":[1,2,3]}}");
    let parsed: Vec<u32> = request
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e| format!("{e}")))
        .collect::<Result<_, _>>()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    backend
        .send((id, tx))
        .map_err(|_| "backend gone".to_string())?;
    let answer = rx.await.map_err(|e| e.to_string())?; // across the await: escapes
    assert!(region_depth() >= 1);
    Ok(format!("{id}:{}:{answer}", parsed.iter().sum::<u32>()))
}

#[test]
fn the_attribute_runs_an_async_fn_in_regions_and_keeps_its_question_marks() {
    let rt = runtime(2);
    rt.block_on(async {
        let (btx, mut brx) =
            mpsc::unbounded_channel::<(u32, tokio::sync::oneshot::Sender<String>)>();
        tokio::spawn(async move {
            while let Some((id, reply)) = brx.recv().await {
                let _ = reply.send(format!("backend-{id}"));
            }
        });
        let hs: Vec<_> = (0..100)
            .map(|id| tokio::spawn(handler(id, btx.clone())))
            .collect();
        for (id, h) in hs.into_iter().enumerate() {
            let got = h.await.unwrap().unwrap();
            assert_eq!(got, format!("{id}:{}:backend-{id}", id + 1 + 2 + 3));
        }
    });
}

#[resizealloc::region]
fn sum_of_words(text: &str) -> Result<usize, std::num::ParseIntError> {
    assert_eq!(region_depth(), 1);
    let mut total = 0;
    for w in text.split(' ') {
        total += w.parse::<usize>()?; // an early return ends the region too
    }
    Ok(total)
}

#[test]
fn the_attribute_runs_a_fn_body_in_a_region() {
    assert_eq!(sum_of_words("1 2 3"), Ok(6));
    assert!(sum_of_words("1 x").is_err());
    assert_eq!(region_depth(), 0);
}

/// A block a cancelled task keeps: its drop checks its contents and counts it.
struct Kept {
    tag: u32,
    bytes: Vec<u8>,
    dropped: Arc<AtomicUsize>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        check(&self.bytes, self.tag);
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn cancelled_tasks_free_what_they_kept() {
    let rt = runtime(2);
    let started = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let hs: Vec<_> = (0..200u32)
            .map(|t| {
                let started = started.clone();
                let dropped = dropped.clone();
                tokio::spawn(
                    async move {
                        let kept = Kept {
                            tag: t,
                            bytes: block(t, 4096),
                            dropped,
                        };
                        started.fetch_add(1, Ordering::SeqCst);
                        // Never completes: the task is dropped between polls, on whatever
                        // thread drops it, and its block with it.
                        std::future::pending::<()>().await;
                        drop(kept);
                    }
                    .in_region(),
                )
            })
            .collect();
        while started.load(Ordering::SeqCst) < 200 {
            tokio::task::yield_now().await;
        }
        for h in &hs {
            h.abort();
        }
        for h in hs {
            assert!(h.await.unwrap_err().is_cancelled());
        }
        // Every kept block was dropped (its contents intact), so freed.
        assert_eq!(dropped.load(Ordering::SeqCst), 200);
        // The memory is reused soundly: new tasks' blocks keep their contents.
        let hs: Vec<_> = (0..200u32)
            .map(|t| {
                tokio::spawn(
                    async move {
                        let b = block(t + 7, 4096);
                        tokio::task::yield_now().await;
                        check(&b, t + 7);
                    }
                    .in_region(),
                )
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
}

#[test]
fn a_panic_inside_a_poll_ends_its_region_and_leaves_kept_blocks_intact() {
    let rt = runtime(2);
    rt.block_on(async {
        let outside = Arc::new(block(99, 10_000)); // made outside regions, read after the panic
        let shared = outside.clone();
        let h = tokio::spawn(
            async move {
                let kept = block(5, 3000); // kept across the await, dropped while unwinding
                tokio::task::yield_now().await;
                check(&kept, 5);
                check(&shared, 99);
                let _temporary = block(6, 1000);
                panic!("a handler that panics in its second poll");
            }
            .in_region(),
        );
        assert!(h.await.unwrap_err().is_panic());
        // Every worker's later polls start outside regions, and the arena hands out memory
        // that keeps its contents.
        let hs: Vec<_> = (0..64u32)
            .map(|t| {
                tokio::spawn(async move {
                    assert_eq!(region_depth(), 0, "a region left open by the panic");
                    async move {
                        let b = block(t, 3000);
                        tokio::task::yield_now().await;
                        check(&b, t);
                    }
                    .in_region()
                    .await
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
        check(&outside, 99);
    });
    // And on this thread, polled by hand: the region ends while unwinding.
    let caught = std::panic::catch_unwind(|| {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(async {
            let _b = block(1, 100);
            panic!("in a poll");
        }
        .in_region());
        let _ = f.as_mut().poll(&mut cx);
    });
    assert!(caught.is_err());
    assert_eq!(region_depth(), 0);
}

/// One task of the property test: its blocks, each made in one poll and dropped in a later one
/// (`life` polls on), or sent to the collector (`sent`), which drops it on its own thread.
#[derive(Clone, Debug)]
struct Plan {
    blocks: Vec<(usize, u8, bool)>, // (size, life in polls, sent)
}

fn plans() -> impl Strategy<Value = Vec<Plan>> {
    let block = (1usize..5000, 1u8..6, any::<bool>());
    prop::collection::vec(
        prop::collection::vec(block, 1..25).prop_map(|blocks| Plan { blocks }),
        1..12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A block allocated in one poll, freed in a later poll on whatever thread runs it, or by
    /// another task: contents checked at every poll until its free.
    #[test]
    fn blocks_made_in_one_poll_are_freed_in_later_polls_anywhere(plans in plans()) {
        let rt = runtime(3);
        rt.block_on(async {
            let (tx, mut rx) = mpsc::unbounded_channel::<(u32, Vec<u8>)>();
            let collector = tokio::spawn(async move {
                let mut held: Vec<(u32, Vec<u8>)> = Vec::new();
                while let Some(b) = rx.recv().await {
                    held.push(b);
                    if held.len() > 4 {
                        let (tag, b) = held.remove(0);
                        check(&b, tag);
                    }
                }
                for (tag, b) in held {
                    check(&b, tag);
                }
            });
            let tasks: Vec<_> = plans.into_iter().enumerate().map(|(t, plan)| {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut live: Vec<(u32, u8, Vec<u8>)> = Vec::new();
                    for (i, (size, life, sent)) in plan.blocks.into_iter().enumerate() {
                        let tag = (t * 100 + i) as u32;
                        let b = block(tag, size);
                        if sent {
                            tx.send((tag, b)).unwrap();
                        } else {
                            live.push((tag, life, b));
                        }
                        tokio::task::yield_now().await;
                        for (tag, life, b) in live.iter_mut() {
                            check(b, *tag);
                            *life -= 1;
                        }
                        live.retain(|(_, life, _)| *life > 0);
                    }
                    for (tag, _, b) in &live {
                        check(b, *tag);
                    }
                }.in_region())
            }).collect();
            drop(tx);
            for t in tasks {
                t.await.unwrap();
            }
            collector.await.unwrap();
        });
    }
}
