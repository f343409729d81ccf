#![doc = include_str!("../docs/rust-crate.md")]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

// The public face: `ResizeAlloc`, the region functions and guard, `stats`, `trim` (re-exported
// below) and the device pool. The modules marked `doc(hidden)` are the internals that the preload
// front end (`preload/`) and the integration tests reach; everything in them that could break
// soundness from safe code is an `unsafe fn` with its obligations, or crate-private (see the
// compile-fail examples in `reservation.rs`).
#[doc(hidden)]
pub mod advisor;
#[doc(hidden)]
pub mod arena;
pub mod device;
mod footprint;
#[doc(hidden)]
pub mod fork;
mod global;
mod layout;
#[doc(hidden)]
pub mod lifetime;
#[doc(hidden)]
pub mod misuse;
#[doc(hidden)]
pub mod mode;
#[doc(hidden)]
pub mod options;
#[doc(hidden)]
pub mod os;
#[doc(hidden)]
pub mod profile;
#[doc(hidden)]
pub mod published;
pub mod region;
#[doc(hidden)]
pub mod reservation;
#[doc(hidden)]
pub mod router;
#[doc(hidden)]
pub mod slab;
pub mod stats;

pub use arena::{GRANULE, GRANULE_SHIFT};
pub use global::ResizeAlloc;
pub use region::{
    outside_regions, region, region_begin, region_depth, region_end, trim, InRegion, InRegionExt,
    RegionError, RegionGuard,
};
pub use stats::{stats, MemoryStats, ProcessStats, SmallStats, Stats, ThreadStats};

/// Runs a function's body in a region, or each poll of an `async fn`'s future (through
/// [`InRegion`]). The same name as the [`region()`] function, in the macro namespace:
///
/// ```
/// #[resizealloc::region]
/// fn words(text: &str) -> usize {
///     let lower = text.to_lowercase(); // a temporary of the region
///     lower.split_whitespace().count()
/// }
///
/// #[resizealloc::region]
/// async fn reply(body: String) -> String {
///     body.trim().to_uppercase() // each poll of this body runs in a region
/// }
/// # assert_eq!(words("A b C"), 3);
/// ```
///
/// It refuses, at compile time, anything but a function with a body, a `const fn`, and
/// arguments.
#[cfg(feature = "macros")]
pub use resizealloc_macros::region;
