//! Python's raw allocator (`PYMEM_DOMAIN_RAW`) in front of the arenas.
//!
//! pymalloc serves objects up to 512 bytes from its own pools and sends everything larger (big
//! `bytes`, list and dict tables, buffers) to `PyMem_RawMalloc`. The first region installs a
//! wrapper there with `PyMem_SetAllocator`; it stays for the life of the process, because the
//! blocks it handed out must come back through it:
//!
//! * allocation: inside a region on the calling thread, the thread's arena; otherwise (and
//!   whenever the arena declines) the allocator it replaced ("previous");
//! * free / realloc: a block of the arenas (one range check, `router::owns`) is freed or moved
//!   by the arena's rules; anything else goes to the previous allocator.
//!
//! After start-up the CPython docs require a new allocator to wrap the existing one, and the
//! raw domain is called without the GIL, from any thread. So the wrapper never touches Python
//! and never allocates through it: it uses the core crate's thread state and atomics only.
//!
//! **Installation race.** `PyMem_SetAllocator` copies the struct with plain stores while other
//! threads may read it without the GIL, so a reader could pair the new functions with the old
//! `ctx` or the reverse. The installed struct therefore carries the previous allocator's own
//! `ctx`, and the wrapper's functions ignore the `ctx` they get and read the previous allocator
//! from `PREV`: every mix of old and new fields is a consistent allocator, and a block the old
//! functions served is freed correctly by the new ones (it is not in the arenas).
//!
//! **Limits.** A tool that saved the raw allocator before the first region and later restores
//! it (tracemalloc does, at `tracemalloc.stop()` and at interpreter exit) would drop the wrapper
//! while arena blocks are live. So while tracemalloc traces, the wrapper is not installed (NumPy
//! arrays still use the arena through their handler); the next region tries again.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use pyo3::prelude::*;
use resizealloc::router::{self, Route};

/// `PyMemAllocatorEx` of `Include/cpython/pymem.h` (stable layout since Python 3.5).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PyMemAllocatorEx {
    ctx: *mut c_void,
    malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
    calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
    realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void>,
    free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
}

const PYMEM_DOMAIN_RAW: c_int = 0;
/// What `malloc` guarantees on x86-64 and aarch64, and the arena's smallest alignment.
const ALIGN: usize = resizealloc::arena::MIN_ALIGN;

extern "C" {
    fn PyMem_GetAllocator(domain: c_int, allocator: *mut PyMemAllocatorEx);
    fn PyMem_SetAllocator(domain: c_int, allocator: *mut PyMemAllocatorEx);
}

/// The allocator the wrapper replaced: set once, before the wrapper is installed, never changed.
struct Prev(PyMemAllocatorEx);
// SAFETY: the struct holds function pointers and an opaque context that the raw domain's
// contract makes callable from any thread without the GIL; it is never written after `set`.
unsafe impl Sync for Prev {}
// SAFETY: as above.
unsafe impl Send for Prev {}

static PREV: OnceLock<Prev> = OnceLock::new();

const NOT_INSTALLED: u8 = 0;
const INSTALLED: u8 = 1;
static STATE: AtomicU8 = AtomicU8::new(NOT_INSTALLED);

/// True once the wrapper is the raw domain's allocator (it then stays).
pub fn installed() -> bool {
    STATE.load(Ordering::Acquire) == INSTALLED
}

/// Installs the wrapper unless it is already installed, or tracemalloc is tracing. Needs the
/// GIL (which `py` proves): installations are serialised by it.
#[inline]
pub fn ensure_installed(py: Python<'_>) {
    if STATE.load(Ordering::Acquire) == INSTALLED {
        return;
    }
    install(py);
}

#[cold]
#[inline(never)]
fn install(py: Python<'_>) {
    if disabled() || tracemalloc_tracing(py) {
        return;
    }
    let mut prev = PyMemAllocatorEx {
        ctx: core::ptr::null_mut(),
        malloc: None,
        calloc: None,
        realloc: None,
        free: None,
    };
    // SAFETY: `prev` is a valid out pointer; we hold the GIL.
    unsafe { PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &mut prev) };
    if prev.malloc.is_none() || prev.calloc.is_none() || prev.realloc.is_none() || prev.free.is_none() {
        return; // not an allocator we can chain to
    }
    if PREV.set(Prev(prev)).is_err() {
        return; // cannot happen: STATE is set right after PREV, both under the GIL
    }
    let mut ours = PyMemAllocatorEx {
        ctx: prev.ctx,
        malloc: Some(raw_malloc),
        calloc: Some(raw_calloc),
        realloc: Some(raw_realloc),
        free: Some(raw_free),
    };
    // SAFETY: we hold the GIL; `ours` wraps the current allocator as the docs require, and
    // PREV is published (OnceLock's release store) before any thread can call our functions.
    unsafe { PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &mut ours) };
    STATE.store(INSTALLED, Ordering::Release);
}

/// `RESIZEALLOC_PY_RAW=off` (or 0/no/false) leaves Python's raw allocator alone (A/B switch:
/// NumPy arrays still use the arena).
fn disabled() -> bool {
    std::env::var_os("RESIZEALLOC_PY_RAW")
        .and_then(|v| resizealloc::options::parse_bool(v.as_encoded_bytes()))
        .is_some_and(|on| !on)
}

fn tracemalloc_tracing(py: Python<'_>) -> bool {
    let tracing = || -> PyResult<bool> { py.import("_tracemalloc")?.call_method0("is_tracing")?.extract() };
    // If the question cannot be answered, assume the worst and do not install.
    tracing().unwrap_or(true)
}

#[inline(always)]
fn prev() -> Option<&'static PyMemAllocatorEx> {
    PREV.get().map(|p| &p.0)
}

/// Raw requests up to this size stay with the previous allocator. pymalloc sends only objects
/// over 512 bytes here; smaller raw requests come straight from C code, and are mostly caches
/// that live for the process (NumPy's dimension cache, interpreter state). Made inside a
/// region, one of them pins an arena granule in the middle of the next regions' run, which
/// then overflow past it at every step (measured: a 96-byte survivor made an 8 MiB NumPy step
/// 3x slower).
pub const RAW_MIN_ARENA: usize = 513;

/// True when an allocation of `size` bytes on this thread should try the arena (inside a
/// region, or a thread whose route is not known yet).
#[inline(always)]
fn try_arena(size: usize) -> bool {
    size >= RAW_MIN_ARENA && !matches!(router::route(), Route::Next)
}

unsafe extern "C" fn raw_malloc(_ctx: *mut c_void, size: usize) -> *mut c_void {
    if try_arena(size) {
        // SAFETY: size >= 1; ALIGN is a power of two.
        let p = unsafe { router::alloc(size, ALIGN) };
        if !p.is_null() {
            return p.cast();
        }
    }
    match prev() {
        // SAFETY: the previous raw allocator, called with its own context, as it was installed.
        Some(a) => unsafe { a.malloc.map_or(core::ptr::null_mut(), |f| f(a.ctx, size)) },
        None => core::ptr::null_mut(),
    }
}

unsafe extern "C" fn raw_calloc(_ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    if let Some(total) = nelem.checked_mul(elsize) {
        if try_arena(total) {
            // SAFETY: size >= 1; ALIGN is a power of two.
            let p = unsafe { router::alloc_zeroed(total, ALIGN, 0) };
            if !p.is_null() {
                return p.cast();
            }
        }
    }
    match prev() {
        // SAFETY: the previous raw allocator with its own context (it handles overflow).
        Some(a) => unsafe { a.calloc.map_or(core::ptr::null_mut(), |f| f(a.ctx, nelem, elsize)) },
        None => core::ptr::null_mut(),
    }
}

unsafe extern "C" fn raw_realloc(ctx: *mut c_void, p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: realloc(NULL, n) is malloc(n).
        return unsafe { raw_malloc(ctx, size) };
    }
    let Some(a) = prev() else {
        return core::ptr::null_mut();
    };
    if router::owns(p.cast()) {
        // SAFETY: `p` is a live arena block (the raw domain's caller owns it); size >= 1 after
        // max (Python's own raw realloc also turns 0 into 1); ALIGN is a power of two. The
        // fallback is the previous allocator, which then owns the moved block.
        return unsafe {
            router::realloc_owned(p.cast(), size.max(1), ALIGN, 0, |n, _| {
                a.malloc.map_or(core::ptr::null_mut(), |f| f(a.ctx, n).cast())
            })
        }
        .cast();
    }
    // SAFETY: not an arena block, so the previous allocator (or one before it) served it.
    unsafe { a.realloc.map_or(core::ptr::null_mut(), |f| f(a.ctx, p, size)) }
}

unsafe extern "C" fn raw_free(_ctx: *mut c_void, p: *mut c_void) {
    // SAFETY: `p` is null, a live block of the arenas, or a block of the previous allocator:
    // what this domain's free may be given.
    if unsafe { router::free_fast(p.cast()) } {
        return;
    }
    if router::owns(p.cast()) {
        // SAFETY: a live arena block.
        unsafe { router::free_owned(p.cast()) };
        return;
    }
    if let Some(a) = prev() {
        // SAFETY: not ours: the previous allocator's block (or null, which it accepts).
        unsafe {
            if let Some(f) = a.free {
                f(a.ctx, p)
            }
        }
    }
}
