//! What a region per poll can win on the async service (`examples/workloads/service.rs`): the
//! service under `System`, with every allocation and free counted by whether the block dies in
//! the poll that made it (a temporary, which a region takes back for free) or lives past it (an
//! escape: what the `Order` holds across the backend call, the reply sent to the collector,
//! the runtime's own blocks). Each poll of a handler runs in `resizealloc::InRegion` (which
//! marks the poll: the region depth is read, nothing is routed, as `System` is the global
//! allocator). Run: `cargo run --release --example workloads_lifetimes`.
#[path = "workloads/common.rs"]
#[allow(dead_code)] // only the service
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The bytes in front of each block (or its alignment, if larger): the poll it was made in
/// (0: outside polls).
const TAG: usize = 16;

struct Counting;

static POLLS: AtomicU64 = AtomicU64::new(1);
static IN_POLL_ALLOCS: AtomicU64 = AtomicU64::new(0);
static OTHER_ALLOCS: AtomicU64 = AtomicU64::new(0);
static DIED_IN_POLL: AtomicU64 = AtomicU64::new(0);
static DIED_IN_POLL_BYTES: AtomicU64 = AtomicU64::new(0);
static IN_POLL_BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The poll this thread runs now (0 outside polls), and the region depth it began at.
    static POLL: Cell<u64> = const { Cell::new(0) };
}

fn current_poll() -> u64 {
    // The region depth says whether the thread is inside an adapter's poll; a new poll id is
    // taken when the depth goes from 0 to 1 (seen at the first allocation of the poll).
    let depth = resizealloc::region_depth();
    POLL.with(|p| {
        if depth == 0 {
            p.set(0);
            0
        } else {
            if p.get() == 0 {
                p.set(POLLS.fetch_add(1, Ordering::Relaxed));
            }
            p.get()
        }
    })
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let off = l.align().max(TAG);
        let l2 = Layout::from_size_align(l.size() + off, off).unwrap();
        // SAFETY: a non-zero size.
        let p = unsafe { System.alloc(l2) };
        if p.is_null() {
            return p;
        }
        let poll = current_poll();
        if poll != 0 {
            IN_POLL_ALLOCS.fetch_add(1, Ordering::Relaxed);
            IN_POLL_BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        } else {
            OTHER_ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the first TAG bytes of the block are ours.
        unsafe { (p as *mut u64).write(poll) };
        // SAFETY: within the block.
        unsafe { p.add(off) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let off = l.align().max(TAG);
        let l2 = Layout::from_size_align(l.size() + off, off).unwrap();
        // SAFETY: `alloc` handed out `base + off`.
        let base = unsafe { p.sub(off) };
        // SAFETY: written by `alloc`.
        let made_in = unsafe { (base as *const u64).read() };
        if made_in != 0 && made_in == current_poll() {
            DIED_IN_POLL.fetch_add(1, Ordering::Relaxed);
            DIED_IN_POLL_BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        }
        // SAFETY: allocated with `l2`.
        unsafe { System.dealloc(base, l2) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn main() {
    // The adapter marks polls; `Counting` tells the polls apart by the depth (see above). A
    // poll that ends and one that begins on the same thread without an allocation outside
    // them in between would share an id: the runtime allocates between polls rarely, so the
    // figure is a bound from above on what dies in its poll.
    common::service::main(common::service::Mode::Adapter, 1, false);
    let a = IN_POLL_ALLOCS.load(Ordering::Relaxed);
    let o = OTHER_ALLOCS.load(Ordering::Relaxed);
    let d = DIED_IN_POLL.load(Ordering::Relaxed);
    println!(
        "allocations in polls {a}, outside polls {o}; died in the poll that made them {d} ({:.1} % of all, {:.1} % of the bytes allocated in polls)",
        d as f64 * 100.0 / (a + o) as f64,
        DIED_IN_POLL_BYTES.load(Ordering::Relaxed) as f64 * 100.0
            / IN_POLL_BYTES.load(Ordering::Relaxed).max(1) as f64
    );
}
