//! The profiler's clock: the time-stamp counter on x86-64 (a few nanoseconds to read, no system
//! call), converted to nanoseconds with the rate measured over the whole run; the monotonic
//! clock elsewhere.

use core::sync::atomic::{AtomicU64, Ordering};

/// Ticks and nanoseconds when the profiler started, for [`ns_per_tick`].
static START_TICKS: AtomicU64 = AtomicU64::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);

/// The current tick.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` has no preconditions on x86-64.
    return unsafe { core::arch::x86_64::_rdtsc() };
    #[cfg(not(target_arch = "x86_64"))]
    return monotonic_ns();
}

/// Nanoseconds on the monotonic clock (0 if it cannot be read).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; the call allocates nothing.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Notes the start, for the rate.
pub(crate) fn start() {
    START_TICKS.store(ticks(), Ordering::Relaxed);
    START_NS.store(monotonic_ns(), Ordering::Relaxed);
}

/// Nanoseconds per tick over the run so far (1 where the run was too short to tell).
pub(crate) fn ns_per_tick() -> f64 {
    let dt = ticks().wrapping_sub(START_TICKS.load(Ordering::Relaxed));
    let dns = monotonic_ns().saturating_sub(START_NS.load(Ordering::Relaxed));
    if dt < 1000 || dns == 0 {
        return 1.0;
    }
    dns as f64 / dt as f64
}

/// Nanoseconds since the profiler started.
pub(crate) fn run_ns() -> u64 {
    monotonic_ns().saturating_sub(START_NS.load(Ordering::Relaxed))
}
