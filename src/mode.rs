//! The global mode (markers, process, off) and the foreign-free watch: the words the allocation
//! and free paths test before anything else. It imports only `published`: `options` sets the
//! words, `region`, `slab`, the router and the front ends read them.

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

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
/// The allocation profiler runs: a free may be of a sampled block (profile/). The lowest flag,
/// so that `free`'s assembly entry point tells the three cases apart with one compare against
/// it: no flag (straight on), the profiler's alone (its filter), any other (the watched path).
pub const WATCH_PROFILE: u8 = 1;
pub(crate) const WATCH_PROCESS: u8 = 2;
pub(crate) const WATCH_FRONT_END: u8 = 4;
/// The small-block heap (slab/) exists: its blocks must not reach the next allocator.
pub(crate) const WATCH_SLAB: u8 = 8;

/// True while the allocation profiler runs (`RESIZEALLOC_PROFILE`): threads outside regions
/// are then never settled (`region::outside_value` is `region::COUNTDOWN` in markers and off
/// mode, null in process mode), so that every allocation outside a region passes the
/// profiler's countdown (profile/).
pub(crate) static PROFILE: AtomicBool = AtomicBool::new(false);

/// Starts the profiler's routing: threads outside regions counted down (`region::COUNTDOWN`),
/// watched frees.
pub(crate) fn profile_started() {
    PROFILE.store(true, Ordering::Relaxed);
    watch(WATCH_PROFILE);
}

/// Called when the small-block heap makes its reservation, before its first block is handed out.
pub(crate) fn watch_slab_frees() {
    watch(WATCH_SLAB);
}

/// Called by a front end that serves blocks itself, before it hands the first one out.
pub(crate) fn watch_front_end_frees() {
    watch(WATCH_FRONT_END);
}

fn watch(flag: u8) {
    FOREIGN_WATCH.atomic().fetch_or(flag, Ordering::Relaxed);
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
        watch(WATCH_PROCESS);
    } else {
        FOREIGN_WATCH
            .atomic()
            .fetch_and(!WATCH_PROCESS, Ordering::Relaxed);
    }
}
