#![doc = include_str!("../README.md")]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod arena;
pub mod device;
pub mod footprint;
mod global;
pub mod lifetime;
pub mod options;
pub mod os;
pub mod region;
pub mod reservation;
pub mod router;
pub mod stats;

pub use arena::{GRANULE, GRANULE_SHIFT};
pub use global::ResizeAlloc;
pub use region::{region, region_begin, region_depth, region_end, trim, RegionError, RegionGuard};
pub use stats::{stats, MemoryStats, ProcessStats, Stats, ThreadStats};
