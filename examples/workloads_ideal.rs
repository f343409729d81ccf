//! `examples/workloads/common.rs` under the ideal region allocator: inside a region every
//! allocation bumps a thread-local pointer and frees do nothing; the outermost region's end
//! rewinds the pointer. Unsound on purpose (a block that outlives its region is overwritten by
//! the next one; these workloads keep none): the floor of any region allocator on the same
//! program. Outside regions, `System`.
#[path = "workloads/common.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

const SLICE: usize = 1 << 30;
const SLICES: usize = 16;
static SPACE: AtomicUsize = AtomicUsize::new(0);
static NEXT_SLICE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static CUR: Cell<usize> = const { Cell::new(0) };
    static END: Cell<usize> = const { Cell::new(0) };
    static BASE: Cell<usize> = const { Cell::new(0) };
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

struct Ideal;

// SAFETY: blocks are disjoint while their region runs, aligned as asked, and come from a
// reserved mapping; dealloc of them does nothing. Outside regions System serves.
unsafe impl GlobalAlloc for Ideal {
    #[inline(always)]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if DEPTH.get() != 0 {
            let p = (CUR.get() + l.align() - 1) & !(l.align() - 1);
            let end = p + l.size();
            if end <= END.get() {
                CUR.set(end);
                return p as *mut u8;
            }
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(l) }
    }
    /// The last block grows in place, as a real region allocator's does; any other moves.
    #[inline(always)]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        if DEPTH.get() != 0
            && p as usize + l.size() == CUR.get()
            && p as usize + new_size <= END.get()
        {
            CUR.set(p as usize + new_size);
            return p;
        }
        // SAFETY: forwarded; a new block, the contents copied, the old one freed.
        unsafe {
            let q = self.alloc(Layout::from_size_align_unchecked(new_size, l.align()));
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                self.dealloc(p, l);
            }
            q
        }
    }
    #[inline(always)]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let base = SPACE.load(Ordering::Relaxed);
        if (p as usize).wrapping_sub(base) < SLICE * SLICES {
            return;
        }
        // SAFETY: a System block.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Ideal = Ideal;

fn begin() {
    if DEPTH.get() == 0 && BASE.get() == 0 {
        if SPACE.load(Ordering::Acquire) == 0 {
            // SAFETY: an anonymous reservation, never unmapped.
            let s = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    SLICE * SLICES,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            assert!(s != libc::MAP_FAILED);
            if SPACE
                .compare_exchange(0, s as usize, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                // SAFETY: our own mapping, unused.
                unsafe { libc::munmap(s, SLICE * SLICES) };
            }
        }
        let i = NEXT_SLICE.fetch_add(1, Ordering::Relaxed);
        assert!(i < SLICES, "more threads than slices");
        let b = SPACE.load(Ordering::Acquire) + i * SLICE;
        BASE.set(b);
        CUR.set(b);
        END.set(b + SLICE);
    }
    DEPTH.set(DEPTH.get() + 1);
}

fn end() {
    DEPTH.set(DEPTH.get() - 1);
    if DEPTH.get() == 0 {
        CUR.set(BASE.get());
    }
}

struct Regions;
impl common::Region for Regions {
    const KEEPS_ESCAPES: bool = false;
    fn run<T>(f: impl FnOnce() -> T) -> T {
        begin();
        let r = f();
        end();
        r
    }
}

fn main() {
    common::main::<Regions>()
}
