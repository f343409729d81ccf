//! The real CUDA driver behind a [`DevicePool`], through cudarc's dynamically loaded `sys`
//! bindings: the crate builds without a CUDA toolkit, and [`CudarcDriver::new`] checks that
//! `libcuda` can be loaded before anything calls into it (cudarc's loader panics otherwise).
//!
//! For cudarc users who want pooled device memory directly:
//! ```no_run
//! use resizealloc::device::cuda::{CudaPool, CudarcDriver};
//! // with a CUDA context current on this thread (cudarc's `CudaContext::new(0)` makes one);
//! // the pool binds it, and may then move to other threads
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
    /// No CUDA context is current on the calling thread: there is none for the pool to bind.
    NoContext,
}

/// The driver calls of [`Backend`], made through cudarc in the context that was current when
/// the driver was created: every call pushes that context when another one (or none) is
/// current on the calling thread, so a pool moved to another thread allocates, frees and
/// synchronises in its own context.
#[derive(Debug)]
pub struct CudarcDriver {
    ctx: sys::CUcontext,
}

// SAFETY: a context handle is an opaque driver handle; the driver API lets any thread push it,
// and the pool is used by one thread at a time (`&mut self`).
unsafe impl Send for CudarcDriver {}

impl CudarcDriver {
    /// Loads and initialises the driver and binds the calling thread's current context; an
    /// error instead of a panic when there is no driver or no context.
    pub fn new() -> Result<Self, CudaUnavailable> {
        // SAFETY: only tries to open the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaUnavailable::NoDriverLibrary);
        }
        // SAFETY: the library is present; cuInit has no other precondition.
        match unsafe { sys::cuInit(0) } {
            sys::CUresult::CUDA_SUCCESS => {}
            e => return Err(CudaUnavailable::InitFailed(e)),
        }
        match current_context() {
            Some(ctx) => Ok(CudarcDriver { ctx }),
            None => Err(CudaUnavailable::NoContext),
        }
    }

    /// The context the driver's calls are made in.
    pub fn context(&self) -> sys::CUcontext {
        self.ctx
    }

    /// Runs `f` with the bound context current on the calling thread, restoring the caller's.
    #[inline]
    fn in_context(&self, f: impl FnOnce() -> sys::CUresult) -> sys::CUresult {
        if current_context() == Some(self.ctx) {
            return f();
        }
        // SAFETY: the bound context, alive for as long as the program keeps it (the pool's
        // documented obligation); the push and the pop pair up.
        unsafe {
            let r = sys::cuCtxPushCurrent_v2(self.ctx);
            if r != sys::CUresult::CUDA_SUCCESS {
                return r;
            }
            let result = f();
            let mut popped: sys::CUcontext = core::ptr::null_mut();
            sys::cuCtxPopCurrent_v2(&mut popped);
            result
        }
    }
}

/// The calling thread's current context, if any.
fn current_context() -> Option<sys::CUcontext> {
    let mut ctx: sys::CUcontext = core::ptr::null_mut();
    // SAFETY: valid out pointer; the driver is loaded (callers checked).
    let r = unsafe { sys::cuCtxGetCurrent(&mut ctx) };
    (r == sys::CUresult::CUDA_SUCCESS && !ctx.is_null()).then_some(ctx)
}

impl Backend for CudarcDriver {
    type Error = sys::CUresult;

    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, sys::CUresult> {
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: valid out pointer; the driver was initialised in `new`.
        match self.in_context(|| unsafe { sys::cuMemAlloc_v2(&mut p, bytes) }) {
            sys::CUresult::CUDA_SUCCESS => Ok(p),
            e => Err(e),
        }
    }

    fn free(&mut self, ptr: DevPtr) -> Result<(), sys::CUresult> {
        // SAFETY: `ptr` is a segment from `alloc`, freed once by the pool.
        match self.in_context(|| unsafe { sys::cuMemFree_v2(ptr) }) {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn synchronize(&mut self) -> Result<(), sys::CUresult> {
        // SAFETY: no arguments; the driver was initialised in `new`.
        match self.in_context(|| unsafe { sys::cuCtxSynchronize() }) {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            e => Err(e),
        }
    }

    fn is_out_of_memory(&self, e: &sys::CUresult) -> bool {
        *e == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
    }
}
