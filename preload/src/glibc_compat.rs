//! glibc's extensions of the malloc family, so that programs and tools that use them see the
//! arenas too.
//!
//! * `__libc_malloc`, `__libc_free`, `__libc_calloc`, `__libc_realloc`, `__libc_memalign`,
//!   `__libc_valloc`, `__libc_pvalloc`: glibc's own names for the family. They are the exported
//!   functions of `malloc.rs` under another name, so a block from one name can be freed by any
//!   other (without them, `__libc_free` of an arena block reached glibc and aborted). mimalloc
//!   and tcmalloc export these names too.
//! * `mallinfo2`, `mallinfo`: the next allocator's figures plus the arenas' committed memory,
//!   counted like glibc counts its mmapped chunks (see [`mallinfo2`]).
//! * `malloc_trim`: trims the calling thread's arena, then the next allocator.
//! * `malloc_stats`, `malloc_info`: the next allocator's report, then the arenas'.
//!
//! `mallopt` is not exported: glibc's answers, and none of its parameters applies to the arenas.
//! The next allocator's functions are looked up with `dlsym(RTLD_NEXT, …)` on first use, from
//! the program's own call (never from inside an allocation); one that does not exist is
//! answered as if it reported nothing. Nothing here panics; the text is formatted on the stack.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::fmt::Write;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::malloc;
use crate::real;

// ------------------------------------------------------------------------------ __libc_*

malloc::with_site! {
    /// `__libc_malloc`: `malloc`.
    fn __libc_malloc(size: usize) => malloc::malloc_at, "rsi"
}

/// `__libc_free`: `free` (arena blocks included).
#[no_mangle]
pub extern "C" fn __libc_free(p: *mut c_void) {
    malloc::free(p)
}

malloc::with_site! {
    /// `__libc_calloc`: `calloc`.
    fn __libc_calloc(n: usize, size: usize) => malloc::calloc_at, "rdx"
}

malloc::with_site! {
    /// `__libc_realloc`: `realloc`.
    fn __libc_realloc(p: *mut c_void, size: usize) => malloc::realloc_at, "rdx"
}

/// `__libc_memalign`: `memalign`.
#[no_mangle]
pub extern "C" fn __libc_memalign(align: usize, size: usize) -> *mut c_void {
    malloc::memalign(align, size)
}

/// `__libc_valloc`: `valloc`.
#[no_mangle]
pub extern "C" fn __libc_valloc(size: usize) -> *mut c_void {
    malloc::valloc(size)
}

/// `__libc_pvalloc`: `pvalloc`.
#[no_mangle]
pub extern "C" fn __libc_pvalloc(size: usize) -> *mut c_void {
    malloc::pvalloc(size)
}

// ------------------------------------------------------------------------------ the next one

/// A function of the next allocator, looked up by name on first use.
struct NextFn {
    name: &'static CStr,
    /// 0: not looked up yet; `ABSENT`: the next objects do not define it; else its address.
    addr: AtomicUsize,
}

const ABSENT: usize = 1;

impl NextFn {
    const fn new(name: &'static CStr) -> Self {
        NextFn {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The function's address, or `None` when the next objects do not define it. Two threads
    /// may both look it up the first time; they store the same answer.
    fn get(&self) -> Option<*mut c_void> {
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

static NEXT_MALLINFO2: NextFn = NextFn::new(c"mallinfo2");
static NEXT_MALLINFO: NextFn = NextFn::new(c"mallinfo");
static NEXT_MALLOC_TRIM: NextFn = NextFn::new(c"malloc_trim");
static NEXT_MALLOC_STATS: NextFn = NextFn::new(c"malloc_stats");
static NEXT_MALLOC_INFO: NextFn = NextFn::new(c"malloc_info");

/// Looks up, from the library's constructor, the next allocator's functions that process mode
/// may call from inside `free` (`sample_next_free`), so that no `dlsym` ever runs there.
pub fn resolve_early() {
    let _ = (
        NEXT_MALLINFO2.get(),
        NEXT_MALLINFO.get(),
        NEXT_MALLOC_TRIM.get(),
    );
}

// ------------------------------------------------------------------------------ mallinfo

/// glibc's `struct mallinfo2` (2.33 and later).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Mallinfo2 {
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
pub struct Mallinfo {
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

type Mallinfo2Fn = unsafe extern "C" fn() -> Mallinfo2;
type MallinfoFn = unsafe extern "C" fn() -> Mallinfo;

/// The next allocator's figures: its `mallinfo2`, else its `mallinfo` widened (glibc's `int`
/// fields are truncated sizes, so they are read as unsigned), else zeros.
fn next_mallinfo2() -> Mallinfo2 {
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

/// `mallinfo2(3)`: the next allocator's figures plus the arenas'. Every arena (live, or kept by
/// an exited thread's live blocks) counts as one mmapped region in `hblks`, and its resident
/// bytes (what it holds from the system; `resize_stats_get` also gives its live bytes) count in
/// `hblkhd`, the way glibc counts a chunk it served with `mmap`: memory taken from the system
/// and, as far as `mallinfo` can tell, in use (so `uordblks + hblkhd`, the usual "bytes in use",
/// includes them); `arena`, `uordblks` and `fordblks` stay the next allocator's own heap.
/// Process mode's small-block heap counts the same way: one region while it holds pages, and
/// its pages' bytes (an upper bound: a page is touched only where blocks were carved).
#[no_mangle]
pub extern "C" fn mallinfo2() -> Mallinfo2 {
    let mut m = next_mallinfo2();
    let s = resizealloc::stats();
    let p = s.process;
    let small_regions = usize::from(s.small.pages_in_use > 0);
    m.hblks = m
        .hblks
        .wrapping_add((p.arenas_live + p.arenas_orphaned) as usize)
        .wrapping_add(small_regions);
    m.hblkhd = m
        .hblkhd
        .wrapping_add(s.memory.process_resident as usize)
        .wrapping_add(s.small.bytes_in_pages as usize);
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

type TrimFn = unsafe extern "C" fn(usize) -> c_int;

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

// ------------------------------------------------------------------------------ process mode

/// Free bytes the next allocator may keep before process mode asks it to trim.
const NEXT_FREE_LIMIT: usize = 32 << 20;
/// Estimated bytes freed to the next allocator so far (sampled, process mode).
static NEXT_FREED: AtomicU64 = AtomicU64::new(0);
/// `NEXT_FREED` and the bytes process mode had sent to the next allocator at the last look.
static LOOKED_FREED: AtomicU64 = AtomicU64::new(0);
static LOOKED_SENT: AtomicU64 = AtomicU64::new(0);

/// Process mode sends long-lived blocks to the next allocator, so a phase of long-lived data is
/// freed into glibc's heap, which returns memory only from its top: a few small blocks above
/// a freed 500 MB phase keep all of it resident.
///
/// One free to the next allocator in 16 (`router::note_next_free`) is measured here
/// (`malloc_usable_size`), and threads add up their estimates in 4 MiB batches. When 32 MiB more
/// have been freed to it than process mode sent it since the last time allocation caught up
/// with the frees, the heap may hold a freed phase: then, and only then, a give-back is asked
/// for ([`give_back`], run when allocation resumes). Steady churn frees what it allocates and
/// never gets there.
#[cold]
#[inline(never)]
pub fn sample_next_free(p: *mut c_void) {
    if real::is_boot(p) {
        return;
    }
    let bytes = real::usable_size(p) as u64 * resizealloc::region::NEXT_FREE_SAMPLE as u64;
    let Some(batch) = resizealloc::region::add_next_freed(bytes) else {
        return;
    };
    let freed = NEXT_FREED.fetch_add(batch, Ordering::Relaxed) + batch;
    // No `stats()` here (it takes the slot-table lock, which a free between fork's prepare and
    // child handlers would wait on forever): the arenas publish what they send lock-free.
    let sent = resizealloc::arena::bytes_sent_to_next();
    let freed_since = freed.saturating_sub(LOOKED_FREED.load(Ordering::Relaxed));
    let sent_since = sent.saturating_sub(LOOKED_SENT.load(Ordering::Relaxed));
    if freed_since <= sent_since || freed_since - sent_since >= NEXT_FREE_LIMIT as u64 {
        // Allocation caught up with the frees (steady churn: start counting again), or 32 MiB
        // net have been freed since it last did (a phase is ending: look).
        LOOKED_FREED.store(freed, Ordering::Relaxed);
        LOOKED_SENT.store(sent, Ordering::Relaxed);
    }
    if freed_since < sent_since + NEXT_FREE_LIMIT as u64 {
        return;
    }
    // The heap may hold a freed phase. Look and give back at the next allocation instead
    // (`run_pending_give_back`): by then the burst of frees is over and glibc has coalesced
    // its free chunks, so that one `malloc_trim` gives them back in a few `madvise` calls.
    // Trimmed while the frees go on, every look re-walked and every trim re-`madvise`d
    // thousands of fragments (7,484 `madvise` calls for a 250 MB phase freed in random order,
    // 14% of its time). Frees that go on for `RESIZEALLOC_GIVE_BACK_AFTER` more bytes (1 GiB)
    // with no allocation in between give back from here. (At 256 MiB, a 500 MB phase freed in
    // random order gave back halfway through its frees: the trim `madvise`d thousands of
    // fragments, glibc's coalescing then faulted some of them in again, and the phase took
    // 1.13-1.17x glibc's time, against 1.00x when the give-back waited for the next allocation.)
    let asked = GIVE_BACK_ASKED_AT.load(Ordering::Relaxed);
    if asked == 0 {
        GIVE_BACK_ASKED_AT.store(freed, Ordering::Relaxed);
    } else if freed.saturating_sub(asked) >= resizealloc::options::give_back_after() as u64 {
        give_back();
    }
}

/// `NEXT_FREED` when process mode asked for a give-back that has not run yet; 0: none pending.
/// (`NEXT_FREED` is at least 32 MiB by then, never 0.)
static GIVE_BACK_ASKED_AT: AtomicU64 = AtomicU64::new(0);

/// Runs the give-back process mode asked for, if one is pending: called where allocation
/// resumes (the predicted path's general case, which samples and probes reach from every site
/// of a size the arena may serve, and every small request). One relaxed load when none is.
#[inline(always)]
pub fn run_pending_give_back() {
    if give_back_pending() {
        give_back();
    }
}

/// Whether a give-back is pending (one relaxed load).
#[inline(always)]
pub fn give_back_pending() -> bool {
    GIVE_BACK_ASKED_AT.load(Ordering::Relaxed) != 0
}

/// Reads the next allocator's figures (`mallinfo2` walks its free chunks) and, when it holds
/// more than 32 MiB free and more than a quarter of what it has in use (the memory bound's
/// margin: glibc holding that much free is what the heap keeps it from reusing), asks it to
/// give free pages back (`malloc_trim(0)`, which `madvise`s the free chunks inside the heap
/// too).
#[cold]
#[inline(never)]
fn give_back() {
    if GIVE_BACK_ASKED_AT.swap(0, Ordering::AcqRel) == 0 {
        return; // another thread took it
    }
    let m = next_mallinfo2();
    if m.fordblks > NEXT_FREE_LIMIT && m.fordblks > m.uordblks / 4 {
        if let Some(f) = NEXT_MALLOC_TRIM.get() {
            // SAFETY: the next object's `malloc_trim`, which has this signature.
            unsafe { core::mem::transmute::<*mut c_void, TrimFn>(f)(0) };
        }
    }
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
         committed=\"{}\" capacity=\"{}\" high_water=\"{}\" region_allocs=\"{}\" \
         reserved=\"{}\" small_pages=\"{}\" small_bytes=\"{}\"/>",
        env!("CARGO_PKG_VERSION"),
        p.arenas_live,
        p.arenas_orphaned,
        p.arena_committed,
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
        malloc::free(buf.cast());
        r
    }
}
