//! glibc's extensions of the malloc family, so that programs and tools that use them see the
//! arenas too.
//!
//! * `__libc_malloc`, `__libc_free`, `__libc_calloc`, `__libc_realloc`, `__libc_memalign`,
//!   `__libc_valloc`, `__libc_pvalloc`: glibc's own names for the family. They are the exported
//!   functions of `entry.rs` and `malloc.rs` under another name, so a block from one name can be freed by any
//!   other (`__libc_free` of an arena block must not reach glibc, which would abort). mimalloc
//!   and tcmalloc export these names too. A call from the next allocator goes to glibc's own
//!   (see `chain.rs`).
//! * `mallinfo2`, `mallinfo`: the next allocator's figures plus the library's: its live blocks
//!   in `uordblks`, its free resident memory in `fordblks` (see [`mallinfo2`]).
//! * `malloc_trim`: trims the calling thread's arena, then the next allocator.
//! * `malloc_stats`, `malloc_info`: the next allocator's report, then the arenas'.
//!
//! `mallopt` is not exported: glibc's answers, and none of its parameters applies to the arenas.
//! The next allocator's functions are looked up with `dlsym(RTLD_NEXT, …)` on first use, from
//! the program's own call (never from inside an allocation); one that does not exist is
//! answered as if it reported nothing. Nothing here panics; the text is formatted on the stack.

use core::ffi::{c_char, c_int, c_void};
use core::fmt::Write;

use resizealloc::os::PAGE;
use resizealloc::router;

use crate::chain;
use crate::entry;
use crate::malloc;
use crate::real;
use crate::real::{
    next_mallinfo2, Mallinfo, Mallinfo2, TrimFn, NEXT_MALLOC_INFO, NEXT_MALLOC_STATS,
    NEXT_MALLOC_TRIM,
};

// ------------------------------------------------------------------------------ __libc_*
//
// A call made while the thread is inside the next allocator (a wrapper after the library that
// hands its calls on to glibc's names, however it reaches them: see `real.rs`) goes to glibc's
// `__libc_*` at once, never back into the library; so does one whose caller lies in an object
// after the library (the wrapper calling glibc's names on its own account: see `chain.rs`). Any
// other call gets the library's own function. This cannot loop: a call from the library to the
// next allocator is either guarded, so that a `__libc_*` call under it goes to glibc, or goes to
// glibc's own function, which calls no exported name back.

entry::with_site! {
    /// `__libc_malloc`: `malloc`, or glibc's for the next allocator.
    fn __libc_malloc(size: usize) => libc_malloc_at, "rsi"
}

/// True when a `__libc_*` call comes from the next allocator: the thread is inside it, or the
/// caller's return address lies after the library.
#[inline]
fn from_next(site: usize) -> bool {
    resizealloc::region::in_next() || chain::called_from_next(site)
}

extern "C" fn libc_malloc_at(size: usize, site: usize) -> *mut c_void {
    if from_next(site) {
        return real::libc_malloc(size);
    }
    malloc::malloc_at(size, site)
}

entry::with_site! {
    /// `__libc_free`: `free` (arena blocks included), or glibc's for the next allocator's blocks.
    fn __libc_free(p: *mut c_void) => libc_free_at, "rsi"
}

/// Whether `p` came from the library (an arena, the small-block heap, the bootstrap buffer):
/// its `__libc_free` and `__libc_realloc` go to the library whoever calls.
fn ours(p: *mut c_void) -> bool {
    router::owns(p.cast()) || router::owns_small(p.cast()) || real::is_boot(p)
}

extern "C" fn libc_free_at(p: *mut c_void, site: usize) -> *mut c_void {
    if !ours(p) && from_next(site) {
        real::libc_free(p);
    } else {
        malloc::free_any(p);
    }
    core::ptr::null_mut()
}

entry::with_site! {
    /// `__libc_calloc`: `calloc`, or glibc's for the next allocator.
    fn __libc_calloc(n: usize, size: usize) => libc_calloc_at, "rdx"
}

extern "C" fn libc_calloc_at(n: usize, size: usize, site: usize) -> *mut c_void {
    if from_next(site) {
        return real::libc_calloc(n, size);
    }
    malloc::calloc_at(n, size, site)
}

entry::with_site! {
    /// `__libc_realloc`: `realloc`, or glibc's for the next allocator's blocks.
    fn __libc_realloc(p: *mut c_void, size: usize) => libc_realloc_at, "rdx"
}

extern "C" fn libc_realloc_at(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    if !ours(p) && from_next(site) {
        return real::libc_realloc(p, size);
    }
    crate::realloc::realloc_at(p, size, site)
}

entry::with_site! {
    /// `__libc_memalign`: `memalign`, or glibc's for the next allocator.
    fn __libc_memalign(align: usize, size: usize) => libc_memalign_at, "rdx"
}

extern "C" fn libc_memalign_at(align: usize, size: usize, site: usize) -> *mut c_void {
    if from_next(site) {
        return real::libc_memalign(align, size);
    }
    malloc::memalign_any(align, size)
}

entry::with_site! {
    /// `__libc_valloc`: `valloc`, or glibc's page-aligned block for the next allocator.
    fn __libc_valloc(size: usize) => libc_valloc_at, "rsi"
}

extern "C" fn libc_valloc_at(size: usize, site: usize) -> *mut c_void {
    if from_next(site) {
        return real::libc_memalign(PAGE, size);
    }
    malloc::valloc_any(size)
}

entry::with_site! {
    /// `__libc_pvalloc`: `pvalloc`, or glibc's whole pages for the next allocator.
    fn __libc_pvalloc(size: usize) => libc_pvalloc_at, "rsi"
}

extern "C" fn libc_pvalloc_at(size: usize, site: usize) -> *mut c_void {
    if from_next(site) {
        return match size.max(1).checked_add(PAGE - 1) {
            Some(rounded) => real::libc_memalign(PAGE, rounded & !(PAGE - 1)),
            None => core::ptr::null_mut(),
        };
    }
    malloc::pvalloc_any(size)
}

// ------------------------------------------------------------------------------ mallinfo

/// `mallinfo2(3)`: the next allocator's figures plus the library's, added to glibc's fields of
/// the same meaning, never in place of them. The live bytes of the arenas' blocks (whatever
/// path served them; the calling thread's arena counts its fast paths' blocks first, see
/// `resizealloc::stats`) and of the small-block heap's handed-out blocks count in `uordblks`,
/// the field tools and glibc's tests read as "bytes in use"; what the arenas hold resident
/// beyond their live blocks is free memory kept for reuse, as glibc's free chunks are, and
/// counts in `fordblks`. `arena` (the heap's total, `uordblks + fordblks`) grows by both.
/// `hblks` and `hblkhd` stay the next allocator's mmapped chunks.
#[no_mangle]
pub extern "C" fn mallinfo2() -> Mallinfo2 {
    let mut m = next_mallinfo2();
    let s = resizealloc::stats();
    let live =
        (s.memory.process_live as usize).saturating_add(resizealloc::slab::live_bytes() as usize);
    let held_free =
        (s.memory.process_resident as usize).saturating_sub(s.memory.process_live as usize);
    m.uordblks = m.uordblks.wrapping_add(live);
    m.fordblks = m.fordblks.wrapping_add(held_free);
    m.arena = m.arena.wrapping_add(live).wrapping_add(held_free);
    m
}

/// `mallinfo(3)`: [`mallinfo2`] with each field cut to `int`, as glibc does.
#[no_mangle]
pub extern "C" fn mallinfo() -> Mallinfo {
    let m = mallinfo2();
    Mallinfo {
        arena: m.arena as c_int,
        ordblks: m.ordblks as c_int,
        smblks: m.smblks as c_int,
        hblks: m.hblks as c_int,
        hblkhd: m.hblkhd as c_int,
        usmblks: m.usmblks as c_int,
        fsmblks: m.fsmblks as c_int,
        uordblks: m.uordblks as c_int,
        fordblks: m.fordblks as c_int,
        keepcost: m.keepcost as c_int,
    }
}

// ------------------------------------------------------------------------------ malloc_trim

/// `malloc_trim(3)`: gives back what the calling thread's arena does not need (the core trims
/// one thread's arena at a time; `pad` does not apply to it), then calls the next allocator's
/// `malloc_trim(pad)`. Returns 1 when either released memory, else 0.
#[no_mangle]
pub extern "C" fn malloc_trim(pad: usize) -> c_int {
    let before = resizealloc::stats().memory.thread_resident;
    resizealloc::trim();
    let ours = resizealloc::stats().memory.thread_resident < before;
    let theirs = match NEXT_MALLOC_TRIM.get() {
        // SAFETY: the next object's `malloc_trim`, which has this signature.
        Some(f) => (unsafe { core::mem::transmute::<*mut c_void, TrimFn>(f)(pad) }) != 0,
        None => false,
    };
    c_int::from(ours || theirs)
}

// ------------------------------------------------------------------------------ reports

/// Text formatted into a fixed buffer on the stack; what does not fit is cut.
struct StackText {
    buf: [u8; 512],
    len: usize,
}

impl StackText {
    fn new() -> Self {
        StackText {
            buf: [0; 512],
            len: 0,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Write for StackText {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() {
            Err(core::fmt::Error)
        } else {
            Ok(())
        }
    }
}

extern "C" {
    /// glibc's `stderr` stream.
    static mut stderr: *mut libc::FILE;
}

/// Writes `bytes` to `fp`.
///
/// # Safety
/// `fp` is an open stream.
unsafe fn put(fp: *mut libc::FILE, bytes: &[u8]) {
    if !bytes.is_empty() {
        // SAFETY: `bytes` is readable for its length; `fp` is open (the caller's obligation).
        unsafe { libc::fwrite(bytes.as_ptr().cast(), 1, bytes.len(), fp) };
    }
}

type StatsFn = unsafe extern "C" fn();

/// `malloc_stats(3)`: the next allocator's report on stderr, then the arenas' and the
/// small-block heap's, in the same layout.
#[no_mangle]
pub extern "C" fn malloc_stats() {
    if let Some(f) = NEXT_MALLOC_STATS.get() {
        // SAFETY: the next object's `malloc_stats`, which has this signature.
        unsafe { core::mem::transmute::<*mut c_void, StatsFn>(f)() };
    }
    let s = resizealloc::stats();
    let (p, small) = (s.process, s.small);
    let mut t = StackText::new();
    let _ = write!(
        t,
        "resizealloc arenas:\n\
         live arenas      = {:>10}\n\
         orphaned arenas  = {:>10}\n\
         committed bytes  = {:>10}\n\
         resident bytes   = {:>10}\n\
         live bytes       = {:>10}\n\
         capacity bytes   = {:>10}\n\
         last peaks bytes = {:>10}\n\
         region allocs    = {:>10}\n\
         resizealloc small-block heap:\n\
         pages in use     = {:>10}\n\
         bytes in pages   = {:>10}\n\
         pages given back = {:>10}\n\
         pages adopted    = {:>10}\n",
        p.arenas_live,
        p.arenas_orphaned,
        p.arena_committed,
        s.memory.process_resident,
        s.memory.process_live,
        p.arena_capacity,
        p.high_water,
        p.region_allocs,
        small.pages_in_use,
        small.bytes_in_pages,
        small.pages_given_back,
        small.pages_adopted
    );
    // SAFETY: glibc's stderr stream is open for the life of the program (glibc's own
    // malloc_stats writes to it too); reading the pointer races with nothing but `freopen`.
    unsafe { put(stderr, t.bytes()) };
}

type InfoFn = unsafe extern "C" fn(c_int, *mut libc::FILE) -> c_int;

/// The arenas as one XML element for `malloc_info`.
fn arenas_element() -> StackText {
    let s = resizealloc::stats();
    let (p, small) = (s.process, s.small);
    let mut t = StackText::new();
    let _ = writeln!(
        t,
        "<resizealloc version=\"{}\" arenas_live=\"{}\" arenas_orphaned=\"{}\" \
         committed=\"{}\" resident=\"{}\" live=\"{}\" capacity=\"{}\" high_water=\"{}\" \
         region_allocs=\"{}\" \
         reserved=\"{}\" small_pages=\"{}\" small_bytes=\"{}\"/>",
        env!("CARGO_PKG_VERSION"),
        p.arenas_live,
        p.arenas_orphaned,
        p.arena_committed,
        s.memory.process_resident,
        s.memory.process_live,
        p.arena_capacity,
        p.high_water,
        p.region_allocs,
        p.reserved_bytes,
        small.pages_in_use,
        small.bytes_in_pages
    );
    t
}

/// The last occurrence of `needle` in `hay`.
fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    (0..=hay.len().checked_sub(needle.len())?)
        .rev()
        .find(|&i| &hay[i..i + needle.len()] == needle)
}

/// `malloc_info(3)`: the next allocator's XML document with one more element,
/// `<resizealloc …/>`, as the last child of its `<malloc>` root, so the output stays one
/// well-formed document. The next allocator writes into a memory stream first (which allocates
/// through `malloc`, from the program's call, not from inside the allocator); when that stream
/// cannot be had, or the document has no `</malloc>` end tag, its output is passed on unchanged.
/// `options` other than 0 get `EINVAL`, as from glibc.
///
/// # Safety
/// As `malloc_info(3)`: `fp` is an open stream.
#[no_mangle]
pub unsafe extern "C" fn malloc_info(options: c_int, fp: *mut libc::FILE) -> c_int {
    let next = NEXT_MALLOC_INFO
        .get()
        // SAFETY: the next object's `malloc_info`, which has this signature.
        .map(|f| unsafe { core::mem::transmute::<*mut c_void, InfoFn>(f) });
    if options != 0 {
        // SAFETY: forwarded arguments.
        return next.map_or(libc::EINVAL, |f| unsafe { f(options, fp) });
    }
    let Some(next) = next else {
        // SAFETY: `fp` is open (the caller's obligation).
        unsafe {
            put(fp, b"<malloc version=\"1\">\n");
            put(fp, arenas_element().bytes());
            put(fp, b"</malloc>\n");
        }
        return 0;
    };
    let mut buf: *mut c_char = core::ptr::null_mut();
    let mut len: usize = 0;
    // SAFETY: valid out pointers, which the stream updates until it is closed.
    let ms = unsafe { libc::open_memstream(&mut buf, &mut len) };
    if ms.is_null() {
        // SAFETY: forwarded arguments.
        return unsafe { next(0, fp) };
    }
    // SAFETY: `ms` is an open stream; after `fclose`, `buf` holds `len` bytes (plus a NUL)
    // allocated with `malloc`, which we free.
    unsafe {
        let r = next(0, ms);
        libc::fclose(ms);
        if r == 0 && !buf.is_null() {
            let doc = core::slice::from_raw_parts(buf as *const u8, len);
            match rfind(doc, b"</malloc>") {
                Some(end) => {
                    put(fp, &doc[..end]);
                    put(fp, arenas_element().bytes());
                    put(fp, &doc[end..]);
                }
                None => put(fp, doc),
            }
        }
        entry::free(buf.cast());
        r
    }
}
