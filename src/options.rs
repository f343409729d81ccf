//! `RESIZEALLOC_*` options: one table, parsed once from the environment without allocating.
//!
//! Booleans accept `1/on/yes/true` and `0/off/no/false`; sizes accept a number with an optional
//! `K`, `M`, `G` (or `KiB`, `MiB`, `GiB`) suffix. A value that does not parse gets a one-line
//! warning on stderr and the default. The table in docs/reference.md is written from [`OPTIONS`].
//!
//! The environment is read with `getenv`, which does not allocate and returns null while glibc
//! has not set `environ` up yet. The first allocation reads it lazily; the preload library reads
//! it again from its constructor, when libc is certainly ready.

use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

pub use crate::mode::RegionMode;
use crate::os::write_stderr;

/// One documented option.
pub struct OptionDesc {
    pub name: &'static str,
    pub default: &'static str,
    pub description: &'static str,
}

/// Every option the library reads, in the order of docs/reference.md.
pub const OPTIONS: &[OptionDesc] = &[
    OptionDesc {
        name: "RESIZEALLOC_REGION",
        default: "on",
        description: "`on`: region markers (`resize_region_begin/end`, `resizealloc::region`) decide. \
                      `process`: every thread runs inside one region from its start; the arena recycles \
                      freed granules as it goes. `off`: markers are ignored and everything passes through (A/B switch).",
    },
    OptionDesc {
        name: "RESIZEALLOC_MIN_SIZE",
        default: "0",
        description: "Smallest request (bytes, K/M/G suffix) that goes to the arena; smaller ones go to the next allocator.",
    },
    OptionDesc {
        name: "RESIZEALLOC_MAX_SIZE",
        default: "unlimited",
        description: "Largest request that goes to the arena; larger ones go to the next allocator.",
    },
    OptionDesc {
        name: "RESIZEALLOC_INITIAL_ARENA",
        default: "64K",
        description: "Capacity of a thread's arena before its first region end (it then resizes to the peak).",
    },
    OptionDesc {
        name: "RESIZEALLOC_MAX_ARENA",
        default: "1G",
        description: "Largest a thread's arena can grow (rounded up to a power of two, 4M..64G); past it, region allocations spill to the next allocator.",
    },
    OptionDesc {
        name: "RESIZEALLOC_RESERVE",
        default: "256G",
        description: "Address space reserved (not committed) for all arenas together; it bounds how many threads hold an arena at once.",
    },
    OptionDesc {
        name: "RESIZEALLOC_CUDA",
        default: "on",
        description: "`off`: the CUDA driver hooks pass everything through to the driver (A/B switch for the device pool).",
    },
    OptionDesc {
        name: "RESIZEALLOC_CUDA_MAX_CACHED",
        default: "unlimited",
        description: "Most bytes each device pool keeps cached (held from the driver, not in use) after a synchronisation; above it, empty segments go back to the driver, largest first (the driver pools' release threshold, applied per pool).",
    },
    OptionDesc {
        name: "RESIZEALLOC_CUDA_IDLE_MS",
        default: "5000",
        description: "A device pool that handed nothing out for this many milliseconds gives its cached segments back at the next synchronisation; 0 never.",
    },
    OptionDesc {
        name: "RESIZEALLOC_GIVE_BACK_AFTER",
        default: "1G",
        description: "Process mode: when the program frees a phase to the next allocator, its free memory goes back to the kernel at the next allocation; frees that go on for this many bytes with no allocation in between give it back themselves (a smaller value returns memory sooner and costs the frees time: glibc re-walks its fragments while they are still being freed).",
    },
    OptionDesc {
        name: "RESIZEALLOC_PURGE_DELAY_MS",
        default: "100",
        description: "Process mode: memory the program freed above the arena's bound goes back to the kernel once it has stayed free this long (at the thread's first allocations after that), so that work which frees and allocates it again in a loop does not fault it in each time. 0: at once.",
    },
    OptionDesc {
        name: "RESIZEALLOC_PROFILE",
        default: "0",
        description: "`1`: the region advisor samples allocations outside regions and at exit prints the region candidates on stderr, with folded stacks of short-lived bytes in `resizealloc-profile.<pid>.folded`. A path: the report goes to that file and the folded stacks to `<path>.folded` (a forked child adds `.<pid>`). See docs/advisor.md.",
    },
    OptionDesc {
        name: "RESIZEALLOC_PROFILE_RATE",
        default: "512K",
        description: "The profiler's mean bytes allocated between two samples (every block of 1 MiB or more is sampled too). Smaller: more samples, more overhead. Unset, the rate starts at 512K and is paced: it doubles while the profiler's own work takes more than 1% of the run, and comes back down when it takes much less. Set, it stays as given.",
    },
    OptionDesc {
        name: "RESIZEALLOC_STATS",
        default: "0",
        description: "`1`: print a summary of the arenas on stderr at exit (preload library).",
    },
    OptionDesc {
        name: "RESIZEALLOC_VERBOSE",
        default: "0",
        description: "`1`: print the options in force on stderr at start.",
    },
];

/// The parsed options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub region: RegionMode,
    pub min_size: usize,
    pub max_size: usize,
    pub initial_arena: usize,
    pub max_arena: usize,
    pub reserve: usize,
    pub stats: bool,
    pub verbose: bool,
    /// Serve CUDA device allocations from the device pool (preload library).
    pub cuda: bool,
    /// Most bytes a device pool keeps cached after a synchronisation (`usize::MAX`: no cap).
    pub cuda_max_cached: usize,
    /// Idle time after which a device pool releases its cache (0: never).
    pub cuda_idle_ms: usize,
    /// Process mode: bytes of frees to the next allocator, with no allocation in between, after
    /// which the frees themselves give a freed phase back.
    pub give_back_after: usize,
    /// Process mode: how long freed memory above an arena's bound waits before it goes back
    /// (milliseconds; 0: at once).
    pub purge_delay_ms: usize,
}

impl Options {
    pub const DEFAULT: Options = Options {
        region: RegionMode::Markers,
        min_size: 0,
        max_size: usize::MAX,
        initial_arena: 64 << 10,
        max_arena: 1 << 30,
        reserve: 256 << 30,
        stats: false,
        verbose: false,
        cuda: true,
        cuda_max_cached: usize::MAX,
        cuda_idle_ms: 5000,
        give_back_after: 1 << 30,
        purge_delay_ms: 100,
    };
}

static REGION: AtomicU8 = AtomicU8::new(RegionMode::Markers as u8);
static MIN_SIZE: AtomicUsize = AtomicUsize::new(0);
static MAX_SIZE: AtomicUsize = AtomicUsize::new(usize::MAX);
static INITIAL_ARENA: AtomicUsize = AtomicUsize::new(64 << 10);
static MAX_ARENA: AtomicUsize = AtomicUsize::new(1 << 30);
static RESERVE: AtomicUsize = AtomicUsize::new(256 << 30);
static STATS: AtomicBool = AtomicBool::new(false);
static VERBOSE: AtomicBool = AtomicBool::new(false);
static CUDA: AtomicBool = AtomicBool::new(true);
static CUDA_MAX_CACHED: AtomicUsize = AtomicUsize::new(usize::MAX);
static CUDA_IDLE_MS: AtomicUsize = AtomicUsize::new(5000);
static GIVE_BACK_AFTER: AtomicUsize = AtomicUsize::new(Options::DEFAULT.give_back_after);
static PURGE_DELAY_MS: AtomicUsize = AtomicUsize::new(Options::DEFAULT.purge_delay_ms);

/// The options in force.
pub fn get() -> Options {
    let region = match REGION.load(Ordering::Relaxed) {
        1 => RegionMode::Process,
        2 => RegionMode::Off,
        _ => RegionMode::Markers,
    };
    Options {
        region,
        min_size: MIN_SIZE.load(Ordering::Relaxed),
        max_size: MAX_SIZE.load(Ordering::Relaxed),
        initial_arena: INITIAL_ARENA.load(Ordering::Relaxed),
        max_arena: MAX_ARENA.load(Ordering::Relaxed),
        reserve: RESERVE.load(Ordering::Relaxed),
        stats: STATS.load(Ordering::Relaxed),
        verbose: VERBOSE.load(Ordering::Relaxed),
        cuda: CUDA.load(Ordering::Relaxed),
        cuda_max_cached: CUDA_MAX_CACHED.load(Ordering::Relaxed),
        cuda_idle_ms: CUDA_IDLE_MS.load(Ordering::Relaxed),
        give_back_after: GIVE_BACK_AFTER.load(Ordering::Relaxed),
        purge_delay_ms: PURGE_DELAY_MS.load(Ordering::Relaxed),
    }
}

/// `RESIZEALLOC_GIVE_BACK_AFTER` alone (read by the sampled frees to the next allocator).
#[inline]
pub fn give_back_after() -> usize {
    GIVE_BACK_AFTER.load(Ordering::Relaxed)
}

/// `RESIZEALLOC_PURGE_DELAY_MS` alone (read when an arena defers a give-back).
#[inline]
pub fn purge_delay_ms() -> usize {
    PURGE_DELAY_MS.load(Ordering::Relaxed)
}

/// `RESIZEALLOC_CUDA_IDLE_MS` alone (read at every synchronisation the hooks see).
#[inline]
pub fn cuda_idle_ms() -> usize {
    CUDA_IDLE_MS.load(Ordering::Relaxed)
}

/// Sets the options in force. Arenas made before keep their configuration.
pub fn set(o: Options) {
    REGION.store(o.region as u8, Ordering::Relaxed);
    MIN_SIZE.store(o.min_size, Ordering::Relaxed);
    MAX_SIZE.store(o.max_size.max(o.min_size), Ordering::Relaxed);
    INITIAL_ARENA.store(o.initial_arena, Ordering::Relaxed);
    MAX_ARENA.store(normalize_slot(o.max_arena), Ordering::Relaxed);
    RESERVE.store(o.reserve, Ordering::Relaxed);
    STATS.store(o.stats, Ordering::Relaxed);
    VERBOSE.store(o.verbose, Ordering::Relaxed);
    CUDA.store(o.cuda, Ordering::Relaxed);
    CUDA_MAX_CACHED.store(o.cuda_max_cached, Ordering::Relaxed);
    CUDA_IDLE_MS.store(o.cuda_idle_ms, Ordering::Relaxed);
    GIVE_BACK_AFTER.store(o.give_back_after, Ordering::Relaxed);
    PURGE_DELAY_MS.store(o.purge_delay_ms, Ordering::Relaxed);
    crate::mode::mode_changed(o.region);
}

fn normalize_slot(n: usize) -> usize {
    n.clamp(4 << 20, 64 << 30).next_power_of_two()
}

/// Reads every option from the environment (see the module docs) and puts them in force.
pub fn init_from_env() -> Options {
    let mut o = Options::DEFAULT;
    if let Some(v) = env(c"RESIZEALLOC_REGION") {
        match parse_region(v) {
            Some(m) => o.region = m,
            None => warn(b"RESIZEALLOC_REGION", v, b"on"),
        }
    }
    size_opt(
        c"RESIZEALLOC_MIN_SIZE",
        b"RESIZEALLOC_MIN_SIZE",
        &mut o.min_size,
    );
    if let Some(v) = env(c"RESIZEALLOC_MAX_SIZE") {
        if eq_ignore_case(v, b"unlimited") {
            o.max_size = usize::MAX;
        } else {
            match parse_size(v) {
                Some(n) => o.max_size = n,
                None => warn(b"RESIZEALLOC_MAX_SIZE", v, b"unlimited"),
            }
        }
    }
    size_opt(
        c"RESIZEALLOC_INITIAL_ARENA",
        b"RESIZEALLOC_INITIAL_ARENA",
        &mut o.initial_arena,
    );
    size_opt(
        c"RESIZEALLOC_MAX_ARENA",
        b"RESIZEALLOC_MAX_ARENA",
        &mut o.max_arena,
    );
    size_opt(
        c"RESIZEALLOC_RESERVE",
        b"RESIZEALLOC_RESERVE",
        &mut o.reserve,
    );
    bool_opt(c"RESIZEALLOC_STATS", b"RESIZEALLOC_STATS", &mut o.stats);
    bool_opt(
        c"RESIZEALLOC_VERBOSE",
        b"RESIZEALLOC_VERBOSE",
        &mut o.verbose,
    );
    bool_opt(c"RESIZEALLOC_CUDA", b"RESIZEALLOC_CUDA", &mut o.cuda);
    if let Some(v) = env(c"RESIZEALLOC_CUDA_MAX_CACHED") {
        if eq_ignore_case(v, b"unlimited") {
            o.cuda_max_cached = usize::MAX;
        } else {
            match parse_size(v) {
                Some(n) => o.cuda_max_cached = n,
                None => warn(b"RESIZEALLOC_CUDA_MAX_CACHED", v, b"unlimited"),
            }
        }
    }
    if let Some(v) = env(c"RESIZEALLOC_CUDA_IDLE_MS") {
        match parse_size(v) {
            Some(n) => o.cuda_idle_ms = n,
            None => warn(b"RESIZEALLOC_CUDA_IDLE_MS", v, b"5000"),
        }
    }
    size_opt(
        c"RESIZEALLOC_GIVE_BACK_AFTER",
        b"RESIZEALLOC_GIVE_BACK_AFTER",
        &mut o.give_back_after,
    );
    if let Some(v) = env(c"RESIZEALLOC_PURGE_DELAY_MS") {
        match parse_size(v) {
            Some(n) => o.purge_delay_ms = n,
            None => warn(b"RESIZEALLOC_PURGE_DELAY_MS", v, b"100"),
        }
    }
    set(o);
    let rate = env(c"RESIZEALLOC_PROFILE_RATE").and_then(|v| {
        let r = parse_size(v);
        if r.is_none() {
            warn(b"RESIZEALLOC_PROFILE_RATE", v, b"512K");
        }
        r
    });
    set_profile(env(c"RESIZEALLOC_PROFILE"), rate);
    get()
}

/// `RESIZEALLOC_PROFILE`'s path (empty: stderr), kept without allocating; and the rate.
struct ProfileOutput(core::cell::UnsafeCell<[u8; 4096]>);
// SAFETY: written once, by `set_profile` before the profiler starts (the first sample), read
// after (`profile_output`).
unsafe impl Sync for ProfileOutput {}
static PROFILE_PATH: ProfileOutput = ProfileOutput(core::cell::UnsafeCell::new([0; 4096]));
static PROFILE_PATH_LEN: AtomicUsize = AtomicUsize::new(0);
static PROFILE_RATE: AtomicUsize = AtomicUsize::new(512 << 10);
/// True when `RESIZEALLOC_PROFILE_RATE` set the rate (the profiler then keeps it as given).
static PROFILE_RATE_SET: AtomicBool = AtomicBool::new(false);

/// `RESIZEALLOC_PROFILE` (`1`: report on stderr; a path; `0` or unset: off) and
/// `RESIZEALLOC_PROFILE_RATE`: starts the profiler's routing (`mode::profile_started`) the
/// first time it is asked for.
fn set_profile(value: Option<&[u8]>, rate: Option<usize>) {
    let Some(v) = value else { return };
    let on = parse_bool(v);
    if v.is_empty() || on == Some(false) || crate::mode::PROFILE.load(Ordering::Relaxed) {
        return;
    }
    if let Some(r) = rate {
        PROFILE_RATE.store(r.max(1), Ordering::Relaxed);
        PROFILE_RATE_SET.store(true, Ordering::Relaxed);
    }
    if on.is_none() {
        // A path. SAFETY: the profiler has not started, so nothing reads the buffer yet.
        let buf = unsafe { &mut *PROFILE_PATH.0.get() };
        let n = v.len().min(buf.len());
        buf[..n].copy_from_slice(&v[..n]);
        PROFILE_PATH_LEN.store(n, Ordering::Release);
    }
    crate::mode::profile_started();
}

/// The profiler's report file, or empty for stderr.
pub fn profile_output() -> &'static [u8] {
    let n = PROFILE_PATH_LEN.load(Ordering::Acquire);
    // SAFETY: written once before the profiler started, never after.
    unsafe { &(&*PROFILE_PATH.0.get())[..n] }
}

/// The profiler's mean bytes between samples.
pub fn profile_rate() -> usize {
    PROFILE_RATE.load(Ordering::Relaxed)
}

/// True when the profiler's rate was given (`RESIZEALLOC_PROFILE_RATE`): it stays as given.
/// Otherwise it starts at the default and adapts to keep the profiler's share of the run small.
pub fn profile_rate_given() -> bool {
    PROFILE_RATE_SET.load(Ordering::Relaxed)
}

fn env(name: &core::ffi::CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL terminated; getenv returns null or a NUL-terminated string owned by
    // the environment, which we only read and do not keep past the parse.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null getenv results are NUL-terminated C strings.
    Some(unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
}

fn size_opt(name: &core::ffi::CStr, label: &[u8], slot: &mut usize) {
    if let Some(v) = env(name) {
        match parse_size(v) {
            Some(n) => *slot = n,
            None => warn(label, v, b"the default"),
        }
    }
}

fn bool_opt(name: &core::ffi::CStr, label: &[u8], slot: &mut bool) {
    if let Some(v) = env(name) {
        match parse_bool(v) {
            Some(b) => *slot = b,
            None => warn(label, v, b"the default"),
        }
    }
}

fn warn(name: &[u8], value: &[u8], default: &[u8]) {
    write_stderr(b"resizealloc: warning: ignoring ");
    write_stderr(name);
    write_stderr(b"=");
    write_stderr(&value[..value.len().min(64)]);
    write_stderr(b" (not understood); using ");
    write_stderr(default);
    write_stderr(b"\n");
}

fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// `on`, `off` or `process` (with the usual boolean spellings for on/off).
pub fn parse_region(v: &[u8]) -> Option<RegionMode> {
    if eq_ignore_case(v, b"process") || eq_ignore_case(v, b"all") {
        return Some(RegionMode::Process);
    }
    if eq_ignore_case(v, b"markers") || eq_ignore_case(v, b"regions") {
        return Some(RegionMode::Markers);
    }
    match parse_bool(v)? {
        true => Some(RegionMode::Markers),
        false => Some(RegionMode::Off),
    }
}

/// `1/on/yes/true` or `0/off/no/false`, any case.
pub fn parse_bool(v: &[u8]) -> Option<bool> {
    for t in [&b"1"[..], b"on", b"yes", b"true"] {
        if eq_ignore_case(v, t) {
            return Some(true);
        }
    }
    for f in [&b"0"[..], b"off", b"no", b"false"] {
        if eq_ignore_case(v, f) {
            return Some(false);
        }
    }
    None
}

/// A byte count: digits, then optionally `K`, `M`, `G`, `T` (binary), with optional `iB`/`B`.
pub fn parse_size(v: &[u8]) -> Option<usize> {
    let digits = v.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 20 {
        return None;
    }
    let mut n: usize = 0;
    for &c in &v[..digits] {
        n = n.checked_mul(10)?.checked_add((c - b'0') as usize)?;
    }
    let suffix = &v[digits..];
    let shift = match suffix.first().map(|c| c.to_ascii_uppercase()) {
        None => return Some(n),
        Some(b'K') => 10,
        Some(b'M') => 20,
        Some(b'G') => 30,
        Some(b'T') => 40,
        Some(b'B') if suffix.len() == 1 => return Some(n),
        _ => return None,
    };
    let rest = &suffix[1..];
    if !(rest.is_empty() || eq_ignore_case(rest, b"B") || eq_ignore_case(rest, b"iB")) {
        return None;
    }
    n.checked_mul(1usize << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes_and_reject_garbage() {
        assert_eq!(parse_size(b"4096"), Some(4096));
        assert_eq!(parse_size(b"64K"), Some(64 << 10));
        assert_eq!(parse_size(b"2MiB"), Some(2 << 20));
        assert_eq!(parse_size(b"1g"), Some(1 << 30));
        assert_eq!(parse_size(b"12B"), Some(12));
        assert_eq!(parse_size(b""), None);
        assert_eq!(parse_size(b"abc"), None);
        assert_eq!(parse_size(b"12Q"), None);
        assert_eq!(parse_size(b"99999999999999999999999"), None);
        assert_eq!(parse_size(b"99999999999T"), None);
    }

    #[test]
    fn reference_table_lists_every_option_with_its_default() {
        let readme = include_str!("../docs/reference.md");
        for o in OPTIONS {
            let row = format!("| `{}` | `{}` |", o.name, o.default);
            assert!(
                readme.contains(&row),
                "docs/reference.md is missing the row for {}",
                o.name
            );
        }
    }

    #[test]
    fn bools_and_region_modes_parse() {
        assert_eq!(parse_bool(b"YES"), Some(true));
        assert_eq!(parse_bool(b"off"), Some(false));
        assert_eq!(parse_bool(b"maybe"), None);
        assert_eq!(parse_region(b"process"), Some(RegionMode::Process));
        assert_eq!(parse_region(b"off"), Some(RegionMode::Off));
        assert_eq!(parse_region(b"on"), Some(RegionMode::Markers));
        assert_eq!(parse_region(b"sometimes"), None);
    }
}
