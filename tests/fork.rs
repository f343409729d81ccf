//! `fork` from a multi-threaded Rust program that uses `ResizeAlloc` in process mode: the child
//! must never inherit one of our locks held by a thread that does not exist there. Its own
//! binary: it switches the whole process to process mode.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resizealloc::options::{self, Options, RegionMode};
use resizealloc::ResizeAlloc;

#[global_allocator]
static A: ResizeAlloc = ResizeAlloc::new();

/// Allocations that take the small-block heap's and the slot table's locks: pages of the heap
/// filled and emptied (its page pool), short threads (heaps and arenas taken and handed back).
fn churn_locks(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let blocks: Vec<Box<[u8; 1000]>> = (0..400).map(|i| Box::new([i as u8; 1000])).collect();
        drop(blocks);
        std::thread::spawn(|| {
            let v: Vec<Box<[u8; 200]>> = (0..100).map(|_| Box::new([1; 200])).collect();
            let big = vec![2u8; 1 << 20];
            std::hint::black_box((&v, &big));
        })
        .join()
        .unwrap();
    }
}

/// In the child: work that needs the same locks (new heap pages; `stats` reads the slot
/// table). No thread: the standard library's own thread start takes a lock that fork does not
/// release (a child that spawned one hung in `stack_overflow::thread_info`, with our handlers).
fn child_work() -> bool {
    let blocks: Vec<Box<[u8; 1000]>> = (0..400).map(|i| Box::new([i as u8; 1000])).collect();
    let big = vec![3u8; 4 << 20];
    let on_heap = resizealloc::slab::owns(&*blocks[0] as *const [u8; 1000] as *const u8);
    let stats = resizealloc::stats();
    on_heap
        && blocks.iter().enumerate().all(|(i, b)| b[999] == i as u8)
        && big[12345] == 3
        && stats.small.pages_in_use > 0
}

#[test]
fn fork_while_other_threads_hold_our_locks_leaves_a_working_child() {
    options::set(Options {
        region: RegionMode::Process,
        ..options::get()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let churners: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || churn_locks(&stop))
        })
        .collect();
    // Forks from a thread started in process mode, whose own allocations use the heap.
    let (hung, failed) = std::thread::spawn(fork_children).join().unwrap();
    stop.store(true, Ordering::Relaxed);
    for t in churners {
        t.join().unwrap();
    }
    assert_eq!(hung, 0, "a child hung on a lock it inherited held");
    assert_eq!(failed, 0, "a child's allocations went wrong");
}

/// Forks 200 children one after another: `(children that hung, children that failed)`.
fn fork_children() -> (u32, u32) {
    let mut hung = 0;
    let mut failed = 0;
    for _ in 0..200 {
        // SAFETY: the child only allocates, checks and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = child_work();
            // SAFETY: ends the child without running the parent's destructors or test harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                    failed += 1;
                }
                break;
            }
            if Instant::now() > deadline {
                // SAFETY: our own child, which hangs.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                hung += 1;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if hung > 0 {
            break;
        }
    }
    (hung, failed)
}
