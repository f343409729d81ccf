//! The region advisor's allocation profiler (`RESIZEALLOC_PROFILE`): samples allocations made
//! outside regions, records each sampled block's allocation and free stacks, and at exit
//! reports the *region candidates*: the innermost calls that held the whole life of their
//! temporaries (see `docs/advisor.md`).
//!
//! Files, each importing only those before it: `clock.rs` (ticks), `unwind.rs` (the fast stack
//! walk over cached unwind rules), `stack.rs` (call stacks, from it or the unwinder),
//! `state.rs` (the fixed tables and the per-thread history), this file (the front ends' hooks,
//! the countdown, the start). The report at exit is the advisor's (`advisor/`), which the front
//! ends register.
//!
//! # How allocations reach it
//!
//! While it runs, a thread outside regions is never settled: its `active` route is
//! `region::COUNTDOWN` in markers and off mode, null in process mode, so its every allocation
//! passes [`count_down`] (in `malloc`'s assembly, for the preload library). When the count runs
//! out (a mean gap of `RESIZEALLOC_PROFILE_RATE` bytes, drawn from an exponential distribution
//! as jemalloc's `lg_prof_sample` does, plus every block of 1 MiB or more) [`take_sample`]
//! decides, and the front end serves the request from the next allocator through
//! [`sampled_alloc`], which times it. Frees to the next allocator are watched
//! (`mode::WATCH_PROFILE`): one filter load tells a sampled block ([`maybe_sampled`]), whose
//! free [`sampled_free`] times and records. Allocations inside regions keep the arena's fast
//! paths and are not sampled: they are in a region already.
//!
//! The profiler never allocates through itself: its tables are one fixed mapping, its stack
//! walk allocates nothing, and the thread's `PROFILING` flag keeps anything the unwinder or the
//! report allocates out of the samples.

pub(crate) mod clock;
mod stack;
pub(crate) mod state;
mod unwind;

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::region::{self, ThreadState};
use stack::Stack;
use state::{Guarded, Live, NO_STACK};

pub use state::{FILTER, FILTER_BITS, FILTER_MULTIPLIER, TABLE_BYTES};

/// The default mean bytes between samples.
pub const DEFAULT_RATE: usize = 512 << 10;
/// Every allocation of this size or more is sampled.
pub const ALWAYS_SAMPLED: usize = 1 << 20;

/// The profiler's own work (stack walks, table updates) that the default rate allows, in
/// percent of the run's time: past it the rate doubles, under a quarter of it the rate halves
/// again (never under the rate the run started with). A given `RESIZEALLOC_PROFILE_RATE` stays
/// as given. The work of all threads is set against the time that passed, so a program whose
/// threads allocate at once is paced as if one thread did all the work (more conservative).
///
/// One percent: the overhead budget is 5 % of the run, and the per-call part that pacing cannot
/// touch (the countdown in every allocation, the filter test in every free) takes about 3 % of
/// a program that does nothing but allocate and free; the samples get the rest, with room for
/// what this measure leaves out (the cache lines a stack walk evicts).
pub const PACE_PERCENT: u64 = 1;
/// Samples between two looks at the profiler's share of the run.
const PACE_WINDOW: u64 = 256;
/// The highest rate pacing goes to (blocks of 1 MiB or more are sampled whatever the rate).
const PACE_MAX_RATE: usize = 1 << 30;

static RATE: AtomicUsize = AtomicUsize::new(DEFAULT_RATE);
/// The next thread serial (histories are per serial).
static NEXT_SERIAL: AtomicUsize = AtomicUsize::new(1);
/// splitmix64 state for the sampling gaps.
static RNG: AtomicU64 = AtomicU64::new(0x2545_F491_4F6C_DD1D);
/// The library's own code when it is a shared object of its own (skipped in stacks).
static OWN_LO: AtomicUsize = AtomicUsize::new(0);
static OWN_HI: AtomicUsize = AtomicUsize::new(0);

/// True while the profiler runs.
#[inline(always)]
pub fn enabled() -> bool {
    crate::mode::PROFILE.load(Ordering::Relaxed)
}

/// The profiler's one-time start, at a thread's first look at the countdown: the clock, the
/// library's own code range, the `fork` handlers of its lock. 0: not started, 1: starting
/// (a call the start itself makes comes back here and goes on unsampled), 2: started.
static STARTED: AtomicU8 = AtomicU8::new(0);

#[cold]
#[inline(never)]
fn start_once() {
    if STARTED
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    inside(|| {
        RATE.store(crate::options::profile_rate().max(1), Ordering::Relaxed);
        own_code_range();
        unwind::start();
        clock::start();
        // Registered after the core crate's own handlers (fork.rs), so that glibc runs this
        // prepare first: the profiler's lock is taken before the slot table's and the heap's
        // (a sample never takes those while holding it).
        // SAFETY: handlers with the right signatures, which never unwind.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    });
    STARTED.store(2, Ordering::Release);
}

/// The mean bytes between samples.
pub(crate) fn rate() -> usize {
    RATE.load(Ordering::Relaxed)
}

/// True in a child forked while the profiler ran (its report files add its pid).
pub(crate) fn in_forked_child() -> bool {
    CHILD.load(Ordering::Relaxed)
}
static CHILD: AtomicBool = AtomicBool::new(false);

/// The addresses an object's loadable segments span, `[lo, hi)` (empty: `lo >= hi`).
pub(crate) fn loaded_range(info: &libc::dl_phdr_info) -> (usize, usize) {
    let mut lo = usize::MAX;
    let mut hi = 0;
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: the loader's info block has `dlpi_phnum` program headers at `dlpi_phdr`.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type == libc::PT_LOAD {
            let start = info.dlpi_addr as usize + ph.p_vaddr as usize;
            lo = lo.min(start);
            hi = hi.max(start + ph.p_memsz as usize);
        }
    }
    (lo, hi)
}

/// The address range of the shared object that holds this code, when that is not the main
/// program (the preload library): its frames are the library's own.
fn own_code_range() {
    extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        _data: *mut libc::c_void,
    ) -> libc::c_int {
        let me = own_code_range as *const () as usize;
        // SAFETY: the loader passes a valid info block with `dlpi_phnum` program headers.
        let info = unsafe { &*info };
        let (lo, hi) = loaded_range(info);
        if me < lo || me >= hi {
            return 0;
        }
        // SAFETY: dlpi_name is null or a NUL-terminated string.
        let main = info.dlpi_name.is_null() || unsafe { *info.dlpi_name } == 0;
        if !main {
            OWN_LO.store(lo, Ordering::Relaxed);
            OWN_HI.store(hi, Ordering::Relaxed);
        }
        1
    }
    // SAFETY: `visit` matches the callback type and reads only what the loader passes.
    unsafe { libc::dl_iterate_phdr(Some(visit), core::ptr::null_mut()) };
}

/// Counts a request of `size` bytes down; true when it is to be sampled (served by the next
/// allocator through [`sampled_alloc`]). The common case is one compare and a store.
#[inline(always)]
pub fn take_sample(size: usize) -> bool {
    if count_down(size) {
        return false;
    }
    take_sample_slow(region::state(), size)
}

/// [`take_sample`]'s common case alone: true when the request was counted down and is not to
/// be sampled; false leaves the countdown as it was, for `take_sample` to decide. The twin of
/// `malloc`'s countdown in preload/src/entry_x86_64.rs (which subtracts in memory, and adds
/// the request back when the subtraction borrowed).
#[inline(always)]
pub fn count_down(size: usize) -> bool {
    let ts = region::state();
    let (left, borrow) = ts.sample_left.get().overflowing_sub(size as u64);
    if borrow {
        return false;
    }
    ts.sample_left.set(left);
    true
}

/// Most of a gap that the countdown holds at once: `sample_left` stays under
/// [`ALWAYS_SAMPLED`], the rest of the gap waits in `sample_carry`.
const LEFT_MAX: usize = ALWAYS_SAMPLED - 1;

/// A request larger than `sample_left`, or the thread's first.
#[cold]
#[inline(never)]
fn take_sample_slow(ts: &ThreadState, size: usize) -> bool {
    if ts.flags.get() & region::PROFILING != 0 {
        return false;
    }
    if STARTED.load(Ordering::Acquire) != 2 {
        start_once();
        if STARTED.load(Ordering::Acquire) != 2 {
            return false;
        }
    }
    let first = ts.profile_slot.get() == 0;
    if first {
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        ts.profile_slot.set(serial.min(u32::MAX as usize) as u32);
    } else if size < ALWAYS_SAMPLED {
        // The gap's rest: the request is counted down from it if it fits.
        let rest = ts.sample_left.get() as usize + ts.sample_carry.get() as usize;
        if size <= rest {
            set_gap(ts, rest - size);
            return false;
        }
    }
    set_gap(ts, draw_gap());
    !first || size >= ALWAYS_SAMPLED
}

/// Starts the countdown of a gap of `gap` bytes (at most `u32::MAX`).
fn set_gap(ts: &ThreadState, gap: usize) {
    let left = gap.min(LEFT_MAX);
    ts.sample_left.set(left as u64);
    ts.sample_carry.set((gap - left) as u32);
}

/// A gap from the exponential distribution of mean `RATE` bytes (so every byte has the same
/// chance to be the one sampled).
fn draw_gap() -> usize {
    let mut z = RNG
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let u = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let gap = -(u.ln()) * RATE.load(Ordering::Relaxed) as f64;
    gap.clamp(1.0, (u32::MAX - 1) as f64) as usize
}

/// How many blocks of `size` bytes one sample stands for.
fn weight(size: usize) -> f64 {
    if size >= ALWAYS_SAMPLED {
        return 1.0;
    }
    let p = 1.0 - (-(size.max(1) as f64) / RATE.load(Ordering::Relaxed) as f64).exp();
    if p > 0.0 {
        1.0 / p
    } else {
        1.0
    }
}

/// Sets the thread's profiler flag while `f` runs (nothing it allocates is sampled).
pub(crate) fn inside<R>(f: impl FnOnce() -> R) -> R {
    let ts = region::state();
    let was = ts.flags.get();
    ts.flags.set(was | region::PROFILING);
    let r = f();
    ts.flags
        .set(ts.flags.get() & !region::PROFILING | (was & region::PROFILING));
    r
}

fn own_code() -> (usize, usize) {
    (
        OWN_LO.load(Ordering::Relaxed),
        OWN_HI.load(Ordering::Relaxed),
    )
}

/// The stack buffers of the samples being recorded (one sample at a time: under the lock).
static SCRATCH: Guarded<Stack> = Guarded::new(Stack::empty());
/// The fast stack walk's rules (under the lock).
static RULES: Guarded<unwind::Cache> = Guarded::new(unwind::Cache::new());
const _: () = assert!(
    state::PROFILE_BYTES + unwind::CACHE_BYTES < 16 << 20,
    "the profile's memory stays under 16 MiB"
);

/// A request that [`take_sample`] picked: `next` serves it and the block is recorded.
/// The front end calls it from the function whose frame is the innermost one the stacks keep
/// out.
#[inline(never)]
pub fn sampled_alloc(size: usize, next: impl FnOnce() -> *mut u8) -> *mut u8 {
    let marker = 0u8;
    let above = core::hint::black_box(&marker) as *const u8 as usize;
    let p = next();
    if !p.is_null() {
        inside(|| record_alloc(p as usize, size, clock::ticks(), above));
    }
    p
}

/// The calling thread's stack above the frame at `above`, into the scratch buffer, counted by
/// the walk that took it. The caller holds the lock (`t` is the tables it guards).
fn capture(t: &mut state::Tables, above: usize) -> &'static mut Stack {
    // SAFETY: the caller holds LOCK, which guards both buffers.
    let (s, rules) = unsafe { (SCRATCH.get(), RULES.get()) };
    if stack::capture(s, above, own_code(), rules) {
        t.totals.fast_walks += 1;
    } else {
        t.totals.unwinder_walks += 1;
    }
    s
}

fn record_alloc(p: usize, size: usize, born_ticks: u64, above: usize) {
    let ts = region::state();
    let serial = ts.profile_slot.get();
    let _g = state::LOCK.lock();
    let Some(t) = state::tables() else { return };
    let s = capture(t, above);
    let w = weight(size);
    t.totals.samples += 1;
    t.totals.allocations += w;
    t.totals.bytes += w * size as f64;
    let (born, born_bytes) = if serial == 0 {
        (0, 0)
    } else {
        let h = t.thread(serial);
        h.bytes += RATE.load(Ordering::Relaxed) as u64;
        (h.push(s), h.bytes)
    };
    let stack = t.intern(s);
    let rec = Live {
        p,
        size,
        weight: w,
        stack,
        thread: serial,
        born,
        reallocs: 0,
        born_ticks,
        born_bytes,
    };
    if stack == NO_STACK || !t.insert_live(rec) {
        t.totals.dropped += 1;
    }
    let now = clock::ticks();
    t.totals.window_work += now.wrapping_sub(born_ticks);
    pace(&mut t.totals, now);
}

/// After each sample: every [`PACE_WINDOW`] samples, the profiler's work in the window against
/// the time it spanned sets the rate (see [`PACE_PERCENT`]).
fn pace(tot: &mut state::Totals, now: u64) {
    tot.window_samples += 1;
    if tot.window_start == 0 {
        tot.window_start = now;
        tot.window_work = 0;
        tot.window_samples = 0;
        return;
    }
    if tot.window_samples < PACE_WINDOW {
        return;
    }
    let span = now.wrapping_sub(tot.window_start);
    let work = tot.window_work;
    tot.window_start = now;
    tot.window_work = 0;
    tot.window_samples = 0;
    if crate::options::profile_rate_given() {
        return;
    }
    let rate = RATE.load(Ordering::Relaxed);
    let floor = crate::options::profile_rate().max(1);
    let new = if work.saturating_mul(100) > span.saturating_mul(PACE_PERCENT) {
        rate.saturating_mul(2).min(PACE_MAX_RATE)
    } else if work.saturating_mul(400) < span.saturating_mul(PACE_PERCENT) {
        (rate / 2).max(floor)
    } else {
        rate
    };
    RATE.store(new, Ordering::Relaxed);
}

/// True when `p` (a block going back to the next allocator) may be a sampled one: one load.
#[inline(always)]
pub fn maybe_sampled(p: *mut u8) -> bool {
    state::maybe_sampled(p as usize)
}

/// The free of a block [`maybe_sampled`] picked: its record is closed, and `free` gives it
/// back.
#[inline(never)]
pub fn sampled_free(p: *mut u8, free: impl FnOnce()) {
    let marker = 0u8;
    let above = core::hint::black_box(&marker) as *const u8 as usize;
    let ts = region::state();
    if ts.flags.get() & region::PROFILING != 0 {
        return free();
    }
    // The record goes first: once freed, the address may be another thread's new sample.
    let rec = {
        let _g = state::LOCK.lock();
        state::tables().and_then(|t| t.take_live(p as usize))
    };
    free();
    if let Some(rec) = rec {
        inside(|| record_free(&rec, clock::ticks(), above));
    }
}

fn record_free(rec: &Live, now: u64, above: usize) {
    let serial = region::state().profile_slot.get();
    let _g = state::LOCK.lock();
    let Some(t) = state::tables() else { return };
    if serial == 0 || serial != rec.thread || rec.stack == NO_STACK {
        t.totals.other_thread += rec.weight;
        t.close(rec, 0, false, (0, 0));
        return;
    }
    let s = capture(t, above);
    let total = {
        let e = &t.stacks[rec.stack as usize];
        e.base as usize + e.len as usize
    };
    let h = t.thread(serial);
    h.push(s);
    let (depth, whole) = h.containing(rec.born, total);
    let life = (
        now.wrapping_sub(rec.born_ticks),
        h.bytes.saturating_sub(rec.born_bytes),
    );
    t.close(rec, depth, whole, life);
    t.totals.window_work += clock::ticks().wrapping_sub(now);
}

/// `realloc` of a block of the next allocator while the profiler runs: a sampled block keeps
/// its record (birth, stack) under its new address and size. Any other goes straight on, after
/// one filter load.
#[inline(always)]
pub fn foreign_realloc(p: *mut u8, size: usize, realloc: impl FnOnce() -> *mut u8) -> *mut u8 {
    if !maybe_sampled(p) {
        return realloc();
    }
    realloc_maybe_sampled(p, size, realloc)
}

/// [`foreign_realloc`] of a block the filter did not rule out.
#[inline(never)]
fn realloc_maybe_sampled(p: *mut u8, size: usize, realloc: impl FnOnce() -> *mut u8) -> *mut u8 {
    if region::state().flags.get() & region::PROFILING != 0 {
        return realloc();
    }
    let rec = {
        let _g = state::LOCK.lock();
        state::tables().and_then(|t| t.take_live(p as usize))
    };
    let q = realloc();
    if let Some(mut rec) = rec {
        let _g = state::LOCK.lock();
        if let Some(t) = state::tables() {
            if !q.is_null() {
                rec.p = q as usize;
                rec.size = size;
                rec.reallocs = rec.reallocs.saturating_add(1);
            }
            if !t.insert_live(rec) {
                t.totals.dropped += 1;
            }
        }
    }
    q
}

/// The gate of the profiler's fork handlers (see `fork.rs`).
static FORK_GATE: crate::fork::Gate = crate::fork::Gate::new();

/// Takes the profiler's lock before `fork` (unless the gate says to take nothing).
extern "C" fn fork_prepare() {
    if FORK_GATE.enter() {
        FORK_GATE.took(crate::fork::wait_for(|| {
            state::LOCK.try_lock().map(core::mem::forget).is_some()
        }));
    }
}

/// Releases it after `fork` in the parent.
extern "C" fn fork_parent() {
    if FORK_GATE.leave(false) == crate::fork::Leave::Release {
        // SAFETY: `fork_prepare` took the lock in this thread and forgot its guard.
        unsafe { state::LOCK.force_unlock() };
    }
}

/// In the child after `fork`: the lock released, a profile of its own (empty tables; the report
/// files add its pid). Where the lock was not taken for the fork and is held (by the frame a
/// signal handler interrupted), the child keeps the parent's tables.
extern "C" fn fork_child() {
    CHILD.store(true, Ordering::Relaxed);
    if FORK_GATE.leave(true) != crate::fork::Leave::Nothing {
        // SAFETY: as in `fork_parent`, for the child's copy of the forking thread; or the gate
        // gave up on the lock, and the child has no other thread that could hold it.
        unsafe { state::LOCK.force_unlock() };
    }
    let Some(_g) = state::LOCK.try_lock() else {
        return;
    };
    state::reset();
}
