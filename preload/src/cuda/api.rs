//! The C API for the device pools (`include/resizealloc.h`): their figures and a trim call.

use core::ffi::c_int;

use super::pools;

/// `struct resize_cuda_stats`: the sum over every context's pool.
#[repr(C)]
pub struct CudaStats {
    /// Contexts with a pool.
    pub pools: u64,
    /// Bytes held from the driver.
    pub reserved: u64,
    /// Bytes in live blocks.
    pub in_use: u64,
    /// Sum of the pools' last region peaks.
    pub high_water: u64,
    /// Segments regions had to add beyond what the pools planned for them.
    pub overflow_blocks: u64,
    /// Segments held now.
    pub segments: u64,
    /// Synchronisations the pools did themselves (one per batch of frees they needed back).
    pub own_syncs: u64,
    /// Synchronisations of the program the pools saw.
    pub observed_syncs: u64,
    /// Segments asked from the driver over the pools' life.
    pub driver_allocs: u64,
}

/// Copies the pools' figures into `out`, at most `out_size` bytes (pass
/// `sizeof(struct resize_cuda_stats)`). Returns the size of the library's struct, or -1 when
/// `out` is NULL.
#[no_mangle]
pub extern "C" fn resize_cuda_stats_get(out: *mut CudaStats, out_size: usize) -> c_int {
    if out.is_null() {
        return -1;
    }
    let (s, n) = pools::stats_total();
    let stats = CudaStats {
        pools: n,
        reserved: s.reserved,
        in_use: s.in_use,
        high_water: s.high_water,
        overflow_blocks: s.overflow_blocks,
        segments: s.segments,
        own_syncs: s.own_syncs,
        observed_syncs: s.observed_syncs,
        driver_allocs: s.driver_allocs,
    };
    let len = out_size.min(core::mem::size_of::<CudaStats>());
    // SAFETY: `out` is non-null and the caller promises `out_size` writable bytes; we copy at
    // most that many from a local value.
    unsafe {
        core::ptr::copy_nonoverlapping(&stats as *const CudaStats as *const u8, out as *mut u8, len)
    };
    core::mem::size_of::<CudaStats>() as c_int
}

/// Gives every cached device block back to the driver (one synchronisation first if frees are
/// in flight). Returns 0 (`CUDA_SUCCESS`) or the first driver error.
#[no_mangle]
pub extern "C" fn resize_cuda_trim() -> c_int {
    pools::trim_all()
}
