//! CUDA: the device pools in front of unmodified programs.
//!
//! Allocation calls are served by the device pools (per context) inside regions, or always
//! with `RESIZEALLOC_REGION=process`; `RESIZEALLOC_CUDA=off` makes every hook a plain
//! pass-through, and a program that never touches CUDA never reaches any of this.
//!
//! * `driver.rs`: the real driver and runtime functions, found without going through our hooks;
//! * `pools.rs`: the pools (per context, sharded per thread, a lock each), and what markers,
//!   syncs, memory pressure and context teardown do to them;
//! * `driver_hooks.rs`: `cuInit`, `cuMemAlloc_v2`, `cuMemFree_v2`, the async and from-pool
//!   variants (and `_ptsz` forms), `cuCtxSynchronize`, context teardown, the address-range and
//!   buffer-id queries, capture begin/end, `cuIpcGetMemHandle`, and the pressure hooks (`cuMemCreate`,
//!   managed and pinned host allocations);
//! * `runtime_hooks.rs`: `cudaMalloc`, `cudaFree`, `cudaMallocAsync`, `cudaFreeAsync` (and
//!   `_ptsz`), `cudaDeviceSynchronize`, `cudaDeviceReset`, for programs that link cudart;
//! * `lookup.rs`: the `cuGetProcAddress` and `dlsym` routes to the driver hooks (static cudart,
//!   cuda-python, cudarc), and `dlsym` answering NULL for the exports in a process without CUDA;
//! * `capture.rs`: which contexts have a stream capture (CUDA graph) in progress, so that
//!   captured allocations go to the driver and the pools make no illegal call meanwhile;
//! * `plugin.rs`: allocator entry points for frameworks without `LD_PRELOAD` (PyTorch, CuPy,
//!   cuda.core, Numba);
//! * `api.rs`: the C API for the pools (stats, trim).

mod api;
mod capture;
mod driver;
mod driver_hooks;
mod lookup;
mod plugin;
mod pools;
mod runtime_hooks;

pub(crate) use driver::RESIZEALLOC_REAL_DLSYM;
pub(crate) use lookup::dlsym_filter;
pub use pools::{note_thread_left_region, stats_total};
