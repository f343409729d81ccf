//! Who called: the objects after this library in the dynamic linker's list, where the next
//! allocator lives.
//!
//! A malloc wrapper preloaded after this library (a shim that counts, logs or checks) is the
//! library's next allocator, and such wrappers often hand each call on to glibc's own names:
//! `__libc_malloc`, `__libc_free`, and so on. The library exports those names too (so that a
//! block from one name can be freed by any other), and the first definition wins, so the
//! wrapper's `__libc_malloc` comes back into the library. When the library itself called the
//! wrapper, the thread is marked as inside the next allocator (`real.rs`), and that mark sends
//! the call on to glibc. This file covers the rest: a wrapper that calls glibc's names on its
//! own account (from its constructor, its own threads, a helper the program calls). A call whose
//! return address lies in an object after the library goes to the `__libc_*` that the library
//! itself found next (glibc's), never back into the library. A return address alone cannot
//! tell a tail call (a jump, which leaves the caller's caller's address) from the library's own
//! call, which is why the mark comes first.
//!
//! The objects are those `dl_iterate_phdr` lists after this library when the first `__libc_*`
//! call with a caller arrives (preloaded objects come in their `LD_PRELOAD` order, then the
//! program's libraries); their executable segments are kept in a fixed table. Objects loaded
//! later with `dlopen` cannot be the next allocator (an interposer has to be there from the
//! start), so they are not looked at again. Nothing here allocates.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};

/// Executable segments of the objects after this library, at most this many (the next
/// allocators come first, right after the library; a table that fills keeps those).
const MAX_RANGES: usize = 64;

static LO: [AtomicUsize; MAX_RANGES] = [const { AtomicUsize::new(0) }; MAX_RANGES];
static HI: [AtomicUsize; MAX_RANGES] = [const { AtomicUsize::new(0) }; MAX_RANGES];
static COUNT: AtomicUsize = AtomicUsize::new(0);

const UNKNOWN: u8 = 0;
const KNOWN: u8 = 1;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// True when `site`, a return address, lies in an object that comes after this library: the
/// caller is the next allocator (or an object below it), never the program or anything loaded
/// before the library. False for 0 (no caller known: where the `__libc_*` stubs cannot read the
/// return address).
pub fn called_from_next(site: usize) -> bool {
    if site == 0 {
        return false;
    }
    if STATE.load(Ordering::Acquire) != KNOWN {
        find_objects_after_us();
    }
    let n = COUNT.load(Ordering::Acquire);
    (0..n).any(|i| {
        let lo = LO[i].load(Ordering::Relaxed);
        lo <= site && site < HI[i].load(Ordering::Relaxed)
    })
}

/// The thread that fills the table (0 until one takes the job).
static FILLER: AtomicI32 = AtomicI32::new(0);

/// Fills the table once; a thread that finds another one filling it waits for it (the walk
/// takes microseconds and calls nothing that could come back here). The filling thread itself,
/// back here from a signal handler that interrupted the walk, does not wait for itself: it
/// finds the table empty so far (no caller is then taken for the next allocator's).
#[cold]
#[inline(never)]
fn find_objects_after_us() {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    if let Err(filler) = FILLER.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire) {
        if filler != me {
            while STATE.load(Ordering::Acquire) != KNOWN {
                core::hint::spin_loop();
            }
        }
        return;
    }
    let mut walk = Walk {
        ours: called_from_next as *const () as usize,
        after_us: false,
        count: 0,
    };
    // SAFETY: the callback only reads the program headers the linker passes it and writes the
    // table, whose slots no one reads until COUNT says so; `walk` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(note_object), (&mut walk as *mut Walk).cast()) };
    COUNT.store(walk.count, Ordering::Release);
    STATE.store(KNOWN, Ordering::Release);
}

struct Walk {
    /// An address in this library's code.
    ours: usize,
    /// The walk has passed this library.
    after_us: bool,
    count: usize,
}

/// `dl_iterate_phdr`'s callback: notes the executable segments of every object after ours.
unsafe extern "C" fn note_object(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: `data` is the `Walk` that `find_objects_after_us` passed; `info` is valid for the
    // call, its `dlpi_phdr` holds `dlpi_phnum` headers.
    let (walk, info) = unsafe { (&mut *(data as *mut Walk), &*info) };
    let headers = if info.dlpi_phdr.is_null() {
        &[][..]
    } else {
        // SAFETY: as above.
        unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) }
    };
    let segments = headers
        .iter()
        .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_X != 0)
        .map(|h| {
            let lo = info.dlpi_addr as usize + h.p_vaddr as usize;
            (lo, lo + h.p_memsz as usize)
        });
    if !walk.after_us {
        walk.after_us = segments
            .clone()
            .any(|(lo, hi)| lo <= walk.ours && walk.ours < hi);
        return 0;
    }
    for (lo, hi) in segments {
        if walk.count == MAX_RANGES {
            return 1; // full: stop the walk
        }
        LO[walk.count].store(lo, Ordering::Relaxed);
        HI[walk.count].store(hi, Ordering::Relaxed);
        walk.count += 1;
    }
    0
}
