//! The global mode (markers, process, off) and the foreign-free watch: the words the allocation
//! and free paths test before anything else. It imports only `published` (and `spin` for the
//! watch flags' lock): `options` sets the words, `region`, `slab`, the router and the front ends
//! read them.

use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};

use crate::published::Published;

/// How region markers are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RegionMode {
    /// Markers decide (the default).
    Markers = 0,
    /// Every thread is inside a region from its start.
    Process = 1,
    /// Markers are ignored; everything passes through.
    Off = 2,
}

/// `MODE_*` bits: zero means "markers decide" and lets the pass-through path skip any work.
pub(crate) static MODE: AtomicU8 = AtomicU8::new(MODE_UNINIT);
pub(crate) const MODE_MARKERS: u8 = 0;
pub(crate) const MODE_UNINIT: u8 = 1;
pub(crate) const MODE_PROCESS: u8 = 2;
pub(crate) const MODE_OFF: u8 = 4;
/// Modes the pass-through allocation path must look at.
pub(crate) const MODE_ATTENTION: u8 = MODE_UNINIT | MODE_PROCESS;

/// True when the mode is known and sends allocations outside regions to the next allocator
/// (markers or off): one load.
#[inline(always)]
pub(crate) fn passes_through() -> bool {
    MODE.load(Ordering::Relaxed) & MODE_ATTENTION == 0
}

/// Frees that go to the next allocator need a look when this is not zero: `WATCH_PROCESS`
/// while the mode is process mode (they are sampled), `WATCH_FRONT_END` once a front end asked
/// (it served blocks itself that must not reach the next allocator). Zero otherwise, so the
/// pass-through `free` costs one load and one test beyond the range check (the preload
/// library's `free` reads it from assembly, hence public, read-only outside the crate).
pub static FOREIGN_WATCH: Published<AtomicU8> = Published::new(AtomicU8::new(0));
pub(crate) const WATCH_PROCESS: u8 = 1;
pub(crate) const WATCH_FRONT_END: u8 = 2;
/// The small-block heap (slab/) exists: its blocks must not reach the next allocator.
pub(crate) const WATCH_SLAB: u8 = 4;
/// The allocation profiler runs: a free may be of a sampled block (profile/).
pub const WATCH_PROFILE: u8 = 8;

/// True while the allocation profiler runs (`RESIZEALLOC_PROFILE`): threads outside regions
/// are then never settled (`region::outside_value` is `region::COUNTDOWN` in markers and off
/// mode, null in process mode), so that every allocation outside a region passes the
/// profiler's countdown (profile/).
pub(crate) static PROFILE: AtomicBool = AtomicBool::new(false);

/// Starts the profiler's routing: threads outside regions counted down (`region::COUNTDOWN`),
/// watched frees, looked up in `filter` (the profiler's, of [`FILTER_SLOTS`] bytes) while the
/// profiler alone watches.
pub(crate) fn profile_started(filter: *const u8) {
    PROFILE.store(true, Ordering::Relaxed);
    PROFILE_FILTER.store(filter as *mut u8, Ordering::Relaxed);
    change_watch(WATCH_PROFILE, 0);
}

/// Called when the small-block heap makes its reservation, before its first block is handed out.
pub(crate) fn watch_slab_frees() {
    change_watch(WATCH_SLAB, 0);
}

/// Called by a front end that serves blocks itself, before it hands the first one out.
pub(crate) fn watch_front_end_frees() {
    change_watch(WATCH_FRONT_END, 0);
}

/// Where `free`'s assembly entry point looks a pointer up while [`FOREIGN_WATCH`] is not zero:
/// the profiler's filter (`profile::FILTER`) while only the profiler watches, else
/// `ALL_WATCHED`, whose every slot is set, so that every pointer goes on to the watched path.
/// One load replaces a second test of the watch flags there. Invariant: it is the filter only
/// while `FOREIGN_WATCH` is [`WATCH_PROFILE`] (both change together, in `change_watch`).
pub static FREE_FILTER: Published<AtomicPtr<u8>> =
    Published::new(AtomicPtr::new(ALL_WATCHED.as_ptr() as *mut u8));
/// The slots of the filters [`FREE_FILTER`] names, one byte each.
pub const FILTER_SLOTS: usize = 1 << 14;
/// See [`FREE_FILTER`]: every slot 1. Never written.
static ALL_WATCHED: [u8; FILTER_SLOTS] = [1; FILTER_SLOTS];
/// The profiler's filter, once it started.
static PROFILE_FILTER: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// Serialises [`change_watch`] (never held while anything allocates; taken last before `fork`).
static WATCH_LOCK: spin::Mutex<()> = spin::Mutex::new(());

/// Sets the watch flags `set` and clears `clear`, with [`FREE_FILTER`] to match. A free that
/// reads them in between goes the watched way: the filter is dropped before another flag
/// appears, and named only once the flags say the profiler alone watches.
fn change_watch(set: u8, clear: u8) {
    let _g = WATCH_LOCK.lock();
    let w = FOREIGN_WATCH.atomic();
    let new = (w.load(Ordering::Relaxed) | set) & !clear;
    if new == WATCH_PROFILE {
        w.store(new, Ordering::Release);
        let filter = PROFILE_FILTER.load(Ordering::Relaxed);
        FREE_FILTER.atomic().store(filter, Ordering::Release);
    } else {
        let all = ALL_WATCHED.as_ptr() as *mut u8;
        FREE_FILTER.atomic().store(all, Ordering::Release);
        w.store(new, Ordering::Release);
    }
}

/// Takes [`WATCH_LOCK`] before `fork` (after every other lock: see fork.rs).
pub(crate) fn fork_prepare() {
    core::mem::forget(WATCH_LOCK.lock());
}

/// Releases what [`fork_prepare`] took, in the parent and in the child.
///
/// # Safety
/// Only after [`fork_prepare`], in the thread that forked (or its copy in the child).
pub(crate) unsafe fn fork_finish() {
    // SAFETY: the caller's obligation: our own `fork_prepare` holds the lock.
    unsafe { WATCH_LOCK.force_unlock() };
}

/// Called by [`options::set`](crate::options::set).
pub(crate) fn mode_changed(m: RegionMode) {
    let bits = match m {
        RegionMode::Markers => MODE_MARKERS,
        RegionMode::Process => MODE_PROCESS,
        RegionMode::Off => MODE_OFF,
    };
    MODE.store(bits, Ordering::Relaxed);
    if bits & MODE_PROCESS != 0 {
        change_watch(WATCH_PROCESS, 0);
    } else {
        change_watch(0, WATCH_PROCESS);
    }
}
