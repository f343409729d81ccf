//! The next allocator in the chain, found with `dlsym(RTLD_NEXT, …)`, and the bootstrap buffer
//! that serves allocations made while we are still looking it up.
//!
//! `dlsym` itself may call `calloc` (for its error buffer). Those calls, and any other call that
//! arrives while resolution is in progress, are served from a static 64 KiB buffer by an atomic
//! bump. Bootstrap blocks are never given to the next allocator: `free` ignores them, `realloc`
//! copies them out.
//!
//! A next allocator that is not glibc itself (a wrapper preloaded after the library that counts
//! or logs, or another allocator) is called through a guard that marks the thread as inside it
//! ([`resizealloc::region::enter_next`]): such a wrapper often hands its calls on to glibc's
//! `__libc_malloc` and friends, names the library exports too (they resolve to the first
//! definition, ours), and those exports send a marked thread's calls to glibc at once. The mark
//! says what the thread is doing, so a wrapper that reaches `__libc_malloc` by a tail call (a
//! jump, with no return address of its own) is told apart as well as one that calls it. When
//! the next `malloc` is glibc's (the same function as the next `__libc_malloc`), nothing after
//! the library can call back into it, and the slots hold glibc's functions with no guard.

use core::ffi::{c_int, c_void, CStr};
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};

use resizealloc::os;

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type MemalignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;

// The two hot entries start out pointing at functions that look the next allocator up, so
// that a call through them needs no null test.
/// The next object's `malloc`, or [`malloc_unresolved`] until it is found: always callable
/// (the `malloc` entry point jumps through it from assembly).
pub(crate) static MALLOC: AtomicPtr<c_void> = AtomicPtr::new(malloc_unresolved as *mut c_void);
/// The next object's `free`, or [`free_unresolved`] until it is found: always callable (the
/// `free` entry point jumps through it from assembly).
pub(crate) static FREE: AtomicPtr<c_void> = AtomicPtr::new(free_unresolved as *mut c_void);
static CALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static REALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static MEMALIGN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
// The next objects' functions themselves, where a slot above holds the guard that calls them.
static NEXT_MALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static NEXT_FREE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static NEXT_CALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static NEXT_REALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static NEXT_MEMALIGN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static USABLE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
// The `__libc_*` names the library finds next (glibc's), for the next allocator's own calls to
// them (see `chain.rs`). Null where the next objects have none.
static LIBC_MALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static LIBC_FREE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static LIBC_CALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static LIBC_REALLOC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static LIBC_MEMALIGN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

const UNINIT: u8 = 0;
const INITIALIZING: u8 = 1;
const READY: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNINIT);
/// The thread doing the lookup: its own nested calls (from inside `dlsym`) use the bootstrap
/// buffer; any other thread waits for the lookup to finish.
static RESOLVER: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

// ------------------------------------------------------------------------------ bootstrap

const BOOT_BYTES: usize = 64 << 10;
#[repr(C, align(4096))]
struct BootBuffer([u8; BOOT_BYTES]);
static mut BOOT: BootBuffer = BootBuffer([0; BOOT_BYTES]);
static BOOT_USED: AtomicUsize = AtomicUsize::new(0);

fn boot_base() -> usize {
    // Only the address is taken; the contents are handed out in disjoint pieces.
    core::ptr::addr_of_mut!(BOOT) as usize
}

/// True when `p` came from the bootstrap buffer.
#[inline(always)]
pub fn is_boot(p: *mut c_void) -> bool {
    (p as usize).wrapping_sub(boot_base()) < BOOT_BYTES
}

/// Bytes usable in a bootstrap block.
pub fn boot_size(p: *mut c_void) -> usize {
    // SAFETY: every bootstrap block has its size in the 16 bytes before it.
    unsafe { *((p as usize - 16) as *const usize) }
}

/// Serves `size` bytes aligned to `align` from the bootstrap buffer (zeroed: never reused).
fn boot_alloc(size: usize, align: usize) -> *mut c_void {
    // `free` must look at every pointer that is not an arena block from now on.
    resizealloc::router::watch_foreign_frees();
    let align = align.max(16);
    let mut used = BOOT_USED.load(Ordering::Relaxed);
    loop {
        let start = (boot_base() + used + 16 + align - 1) & !(align - 1);
        let end = match start.checked_add(size) {
            Some(e) if e <= boot_base() + BOOT_BYTES => e,
            _ => return core::ptr::null_mut(),
        };
        let new_used = (end - boot_base() + 15) & !15;
        match BOOT_USED.compare_exchange_weak(used, new_used, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => {
                // SAFETY: `[start - 16, end)` is ours alone after the successful CAS.
                unsafe { *((start - 16) as *mut usize) = size };
                return start as *mut c_void;
            }
            Err(now) => used = now,
        }
    }
}

// ------------------------------------------------------------------------------ resolution

fn lookup(name: &core::ffi::CStr) -> *mut c_void {
    // SAFETY: RTLD_NEXT lookup of a NUL-terminated name; no memory is passed in.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

#[cold]
#[inline(never)]
fn resolve() -> bool {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    match STATE.compare_exchange(UNINIT, INITIALIZING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => RESOLVER.store(me, Ordering::Release),
        Err(READY) => return true,
        Err(_) => {
            if RESOLVER.load(Ordering::Acquire) == me {
                return false; // our own dlsym is calling us: use the bootstrap buffer
            }
            // Another thread is looking the functions up: wait for all of them at once, so
            // that no call sees some pointers published and others not.
            while STATE.load(Ordering::Acquire) != READY {
                core::hint::spin_loop();
            }
            return true;
        }
    }
    let m = lookup(c"malloc");
    let f = lookup(c"free");
    let c = lookup(c"calloc");
    let r = lookup(c"realloc");
    let a = lookup(c"memalign");
    let u = lookup(c"malloc_usable_size");
    if m.is_null() || f.is_null() || c.is_null() || r.is_null() || a.is_null() {
        os::fatal(b"resizealloc: cannot find the next malloc with dlsym(RTLD_NEXT); is the program static?\n");
    }
    let (lm, lf, lc, lr, la) = (
        lookup(c"__libc_malloc"),
        lookup(c"__libc_free"),
        lookup(c"__libc_calloc"),
        lookup(c"__libc_realloc"),
        lookup(c"__libc_memalign"),
    );
    LIBC_MALLOC.store(lm, Ordering::Release);
    LIBC_FREE.store(lf, Ordering::Release);
    LIBC_CALLOC.store(lc, Ordering::Release);
    LIBC_REALLOC.store(lr, Ordering::Release);
    LIBC_MEMALIGN.store(la, Ordering::Release);
    MALLOC.store(
        through(m, lm, &NEXT_MALLOC, guarded_malloc as *mut c_void),
        Ordering::Release,
    );
    FREE.store(
        through(f, lf, &NEXT_FREE, guarded_free as *mut c_void),
        Ordering::Release,
    );
    CALLOC.store(
        through(c, lc, &NEXT_CALLOC, guarded_calloc as *mut c_void),
        Ordering::Release,
    );
    REALLOC.store(
        through(r, lr, &NEXT_REALLOC, guarded_realloc as *mut c_void),
        Ordering::Release,
    );
    MEMALIGN.store(
        through(a, la, &NEXT_MEMALIGN, guarded_memalign as *mut c_void),
        Ordering::Release,
    );
    USABLE.store(u, Ordering::Release);
    STATE.store(READY, Ordering::Release);
    true
}

/// What a slot holds for the next object's function `next`: `next` itself when it is the
/// function glibc's name `glibc` resolves to next (glibc's own), else `guard`, which calls
/// `next` (stored in `raw`) with the thread marked as inside the next allocator.
fn through(
    next: *mut c_void,
    glibc: *mut c_void,
    raw: &AtomicPtr<c_void>,
    guard: *mut c_void,
) -> *mut c_void {
    if next == glibc {
        return next;
    }
    raw.store(next, Ordering::Release);
    guard
}

/// A guard of [`through`]: calls the next object's function in `$raw` between
/// `enter_next` and `leave_next`.
macro_rules! guarded {
    ($name:ident, $raw:ident, $ty:ty, ($($arg:ident: $t:ty),*) -> $ret:ty) => {
        unsafe extern "C" fn $name($($arg: $t),*) -> $ret {
            let was = resizealloc::region::enter_next();
            let f = $raw.load(Ordering::Acquire);
            // SAFETY: `$raw` was stored, with the next object's function of this type, before
            // the slot that names this guard was published; the arguments are the caller's.
            let r = unsafe { core::mem::transmute::<*mut c_void, $ty>(f)($($arg),*) };
            resizealloc::region::leave_next(was);
            r
        }
    };
}

guarded!(guarded_malloc, NEXT_MALLOC, MallocFn, (size: usize) -> *mut c_void);
guarded!(guarded_free, NEXT_FREE, FreeFn, (p: *mut c_void) -> ());
guarded!(guarded_calloc, NEXT_CALLOC, CallocFn, (n: usize, size: usize) -> *mut c_void);
guarded!(guarded_realloc, NEXT_REALLOC, ReallocFn, (p: *mut c_void, size: usize) -> *mut c_void);
guarded!(guarded_memalign, NEXT_MEMALIGN, MemalignFn, (align: usize, size: usize) -> *mut c_void);

/// The next allocator's function in `slot` (one of the cold ones, null until resolved), or
/// null while our own lookup is in progress on this thread, or where the next objects have no
/// such function (the `__libc_*` names outside glibc).
#[inline(always)]
fn get(slot: &AtomicPtr<c_void>) -> *mut c_void {
    let p = slot.load(Ordering::Acquire);
    if !p.is_null() {
        return p;
    }
    if resolve() {
        slot.load(Ordering::Acquire)
    } else {
        core::ptr::null_mut()
    }
}

/// Next allocator's `malloc`, or the bootstrap buffer while it is being found.
#[inline(always)]
pub fn malloc(size: usize) -> *mut c_void {
    let f = MALLOC.load(Ordering::Acquire);
    // SAFETY: `f` is the next object's `malloc`, or `malloc_unresolved`, which has its type.
    unsafe { core::mem::transmute::<*mut c_void, MallocFn>(f)(size) }
}

/// What `MALLOC` points at until the next allocator is found.
#[cold]
#[inline(never)]
unsafe extern "C" fn malloc_unresolved(size: usize) -> *mut c_void {
    if !resolve() {
        return boot_alloc(size, 16);
    }
    malloc(size)
}

/// Next allocator's `free`. Bootstrap blocks are ignored.
#[inline(always)]
pub fn free(p: *mut c_void) {
    if is_boot(p) {
        return;
    }
    // SAFETY: not ours, not a bootstrap block.
    unsafe { free_next(p) }
}

/// Next allocator's `free`, with no look at the bootstrap buffer.
///
/// # Safety
/// `p` is null or a block of the next allocator (not a bootstrap block).
#[inline(always)]
pub unsafe fn free_next(p: *mut c_void) {
    let f = FREE.load(Ordering::Acquire);
    // SAFETY: `f` is the next object's `free`, or `free_unresolved`, which has its type; the
    // caller vouches for `p`.
    unsafe { core::mem::transmute::<*mut c_void, FreeFn>(f)(p) }
}

/// What `FREE` points at until the next allocator is found.
#[cold]
#[inline(never)]
unsafe extern "C" fn free_unresolved(p: *mut c_void) {
    if !resolve() {
        return; // still resolving: a non-bootstrap pointer cannot exist yet
    }
    // SAFETY: forwarded: `p` came from the next allocator.
    unsafe { free_next(p) }
}

/// Next allocator's `calloc`.
pub fn calloc(n: usize, size: usize) -> *mut c_void {
    let f = CALLOC.load(Ordering::Acquire);
    if f.is_null() {
        return calloc_unresolved(n, size);
    }
    // SAFETY: `f` is the next object's `calloc`.
    unsafe { core::mem::transmute::<*mut c_void, CallocFn>(f)(n, size) }
}

/// [`calloc`] before the next allocator is known: it is looked up, and while that lookup runs
/// the bootstrap buffer serves. Out of line, so that the callers' common path makes no call
/// and so needs no stack frame.
#[cold]
#[inline(never)]
fn calloc_unresolved(n: usize, size: usize) -> *mut c_void {
    let f = get(&CALLOC);
    if f.is_null() {
        return match n.checked_mul(size) {
            Some(total) => boot_alloc(total, 16),
            None => core::ptr::null_mut(),
        };
    }
    // SAFETY: `f` is the next object's `calloc`.
    unsafe { core::mem::transmute::<*mut c_void, CallocFn>(f)(n, size) }
}

/// Next allocator's `realloc` for a pointer it owns (or null).
pub fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let f = get(&REALLOC);
    if f.is_null() {
        return boot_alloc(size, 16);
    }
    // SAFETY: `p` is null or came from the next allocator.
    unsafe { core::mem::transmute::<*mut c_void, ReallocFn>(f)(p, size) }
}

/// Next allocator's `memalign` (every aligned entry point maps onto it).
pub fn memalign(align: usize, size: usize) -> *mut c_void {
    let f = get(&MEMALIGN);
    if f.is_null() {
        return boot_alloc(size, align);
    }
    // SAFETY: `f` is the next object's `memalign`.
    unsafe { core::mem::transmute::<*mut c_void, MemalignFn>(f)(align, size) }
}

/// False when `p` fails the checks glibc's `free` makes before it reads past the chunk's size
/// word (alignment, a size of at least a minimum chunk, no wrap around the address space):
/// glibc's `malloc_usable_size` would read where that size points, and fault on a pointer that
/// `free` reports as invalid (a stack address, an interior pointer) with glibc's message and
/// `SIGABRT`. True for every pointer when the next allocator is not glibc (its checks are its
/// own).
pub fn plausible_block(p: *mut c_void) -> bool {
    if MALLOC.load(Ordering::Relaxed) != LIBC_MALLOC.load(Ordering::Relaxed) {
        return true;
    }
    if !(p as usize).is_multiple_of(16) {
        return false;
    }
    // SAFETY: the word before a block glibc handed out is its chunk's size; glibc's `free` of
    // `p` reads the same word first, whatever `p` is.
    let size = unsafe { *(p as *const usize).sub(1) } & !7;
    size >= 32 && size.is_multiple_of(16) && (p as usize) <= size.wrapping_neg()
}

/// Next allocator's `malloc_usable_size` (0 if it has none).
pub fn usable_size(p: *mut c_void) -> usize {
    let f = get(&USABLE);
    if f.is_null() {
        return 0;
    }
    // SAFETY: `p` came from the next allocator.
    unsafe { core::mem::transmute::<*mut c_void, UsableFn>(f)(p) }
}

// ------------------------------------------------------------------------------ glibc's own names

/// The next objects' `__libc_malloc` (glibc's), else their `malloc`.
pub fn libc_malloc(size: usize) -> *mut c_void {
    let f = get(&LIBC_MALLOC);
    if f.is_null() {
        return malloc(size);
    }
    // SAFETY: `f` is glibc's `__libc_malloc`, which has `malloc`'s type.
    unsafe { core::mem::transmute::<*mut c_void, MallocFn>(f)(size) }
}

/// The next objects' `__libc_free` (glibc's), else their `free`. Bootstrap blocks are ignored.
pub fn libc_free(p: *mut c_void) {
    if is_boot(p) {
        return;
    }
    let f = get(&LIBC_FREE);
    if f.is_null() {
        return free(p);
    }
    // SAFETY: `f` is glibc's `__libc_free`; `p` is one of its blocks (the caller's).
    unsafe { core::mem::transmute::<*mut c_void, FreeFn>(f)(p) }
}

/// The next objects' `__libc_calloc` (glibc's), else their `calloc`.
pub fn libc_calloc(n: usize, size: usize) -> *mut c_void {
    let f = get(&LIBC_CALLOC);
    if f.is_null() {
        return calloc(n, size);
    }
    // SAFETY: `f` is glibc's `__libc_calloc`, which has `calloc`'s type.
    unsafe { core::mem::transmute::<*mut c_void, CallocFn>(f)(n, size) }
}

/// The next objects' `__libc_realloc` (glibc's), else their `realloc`.
pub fn libc_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let f = get(&LIBC_REALLOC);
    if f.is_null() {
        return realloc(p, size);
    }
    // SAFETY: `f` is glibc's `__libc_realloc`; `p` is null or one of its blocks (the caller's).
    unsafe { core::mem::transmute::<*mut c_void, ReallocFn>(f)(p, size) }
}

/// The next objects' `__libc_memalign` (glibc's), else their `memalign`.
pub fn libc_memalign(align: usize, size: usize) -> *mut c_void {
    let f = get(&LIBC_MEMALIGN);
    if f.is_null() {
        return memalign(align, size);
    }
    // SAFETY: `f` is glibc's `__libc_memalign`, which has `memalign`'s type.
    unsafe { core::mem::transmute::<*mut c_void, MemalignFn>(f)(align, size) }
}

// ------------------------------------------------------------------------------ glibc's extensions

/// A function of the next allocator, looked up by name on first use.
pub(crate) struct NextFn {
    name: &'static CStr,
    /// 0: not looked up yet; `ABSENT`: the next objects do not define it; else its address.
    addr: AtomicUsize,
}

const ABSENT: usize = 1;

impl NextFn {
    pub(crate) const fn new(name: &'static CStr) -> Self {
        NextFn {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The function's address, or `None` when the next objects do not define it. Two threads
    /// may both look it up the first time; they store the same answer.
    pub(crate) fn get(&self) -> Option<*mut c_void> {
        let mut a = self.addr.load(Ordering::Acquire);
        if a == 0 {
            // SAFETY: an RTLD_NEXT lookup of a NUL-terminated name, made from this library (so
            // "next" means after libresizealloc.so), outside any allocator internals: `dlsym`
            // may allocate through us, which is fine here.
            let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
            a = if p.is_null() { ABSENT } else { p as usize };
            self.addr.store(a, Ordering::Release);
        }
        (a != ABSENT).then_some(a as *mut c_void)
    }
}

pub(crate) static NEXT_MALLINFO2: NextFn = NextFn::new(c"mallinfo2");
pub(crate) static NEXT_MALLINFO: NextFn = NextFn::new(c"mallinfo");
pub(crate) static NEXT_MALLOC_TRIM: NextFn = NextFn::new(c"malloc_trim");
pub(crate) static NEXT_MALLOC_STATS: NextFn = NextFn::new(c"malloc_stats");
pub(crate) static NEXT_MALLOC_INFO: NextFn = NextFn::new(c"malloc_info");

/// Looks up, from the library's constructor, the next allocator's functions that process mode
/// may call from inside `free` (`sample_next_free`), so that no `dlsym` ever runs there.
pub fn resolve_early() {
    let _ = (
        NEXT_MALLINFO2.get(),
        NEXT_MALLINFO.get(),
        NEXT_MALLOC_TRIM.get(),
    );
}

/// glibc's `struct mallinfo2` (2.33 and later).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Mallinfo2 {
    pub arena: usize,
    pub ordblks: usize,
    pub smblks: usize,
    pub hblks: usize,
    pub hblkhd: usize,
    pub usmblks: usize,
    pub fsmblks: usize,
    pub uordblks: usize,
    pub fordblks: usize,
    pub keepcost: usize,
}

/// glibc's `struct mallinfo`: the same fields as `int`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Mallinfo {
    pub arena: c_int,
    pub ordblks: c_int,
    pub smblks: c_int,
    pub hblks: c_int,
    pub hblkhd: c_int,
    pub usmblks: c_int,
    pub fsmblks: c_int,
    pub uordblks: c_int,
    pub fordblks: c_int,
    pub keepcost: c_int,
}

pub(crate) type Mallinfo2Fn = unsafe extern "C" fn() -> Mallinfo2;
pub(crate) type MallinfoFn = unsafe extern "C" fn() -> Mallinfo;

/// The next allocator's figures: its `mallinfo2`, else its `mallinfo` widened (glibc's `int`
/// fields are truncated sizes, so they are read as unsigned), else zeros.
pub(crate) fn next_mallinfo2() -> Mallinfo2 {
    if let Some(f) = NEXT_MALLINFO2.get() {
        // SAFETY: the next object's `mallinfo2`, which has this signature.
        return unsafe { core::mem::transmute::<*mut c_void, Mallinfo2Fn>(f)() };
    }
    let Some(f) = NEXT_MALLINFO.get() else {
        return Mallinfo2::default();
    };
    // SAFETY: the next object's `mallinfo`, which has this signature.
    let m = unsafe { core::mem::transmute::<*mut c_void, MallinfoFn>(f)() };
    let w = |v: c_int| v as u32 as usize;
    Mallinfo2 {
        arena: w(m.arena),
        ordblks: w(m.ordblks),
        smblks: w(m.smblks),
        hblks: w(m.hblks),
        hblkhd: w(m.hblkhd),
        usmblks: w(m.usmblks),
        fsmblks: w(m.fsmblks),
        uordblks: w(m.uordblks),
        fordblks: w(m.fordblks),
        keepcost: w(m.keepcost),
    }
}

pub(crate) type TrimFn = unsafe extern "C" fn(usize) -> c_int;
