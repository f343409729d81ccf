//! `examples/workloads/common.rs` under the sound floor: the leanest *sound* region allocator we
//! know for frees in any order, the Rust twin of `scripts/bench_sound_floor.c -DHDR=16` (see its
//! header for the design and for everything a real allocator pays for on top of it). Beside the
//! ideal, which frees nothing, it shows what the guarantees alone cost on the same program.
//!
//! Each thread bumps through a slice of its own and keeps an *object stack* beside it, one word
//! per block (the block's address, bit 0 set once it is freed out of order); a block's header
//! word names its entry. A free of the block at the bump pointer pops it and every entry below it
//! that is marked freed, taking the bump pointer back; any other free marks its entry (O(1)). A
//! live block is never reused, a double free or a free of a pointer it never handed out aborts,
//! and the last block grows in place. Frees from other threads abort (the workloads make none).
//! Outside regions, and for alignments above 16, `System`.
#[path = "workloads/common.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bump area per thread.
const SLICE: usize = 1 << 30;
/// Object stack per thread: one word per 16 bytes of bump area (a block takes 32 at least), and
/// the two words in front of the first entry (the sentinel).
const STACK: usize = SLICE / 16 * 8 + 64;
const SLICES: usize = 16;
/// The header in front of every block; its last word names the block's entry.
const HDR: usize = 16;
/// Where `SPACE` points until the slices are reserved: the highest range of their size, which
/// no block of `System` falls in, so that `ours` needs no other test.
const UNRESERVED: usize = 0usize.wrapping_sub(SLICES * SLICE);
static SPACE: AtomicUsize = AtomicUsize::new(UNRESERVED);
static STACKS: AtomicUsize = AtomicUsize::new(0);
static NEXT_SLICE: AtomicUsize = AtomicUsize::new(0);

/// Before a thread's first region its stack pointer points past this 0 word, so that the free's
/// test of the last entry needs no null test: it never matches a block.
static NO_STACK: [usize; 2] = [0, 0];

/// One thread's state.
struct State {
    /// The bump pointer.
    cur: Cell<usize>,
    /// The end of the slice, less a header: a block of `n` bytes fits when `n <= lim - cur`.
    lim: Cell<usize>,
    /// The next entry of the object stack. Invariant: the entries below it name the live blocks
    /// of the slice in address order (bit 0 set: freed out of order), the last one the block
    /// that ends at `cur` (padded to 16), which is live.
    sp: Cell<*mut usize>,
    /// The first entry; the word before it stays 0 (the sentinel the pops stop at). Null before
    /// the thread's first region.
    sp_base: Cell<*mut usize>,
    /// The highest `cur` seen: the high-water mark a resize needs.
    peak: Cell<usize>,
    depth: Cell<u32>,
}

thread_local! {
    static T: State = const {
        State {
            cur: Cell::new(0),
            lim: Cell::new(0),
            sp: Cell::new(NO_STACK.as_ptr().wrapping_add(1) as *mut usize),
            sp_base: Cell::new(std::ptr::null_mut()),
            peak: Cell::new(0),
            depth: Cell::new(0),
        }
    };
}

#[inline(always)]
fn ours(p: *mut u8) -> bool {
    (p as usize).wrapping_sub(SPACE.load(Ordering::Relaxed)) < SLICES * SLICE
}

fn refuse(what: &str, p: *mut u8) -> ! {
    eprintln!("sound floor: {what} {p:p}");
    std::process::abort()
}

struct Sound;

impl Sound {
    /// A block of `n` bytes at the bump pointer.
    ///
    /// # Safety
    /// In a region, `1 <= n <= lim - cur`.
    #[inline(always)]
    unsafe fn bump(t: &State, n: usize) -> *mut u8 {
        let p = t.cur.get() + HDR;
        let s = t.sp.get();
        // SAFETY: the stack has an entry per 16 bytes of slice, and every block takes 32 at
        // least, so `s` is in it; the header lies in the slice, before `p`.
        unsafe {
            *s = p;
            *((p - 8) as *mut *mut usize) = s;
        }
        t.sp.set(s.wrapping_add(1));
        t.cur.set(p + ((n + 15) & !15));
        p as *mut u8
    }

    /// The block at the bump pointer was freed: on down over the blocks freed out of order.
    #[cold]
    #[inline(never)]
    fn pop_freed(t: &State) {
        let mut s = t.sp.get();
        // SAFETY: the entries below `sp` down to the sentinel (0) are the stack's.
        unsafe {
            while *s.sub(1) & 1 != 0 {
                s = s.sub(1);
            }
            t.sp.set(s);
            t.cur.set((*s & !1) - HDR);
        }
    }
}

// SAFETY: a block is handed out only from `[cur, lim)`, which holds no live block (live blocks
// lie below `cur`, and `cur` goes back only over blocks freed already), aligned to 16, and
// stays valid until its free; a free is taken only for a live block of this thread (its entry,
// found through its header, names it unmarked), anything else aborts. `System` serves the rest.
unsafe impl GlobalAlloc for Sound {
    #[inline(always)]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        T.with(|t| {
            if t.depth.get() != 0
                && l.align() <= 16
                && l.size().wrapping_sub(1) < t.lim.get().wrapping_sub(t.cur.get())
            {
                // SAFETY: tested just now.
                return unsafe { Self::bump(t, l.size()) };
            }
            // SAFETY: forwarded.
            unsafe { System.alloc(l) }
        })
    }

    #[inline(always)]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if !ours(p) {
            // SAFETY: a System block.
            return unsafe { System.dealloc(p, l) };
        }
        T.with(|t| {
            let s = t.sp.get();
            // SAFETY: the stack pointer is past the sentinel or `NO_STACK[0]`, so two words
            // below it are readable.
            unsafe {
                if p as usize == *s.sub(1) {
                    if t.cur.get() > t.peak.get() {
                        t.peak.set(t.cur.get());
                    }
                    t.cur.set(p as usize - HDR);
                    t.sp.set(s.sub(1));
                    if *s.sub(2) & 1 != 0 {
                        Self::pop_freed(t);
                    }
                    return;
                }
            }
            let base = t.sp_base.get();
            // SAFETY: `p` lies in the slices, whose memory is mapped, so its header word is
            // readable; the entry it names is read only once it is known to be in this
            // thread's stack.
            unsafe {
                let e = *((p as usize - 8) as *const *mut usize);
                if !base.is_null()
                    && (e as usize).wrapping_sub(base as usize) < s as usize - base as usize
                    && *e == p as usize
                {
                    *e = p as usize | 1;
                    return;
                }
            }
            refuse(
                "free of a pointer that is not a live block of this thread:",
                p,
            )
        })
    }

    /// The last block grows in place; any other moves.
    #[inline(always)]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        if ours(p) {
            let grown = T.with(|t| {
                let s = t.sp.get();
                // SAFETY: as in `dealloc`.
                let last = unsafe { *s.sub(1) } == p as usize;
                if last && t.depth.get() != 0 && new_size <= t.lim.get() + HDR - p as usize {
                    t.cur.set(p as usize + ((new_size + 15) & !15));
                    return true;
                }
                false
            });
            if grown {
                return p;
            }
        }
        // SAFETY: a new block, the contents copied, the old one freed.
        unsafe {
            let q = self.alloc(Layout::from_size_align_unchecked(new_size, l.align()));
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, l.size().min(new_size));
                self.dealloc(p, l);
            }
            q
        }
    }
}

#[global_allocator]
static A: Sound = Sound;

fn reserve(len: usize) -> usize {
    // SAFETY: an anonymous reservation, never unmapped.
    let s = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert!(s != libc::MAP_FAILED, "sound floor: no address space");
    s as usize
}

fn begin() {
    T.with(|t| {
        if t.depth.get() == 0 && t.sp_base.get().is_null() {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| {
                STACKS.store(reserve(SLICES * STACK), Ordering::Relaxed);
                SPACE.store(reserve(SLICES * SLICE), Ordering::Release);
            });
            let i = NEXT_SLICE.fetch_add(1, Ordering::Relaxed);
            assert!(i < SLICES, "more threads than slices");
            let base = SPACE.load(Ordering::Acquire) + i * SLICE;
            t.cur.set(base);
            t.peak.set(base);
            t.lim.set(base + SLICE - HDR);
            // The first entry two words in: the word before it is the sentinel (0).
            let sp = (STACKS.load(Ordering::Relaxed) + i * STACK) as *mut usize;
            t.sp_base.set(sp.wrapping_add(2));
            t.sp.set(sp.wrapping_add(2));
        }
        t.depth.set(t.depth.get() + 1);
    })
}

/// The outermost end takes only the high-water mark: the frees took the bump pointer back
/// already, and a live block keeps its memory.
fn end() {
    T.with(|t| {
        t.depth.set(t.depth.get() - 1);
        if t.depth.get() == 0 && t.cur.get() > t.peak.get() {
            t.peak.set(t.cur.get());
        }
    })
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
