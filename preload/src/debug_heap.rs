//! The `heap-debug` build of `libresizealloc.so`: guards around every block, poison in freed
//! ones, and a quarantine that holds freed blocks back before the heaps reuse them, so that
//! the misuses the release build cannot see (it keeps no header in the small-block heap, and
//! checks nothing it would have to pay for on every call) abort with one line naming the block.
//!
//! A block of `size` bytes is carved from a larger one of the heap that would have served it
//! (arena, small-block heap or next allocator, as the release build routes it):
//!
//! ```text
//! base                         user = base + front                 user + size
//! | ... | front | size | check |  the program's bytes ...           | canary (BACK bytes) |
//!       '------ Guard ---------'
//! ```
//!
//! * `free`, `realloc` and `malloc_usable_size` check the guard (its `check` word is a hash of
//!   the block's state, address, size and front, so that a write before the block, an interior
//!   or foreign pointer, or a block freed already, is told apart) and the canary after the
//!   block (a write past its end);
//! * a freed block is filled with poison and queued; it goes back to its heap only once the
//!   quarantine is full, after a check that the poison is intact (a write after free). Whole
//!   pages of a large freed block are protected instead (`PROT_NONE`, and given back to the
//!   kernel): a read or write after its free faults at once;
//! * every block's bytes start as [`FRESH`] (a read of memory never written), except `calloc`'s;
//! * at exit the quarantine is checked once more;
//! * C++'s sized deletes check the size they are given (`cxx.rs`).
//!
//! Memory: the quarantine holds at most [`QUARANTINE_BLOCKS`] blocks and [`QUARANTINE_BYTES`]
//! bytes of them; every block costs `front + BACK` bytes more. Time: a fill per allocation and
//! per free, a lock per free. A build for finding bugs, not for running a program fast.

use core::ffi::c_void;
use core::ptr;

use resizealloc::misuse::{self, HeapKind, Misuse};
use resizealloc::router;
use spin::Mutex;

use crate::malloc::{self, set_errno};
use crate::real;

/// The words right before every block the build hands out.
#[repr(C)]
struct Guard {
    /// Bytes from the heap's block to the program's (a multiple of 16; bit 0: its pages are
    /// protected, while the block is in the quarantine).
    front: usize,
    /// The size the program asked for.
    size: usize,
    /// [`check_word`] of the block's state.
    check: usize,
}

const GUARD: usize = core::mem::size_of::<Guard>();
/// The least `front`: the guard, rounded up to the blocks' 16-byte alignment.
const FRONT_MIN: usize = 32;
const _: () = assert!(FRONT_MIN >= GUARD && FRONT_MIN.is_multiple_of(16));
/// Canary bytes after every block.
const BACK: usize = 16;
const PROTECTED: usize = 1;

const LIVE: usize = 0x6C69_7665_B10C_0001;
const FREED: usize = 0x6672_6565_B10C_0002;
/// The canary's bytes.
const CANARY: u8 = 0xCB;
/// What a freed block holds.
const POISON: u8 = 0xDF;
/// What a fresh block holds (up to [`FRESH_FILL_MAX`] bytes of it).
const FRESH: u8 = 0xA5;
const FRESH_FILL_MAX: usize = 1 << 20;
/// Freed blocks with at least this many bytes have their whole pages protected, not poisoned.
const PROTECT_MIN: usize = 16 << 10;
const PAGE: usize = 4096;

/// At most this many freed blocks wait in the quarantine...
const QUARANTINE_BLOCKS: usize = 4096;
/// ... and at most this many bytes of them (beyond the last block queued).
const QUARANTINE_BYTES: usize = 64 << 20;

fn check_word(state: usize, user: usize, size: usize, front: usize) -> usize {
    state ^ user.rotate_left(13) ^ size.rotate_left(29) ^ (front & !PROTECTED).rotate_left(47)
}

/// The guard of the block at `user`.
fn guard(user: usize) -> *mut Guard {
    (user - GUARD) as *mut Guard
}

/// Whether one of the library's heaps (or its bootstrap buffer) holds `p`: a pointer there
/// without a valid guard is a misuse; one elsewhere may be a block the next allocator handed
/// out without the library (through glibc's `__libc_malloc`, say), and goes to it unchecked.
fn library_holds(p: *mut c_void) -> bool {
    router::owns(p.cast()) || router::owns_small(p.cast()) || real::is_boot(p)
}

#[cold]
#[inline(never)]
fn abort(what: Misuse, user: usize, size: Option<usize>) -> ! {
    misuse::abort(what, HeapKind::Guarded, user, size)
}

/// A block of `size` bytes aligned to `align` (a power of two), guarded; null with `errno` set
/// when no memory.
pub(crate) fn malloc(size: usize, align: usize, site: usize) -> *mut c_void {
    let align = align.max(16);
    let front = align.max(FRONT_MIN);
    let Some(total) = size.checked_add(front + BACK) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    let base = if align <= malloc::MIN_ALIGN {
        malloc::plain_malloc_at(total, site)
    } else {
        malloc::plain_aligned(align, total)
    };
    if base.is_null() {
        return base;
    }
    let user = base as usize + front;
    // SAFETY: the heap's block of `total` bytes holds the guard, the program's bytes and the
    // canary.
    unsafe {
        guard(user).write(Guard {
            front,
            size,
            check: check_word(LIVE, user, size, front),
        });
        ptr::write_bytes(user as *mut u8, FRESH, size.min(FRESH_FILL_MAX));
        ptr::write_bytes((user + size) as *mut u8, CANARY, BACK);
    }
    user as *mut c_void
}

/// `calloc` of `total` bytes (the caller checked the product).
pub(crate) fn calloc(total: usize, site: usize) -> *mut c_void {
    let p = malloc(total, malloc::MIN_ALIGN, site);
    if !p.is_null() {
        // SAFETY: a fresh block of `total` bytes.
        unsafe { ptr::write_bytes(p as *mut u8, 0, total) };
    }
    p
}

/// The live guarded block at `p`: its size, after the checks (aborting on a misuse). `None`: a
/// pointer the library does not hold and that has no guard, which the caller hands to the
/// next allocator.
fn live_size(p: *mut c_void) -> Option<usize> {
    let user = p as usize;
    if !user.is_multiple_of(16) || user < PAGE {
        if library_holds(p) {
            abort(Misuse::NotABlock, user, None);
        }
        return None;
    }
    // SAFETY: the words before a pointer the program calls a block (a wild pointer may fault
    // here, as it does in glibc's `free`).
    let g = unsafe { guard(user).read() };
    if g.check == check_word(LIVE, user, g.size, g.front) {
        // SAFETY: a live block: its canary follows its bytes.
        let canary = unsafe { core::slice::from_raw_parts((user + g.size) as *const u8, BACK) };
        if canary.iter().any(|&b| b != CANARY) {
            abort(Misuse::WrittenPastEnd, user, Some(g.size));
        }
        return Some(g.size);
    }
    if g.check == check_word(FREED, user, g.size, g.front) {
        abort(Misuse::Freed, user, Some(g.size));
    }
    if library_holds(p) {
        abort(Misuse::NotABlock, user, None);
    }
    None
}

/// `free(p)`.
pub(crate) fn free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let Some(size) = live_size(p) else {
        return malloc::plain_free(p);
    };
    let user = p as usize;
    // SAFETY: a live guarded block, which the program gives up: its guard and bytes are ours.
    unsafe {
        let g = guard(user);
        let mut front = (*g).front;
        let (lo, hi) = whole_pages(user, size);
        if size >= PROTECT_MIN && lo < hi {
            poison(user, lo - user);
            poison(hi, user + size - hi);
            // Given back to the kernel, then protected: a touch of the block faults.
            libc::madvise(lo as *mut c_void, hi - lo, libc::MADV_DONTNEED);
            if libc::mprotect(lo as *mut c_void, hi - lo, libc::PROT_NONE) == 0 {
                front |= PROTECTED;
            } else {
                poison(lo, hi - lo);
            }
        } else {
            poison(user, size);
        }
        (*g).front = front;
        (*g).check = check_word(FREED, user, size, front);
    }
    quarantine(user, size);
}

/// `malloc_usable_size(p)`: the size asked for (the canary lies right after it).
pub(crate) fn usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    live_size(p).unwrap_or_else(|| malloc::plain_usable_size(p))
}

/// `realloc(p, size)`: always a move, so that the old block goes through the quarantine.
pub(crate) fn realloc(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    if p.is_null() {
        return malloc(size, malloc::MIN_ALIGN, site);
    }
    let Some(old) = live_size(p) else {
        return crate::realloc::plain_realloc_at(p, size, site);
    };
    if size == 0 {
        free(p);
        return ptr::null_mut();
    }
    let q = malloc(size, malloc::MIN_ALIGN, site);
    if !q.is_null() {
        // SAFETY: two live blocks of at least `min(old, size)` bytes.
        unsafe { ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old.min(size)) };
        free(p);
    }
    q
}

/// A C++ sized delete of `p` with the size `given`: the size must be the one allocated (or 0
/// for a block of 1 byte, what `operator new(0)` asks for).
#[cfg_attr(not(feature = "heap-debug"), allow(dead_code))]
pub(crate) fn sized_free(p: *mut c_void, given: usize) {
    if !p.is_null() {
        if let Some(size) = live_size(p) {
            if given != size && !(given == 0 && size == 1) {
                abort(Misuse::SizeMismatch, p as usize, Some(size));
            }
        }
    }
    free(p)
}

/// The whole pages inside `[user, user + size)`, as `(lo, hi)`; `lo >= hi` when none.
fn whole_pages(user: usize, size: usize) -> (usize, usize) {
    ((user + PAGE - 1) & !(PAGE - 1), (user + size) & !(PAGE - 1))
}

/// # Safety
/// `[at, at + n)` is writable.
unsafe fn poison(at: usize, n: usize) {
    // SAFETY: caller's obligation.
    unsafe { ptr::write_bytes(at as *mut u8, POISON, n) };
}

/// The freed blocks waiting before their heap gets them back, oldest first.
struct Quarantine {
    blocks: [usize; QUARANTINE_BLOCKS],
    /// Index of the oldest.
    head: usize,
    len: usize,
    /// Their sizes' sum.
    bytes: usize,
}

static QUARANTINE: Mutex<Quarantine> = Mutex::new(Quarantine {
    blocks: [0; QUARANTINE_BLOCKS],
    head: 0,
    len: 0,
    bytes: 0,
});

impl Quarantine {
    /// Only while `len < QUARANTINE_BLOCKS` (else the newest would overwrite the oldest).
    fn push(&mut self, user: usize, size: usize) {
        self.blocks[(self.head + self.len) % QUARANTINE_BLOCKS] = user;
        self.len += 1;
        self.bytes += size;
    }

    /// The oldest block, when the quarantine holds too many or too much.
    fn pop_over(&mut self) -> Option<usize> {
        if self.len == 0 || (self.len < QUARANTINE_BLOCKS && self.bytes <= QUARANTINE_BYTES) {
            return None;
        }
        let user = self.blocks[self.head];
        self.head = (self.head + 1) % QUARANTINE_BLOCKS;
        self.len -= 1;
        // SAFETY: a quarantined block's guard is intact or `release` aborts; its size was
        // added by `push`.
        self.bytes -= unsafe { (*guard(user)).size };
        Some(user)
    }
}

/// Queues the freed block at `user`, and gives back the oldest ones while the quarantine is
/// over its bounds (outside the lock: their heaps' frees may take locks of their own). A full
/// quarantine makes room before the block goes in, under the same lock: another thread's
/// block may have filled it since this thread last looked.
fn quarantine(user: usize, size: usize) {
    let mut queued = false;
    loop {
        let oldest = {
            let mut q = QUARANTINE.lock();
            if !queued && q.len < QUARANTINE_BLOCKS {
                q.push(user, size);
                queued = true;
            }
            q.pop_over()
        };
        match oldest {
            // SAFETY: taken off the quarantine, so no one else releases it.
            Some(u) => unsafe { release(u) },
            None if queued => break,
            None => {}
        }
    }
}

/// Checks a quarantined block (aborting on a write since its free), then gives it back to its
/// heap.
///
/// # Safety
/// `user` is a block the caller took off the quarantine.
unsafe fn release(user: usize) {
    // SAFETY: caller's obligation: a freed guarded block, its memory still the program's no
    // longer, ours until given back.
    unsafe {
        let front = check_freed(user);
        free_base((user - (front & !PROTECTED)) as *mut c_void);
    }
}

/// Checks a freed block: its guard, that its poison is intact, its canary; unprotects its pages.
/// Returns its guard's `front`.
///
/// # Safety
/// `user` is a quarantined block.
unsafe fn check_freed(user: usize) -> usize {
    // SAFETY: caller's obligation.
    let g = unsafe { guard(user).read() };
    if g.check != check_word(FREED, user, g.size, g.front) {
        abort(Misuse::WrittenAfterFree, user, None);
    }
    let (lo, hi) = whole_pages(user, g.size);
    let protected = g.front & PROTECTED != 0;
    let intact = |from: usize, n: usize| {
        // SAFETY: bytes of the freed block, readable (not protected).
        unsafe { core::slice::from_raw_parts(from as *const u8, n) }
            .iter()
            .all(|&b| b == POISON)
    };
    let poison_ok = if protected {
        // SAFETY: the pages `free` protected, given back to their heap's use.
        unsafe {
            libc::mprotect(
                lo as *mut c_void,
                hi - lo,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        intact(user, lo - user) && intact(hi, user + g.size - hi)
    } else {
        intact(user, g.size)
    };
    // SAFETY: the canary follows the block's bytes.
    let canary = unsafe { core::slice::from_raw_parts((user + g.size) as *const u8, BACK) };
    if !poison_ok || canary.iter().any(|&b| b != CANARY) {
        abort(Misuse::WrittenAfterFree, user, Some(g.size));
    }
    g.front
}

/// Gives the heap's block at `base` back to the heap that holds it.
fn free_base(base: *mut c_void) {
    malloc::plain_free(base)
}

/// At exit: every block still in the quarantine is checked for a write since its free.
pub(crate) extern "C" fn check_quarantine_at_exit() {
    let q = QUARANTINE.lock();
    for i in 0..q.len {
        let user = q.blocks[(q.head + i) % QUARANTINE_BLOCKS];
        // SAFETY: a quarantined block; it stays quarantined (and its pages unprotected, which
        // the exit allows).
        unsafe { check_freed(user) };
    }
}

/// The gate of the quarantine's fork handlers (see the core's `fork.rs`).
static FORK_GATE: resizealloc::fork::Gate = resizealloc::fork::Gate::new();

/// `fork`: the quarantine's lock is taken before and released in both processes after, so
/// that the child never finds it held by a thread it does not have (unless the gate says to
/// take nothing).
pub(crate) extern "C" fn fork_prepare() {
    if FORK_GATE.enter() {
        FORK_GATE.took(resizealloc::fork::wait_for(|| {
            QUARANTINE.try_lock().map(core::mem::forget).is_some()
        }));
    }
}

pub(crate) extern "C" fn fork_parent() {
    if FORK_GATE.leave(false) == resizealloc::fork::Leave::Release {
        // SAFETY: `fork_prepare` took the lock and forgot its guard; this thread holds it.
        unsafe { QUARANTINE.force_unlock() };
    }
}

pub(crate) extern "C" fn fork_child() {
    if FORK_GATE.leave(true) != resizealloc::fork::Leave::Nothing {
        // SAFETY: as in `fork_parent`, for this thread's copy; or the gate gave up on the lock
        // and the child has no other thread that could hold it.
        unsafe { QUARANTINE.force_unlock() };
    }
}
