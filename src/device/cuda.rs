//! The real CUDA driver behind a [`DevicePool`], through cudarc's dynamically loaded `sys`
//! bindings: the crate builds without a CUDA toolkit, and [`CudarcDriver::new`] checks that
//! `libcuda` can be loaded before anything calls into it (cudarc's loader panics otherwise).
//!
//! For cudarc users who want pooled device memory directly:
//! ```no_run
//! use resizealloc::device::cuda::{CudaPool, CudarcDriver};
//! // with a CUDA context current on this thread (cudarc's `CudaContext::new(0)` makes one)
//! let mut pool = CudaPool::new(CudarcDriver::new().expect("a CUDA driver"));
//! let p = pool.alloc(1 << 20, 0).unwrap();
//! pool.free(p).unwrap();
//! ```
//! The preload library does not use this path: inside `libresizealloc.so` a cudarc lookup would
//! go through the overridden `dlsym`, so its hooks find the driver with the real `dlsym`.

use cudarc::driver::sys;

use super::pool::DevicePool;
use super::{Backend, DevPtr};

/// A pool over the real driver.
pub type CudaPool = DevicePool<CudarcDriver>;

/// Why the driver cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaUnavailable {
    /// No `libcuda` could be loaded.
    NoDriverLibrary,
    /// `cuInit` failed with this `CUresult`.
    InitFailed(sys::CUresult),
}

/// The driver calls of [`Backend`], made through cudarc in the calling thread's current context.
#[derive(Debug)]
pub struct CudarcDriver {
    _private: (),
}

impl CudarcDriver {
    /// Loads and initialises the driver; an error instead of a panic when there is none.
    pub fn new() -> Result<Self, CudaUnavailable> {
        // SAFETY: only tries to open the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaUnavailable::NoDriverLibrary);
        }
        // SAFETY: the library is present; cuInit has no other precondition.
        match unsafe { sys::cuInit(0) } {
            sys::CUresult::CUDA_SUCCESS => Ok(CudarcDriver { _private: () }),
            e => Err(CudaUnavailable::InitFailed(e)),
        }
    }
}

impl Backend for CudarcDriver {
    type Error = sys::CUresult;

    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, sys::CUresult> {
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: valid out pointer; the driver was initialised in `new`.
        match unsafe { sys::cuMemAlloc_v2(&mut p, bytes) } {
            sys::CUresult::CUDA_SUCCESS => Ok(p),
            e => Err(e),
        }
    }

    fn free(&mut self, ptr: DevPtr) -> Result<(), sys::CUresult> {
        // SAFETY: `ptr` is a segment from `alloc`, freed once by the pool.
        match unsafe { sys::cuMemFree_v2(ptr) } {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn synchronize(&mut self) -> Result<(), sys::CUresult> {
        // SAFETY: no arguments; the driver was initialised in `new`.
        match unsafe { sys::cuCtxSynchronize() } {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn is_out_of_memory(&self, e: &sys::CUresult) -> bool {
        *e == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
    }
}
