//! The C API for the device pools (`include/resizealloc.h`): their figures and a trim call.

use core::ffi::c_int;

use resizealloc::device::pool::PoolStats;

use super::pools;

/// `struct resize_cuda_stats`: the number of pools, then the sum of their figures, field for
/// field as in the header.
#[repr(C)]
pub struct CudaStats {
    /// Contexts with a pool.
    pub pools: u64,
    pub total: PoolStats,
}

/// Copies the pools' figures into `out`, at most `out_size` bytes (pass
/// `sizeof(struct resize_cuda_stats)`). Returns the size of the library's struct, or -1 when
/// `out` is NULL.
#[no_mangle]
pub extern "C" fn resize_cuda_stats_get(out: *mut CudaStats, out_size: usize) -> c_int {
    if out.is_null() {
        return -1;
    }
    let (total, pools) = pools::stats_total();
    let stats = CudaStats { pools, total };
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
