//! The only place that talks to the kernel about memory.
//!
//! Every arena byte comes from here: a `PROT_NONE` reservation that costs no commit charge, made
//! readable and writable piece by piece (`commit`), handed back to the kernel when a region
//! shrinks (`discard`, `decommit`). Nothing here allocates, and nothing panics: failures come back
//! as `false`/`None` so the caller can fall back to the next allocator.

use core::ptr;

/// Page size assumed for alignment of every call below. x86-64 and aarch64 Linux with 4 KiB
/// pages; larger pages still work because every address we pass is granule aligned (16 KiB).
pub const PAGE: usize = 4096;

/// Reserves `len` bytes of address space with no access and no commit charge.
/// Returns `None` if the kernel refuses (address-space limits, `RLIMIT_AS`).
pub fn reserve(len: usize) -> Option<usize> {
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: an anonymous private mapping at a kernel-chosen address touches no existing memory.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    if p == libc::MAP_FAILED {
        None
    } else {
        Some(p as usize)
    }
}

/// Reserves `[addr, addr + len)` exactly (no access, no commit charge), where nothing is
/// mapped: how a reservation grows in place. False when any of it is taken, or the kernel
/// refuses (`RLIMIT_AS`). A kernel older than `MAP_FIXED_NOREPLACE` (Linux 4.17) takes the
/// address as a hint and may map elsewhere: that mapping is given back, and the answer is false.
pub fn reserve_at(addr: usize, len: usize) -> bool {
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping: it fails instead.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_NORESERVE
                | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    if p == libc::MAP_FAILED {
        return false;
    }
    if p as usize != addr {
        // SAFETY: the mapping just made elsewhere, holding nothing.
        unsafe { release(p as usize, len) };
        return false;
    }
    true
}

/// Reserves `len` bytes of address space starting at a multiple of `align` (a power of two),
/// with no access and no commit charge: maps `len + align` and gives back the unaligned head
/// and tail. Returns `None` if the kernel refuses.
pub fn reserve_aligned(len: usize, align: usize) -> Option<usize> {
    let raw = reserve(len.checked_add(align)?)?;
    let base = (raw + align - 1) & !(align - 1);
    // SAFETY: both pieces are parts of the mapping just made and hold nothing.
    unsafe {
        if base > raw {
            release(raw, base - raw);
        }
        let tail = raw + len + align - (base + len);
        if tail > 0 {
            release(base + len, tail);
        }
    }
    Some(base)
}

/// Unmaps `[addr, addr + len)`.
///
/// # Safety
/// 1. The range lies inside a mapping made by [`reserve`].
/// 2. Nothing in the range is referenced any more.
pub unsafe fn release(addr: usize, len: usize) {
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: guaranteed by the caller (obligations 1 and 2).
    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
}

/// Makes `[addr, addr + len)` readable and writable. Pages are zero until first written.
/// Returns `false` when the kernel refuses the commit charge (strict overcommit, `ENOMEM`).
///
/// # Safety
/// The range is page aligned and lies inside a mapping made by [`reserve`].
pub unsafe fn commit(addr: usize, len: usize) -> bool {
    debug_assert!(
        addr.is_multiple_of(PAGE) && len.is_multiple_of(PAGE),
        "commit of unaligned range {addr:#x}+{len:#x}"
    );
    // A refusal is not the program's error: the request then goes to the next allocator, which
    // sets errno itself if it fails too. Keep the program's errno as it was.
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: the caller guarantees the range is ours; changing protection of our own
    // reservation cannot affect any other mapping.
    let ok = unsafe {
        libc::mprotect(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
        ) == 0
    };
    if !ok {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = saved };
    }
    ok
}

/// Gives the physical pages of `[addr, addr + len)` back to the kernel but keeps the range
/// readable and writable (it then reads as zero). Returns `false` when the kernel refused
/// (locked memory: `mlock`, `mlockall`): the old contents are still there, and the caller must
/// not treat the range as zero. The program's `errno` is left alone either way.
///
/// # Safety
/// 1. The range is page aligned and lies inside a mapping made by [`reserve`].
/// 2. No live allocation lies in the range.
#[must_use]
pub unsafe fn discard(addr: usize, len: usize) -> bool {
    debug_assert!(
        addr.is_multiple_of(PAGE) && len.is_multiple_of(PAGE),
        "discard of unaligned range {addr:#x}+{len:#x}"
    );
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: caller's obligations; MADV_DONTNEED on private anonymous memory only drops contents.
    let ok = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) } == 0;
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    ok
}

/// About how much of `[addr, addr + len)` is resident, in sixteenths: `mincore` over four
/// windows of up to 64 pages spread across the range (four system calls, whatever its size).
/// A heuristic for choosing between writing memory and giving it back; `None` when the kernel
/// refused. The program's `errno` is left alone.
///
/// # Safety
/// The range is page aligned and lies inside a mapping made by [`reserve`].
pub unsafe fn resident_sixteenths(addr: usize, len: usize) -> Option<usize> {
    const WINDOW: usize = 64;
    let pages = len / PAGE;
    if pages == 0 {
        return Some(0);
    }
    let per = pages.min(WINDOW);
    let mut status = [0u8; WINDOW];
    let (mut seen, mut resident) = (0, 0);
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    let mut ok = true;
    for k in 0..4 {
        let first = (pages - per) * k / 3;
        // SAFETY: `per` pages from page `first` lie in the range (caller's obligation);
        // `status` holds one byte per page. mincore reads page tables only.
        if unsafe {
            libc::mincore(
                (addr + first * PAGE) as *mut libc::c_void,
                per * PAGE,
                status.as_mut_ptr(),
            )
        } != 0
        {
            ok = false;
            break;
        }
        resident += status[..per].iter().filter(|&&b| b & 1 != 0).count();
        seen += per;
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    ok.then(|| resident * 16 / seen)
}

/// Returns `[addr, addr + len)` to the reserved, inaccessible state: no pages, no commit charge.
/// Returns `false`, and leaves the range as it was, when the pages cannot be discarded (see
/// [`discard`]): a range that keeps old contents must not come back as "fresh".
///
/// # Safety
/// Same as [`discard`].
#[must_use]
pub unsafe fn decommit(addr: usize, len: usize) -> bool {
    // SAFETY: caller's obligations, forwarded.
    if !unsafe { discard(addr, len) } {
        return false;
    }
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: caller's obligations; the range holds nothing any more.
    unsafe { libc::mprotect(addr as *mut libc::c_void, len, libc::PROT_NONE) };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    true
}

/// Marks `[addr, addr + len)` as eligible for transparent huge pages (`MADV_HUGEPAGE`).
/// Failure (no THP support) is harmless and ignored.
///
/// # Safety
/// The range is page aligned and lies inside a mapping made by [`reserve`].
pub unsafe fn advise_huge_pages(addr: usize, len: usize) {
    // SAFETY: caller's obligation; the advice never changes contents.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

/// Milliseconds on a monotonic clock (`CLOCK_MONOTONIC_COARSE`: a vDSO read, no system call,
/// a few milliseconds' resolution). 0 if the clock cannot be read.
pub fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; the call allocates nothing.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Writes `msg` to stderr without allocating. Used for warnings and fatal errors.
pub fn write_stderr(msg: &[u8]) {
    let mut rest = msg;
    while !rest.is_empty() {
        // SAFETY: the pointer and length describe a live byte slice.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// Reports a fatal heap error the way glibc does (message on stderr, then `abort`).
#[cold]
#[inline(never)]
pub fn fatal(msg: &[u8]) -> ! {
    write_stderr(msg);
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// A line of text built on the stack, for messages written without allocating (fatal
/// errors, the preload library's reports). Text past its capacity is dropped.
pub struct Line {
    buf: [u8; 512],
    len: usize,
}

impl Line {
    pub const fn new() -> Self {
        Line {
            buf: [0; 512],
            len: 0,
        }
    }

    pub fn text(&mut self, s: &str) -> &mut Self {
        self.raw(s.as_bytes())
    }

    fn raw(&mut self, s: &[u8]) -> &mut Self {
        for &b in s {
            if self.len < self.buf.len() {
                self.buf[self.len] = b;
                self.len += 1;
            }
        }
        self
    }

    pub fn num(&mut self, mut n: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.raw(&digits[i..])
    }

    pub fn hex(&mut self, v: usize) -> &mut Self {
        let mut digits = [0u8; 18];
        digits[0] = b'0';
        digits[1] = b'x';
        let n = ((usize::BITS - v.leading_zeros()).div_ceil(4)).max(1) as usize;
        for i in 0..n {
            let d = (v >> (4 * (n - 1 - i))) & 0xf;
            digits[2 + i] = b"0123456789abcdef"[d];
        }
        self.raw(&digits[..2 + n])
    }

    /// A byte count with a binary unit (B, KiB, MiB, GiB), one decimal.
    pub fn bytes(&mut self, n: u64) -> &mut Self {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut u = 0;
        let mut tenths = n * 10;
        while tenths >= 10 * 1024 && u + 1 < units.len() {
            tenths /= 1024;
            u += 1;
        }
        self.num(tenths / 10);
        if u > 0 {
            self.text(".").num(tenths % 10);
        }
        self.text(" ").text(units[u])
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Writes the line and a newline to stderr, and empties it.
    pub fn print(&mut self) {
        self.text("\n");
        write_stderr(self.as_bytes());
        self.len = 0;
    }
}

impl Default for Line {
    fn default() -> Self {
        Self::new()
    }
}

/// The most address space the arenas may reserve under `RLIMIT_AS`: an eighth of the limit, so
/// the program keeps the rest (a `malloc` outside regions never fails because of us). `None`
/// when there is no limit.
pub fn address_space_budget() -> Option<usize> {
    address_space_budget_under(None)
}

/// [`address_space_budget`] under a soft limit of `limit` bytes (one about to be set), or with
/// `None` under the limit in force.
pub fn address_space_budget_under(limit: Option<u64>) -> Option<usize> {
    let limit = limit.or_else(address_space_limit)?;
    (limit != libc::RLIM_INFINITY).then_some((limit / 8) as usize)
}

/// The soft `RLIMIT_AS` (`RLIM_INFINITY` when there is none), or `None` if it cannot be read.
fn address_space_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: errno's location is always valid for the calling thread.
    let saved = unsafe { *libc::__errno_location() };
    // SAFETY: `lim` is a valid out pointer.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0;
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved };
    ok.then_some(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::Line;

    #[test]
    fn a_line_writes_hex_and_decimal_and_stops_at_its_capacity() {
        let mut l = Line::new();
        l.text("block ").hex(0x7f12_3450).text(" of ").num(48);
        assert_eq!(l.as_bytes(), b"block 0x7f123450 of 48");
        let mut z = Line::new();
        z.hex(0).text(" ").num(0).text(" ").num(u64::MAX);
        assert_eq!(z.as_bytes(), b"0x0 0 18446744073709551615");
        let mut b = Line::new();
        b.bytes(100).text(" ").bytes(3 << 19);
        assert_eq!(b.as_bytes(), b"100 B 1.5 MiB");
        let mut long = Line::new();
        for _ in 0..200 {
            long.text("abc");
        }
        assert_eq!(long.as_bytes().len(), 512);
    }
}
