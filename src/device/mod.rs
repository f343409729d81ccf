//! The device suballocation pool: the resize idea for GPU memory.
//!
//! `cudaMalloc`/`cuMemAlloc` in a loop pays the full driver cost every time, and the driver's own
//! pool gives memory back at every synchronisation (release threshold 0). [`pool::DevicePool`]
//! keeps big blocks from the driver across synchronisations, suballocates them with a coalescing
//! best fit in 512-byte granules, and resizes like the resize arena: when a region overflowed
//! into extra blocks, the next region gets one block that covers the high-water mark, and the
//! surplus blocks go back once they are empty.
//!
//! The pool logic is generic over a [`Backend`] (the real driver, or [`mock::HostBackend`] for
//! tests that must run without a GPU), so every rule below is tested on any machine:
//!
//! * **Safety equal to the real API.** A block released with a synchronous free (`cudaFree`,
//!   `cuMemFree`) is handed out again only after a device synchronisation: one the program does
//!   anyway (the hooks report it with [`pool::DevicePool::on_synchronize`]), or one of the pool's
//!   own, at most once per batch of frees, when the pool would otherwise have to grow.
//! * A block released with `cudaFreeAsync(p, s)` is reusable at once on stream `s`, and on other
//!   streams after a synchronisation.
//! * Out of memory: release cached blocks and retry; only then return the backend's own
//!   out-of-memory error.
//! * Unknown pointers and double frees get an error value, and the pool stays intact.
//!
//! Backends: [`cuda::CudarcDriver`] (the real driver through cudarc, for Rust users) and
//! [`mock::HostBackend`]. The preload library's CUDA hooks (`preload/src/cuda.rs`) put the pool in
//! front of unmodified programs.

pub mod cuda;
pub mod mock;
pub mod pool;

/// A device address.
pub type DevPtr = u64;

/// A CUDA stream handle as the program sees it (0 is the legacy default stream).
pub type StreamId = u64;

/// Stream capture in the pool's context, as far as the backend knows (CUDA graphs): while a
/// capture is active the pool must not synchronise (it would sync the capturing stream, which
/// invalidates the capture), and in global mode it must not call the driver's allocation and
/// free functions either (they are "potentially unsafe" calls, which invalidate a global-mode
/// capture from any thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Capture {
    /// No capture: anything goes.
    #[default]
    None,
    /// Only relaxed-mode captures: no synchronisation, but `cuMemAlloc`/`cuMemFree` are legal.
    Relaxed,
    /// A global or thread-local capture (or one whose mode is unknown): no synchronisation and
    /// no driver allocation or free.
    Global,
}

/// What the pool needs from a driver.
pub trait Backend {
    /// The driver's error value, returned unchanged to the program.
    type Error: Copy + core::fmt::Debug + PartialEq;

    /// Allocates `bytes` of device memory (the real `cuMemAlloc`).
    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, Self::Error>;

    /// Frees a block from [`Backend::alloc`] (the real `cuMemFree`).
    fn free(&mut self, ptr: DevPtr) -> Result<(), Self::Error>;

    /// Waits until all work on the device is done (the real `cuCtxSynchronize`).
    fn synchronize(&mut self) -> Result<(), Self::Error>;

    /// True when `e` means "out of memory" (the pool then trims and retries).
    fn is_out_of_memory(&self, e: &Self::Error) -> bool;

    /// Whether a stream capture is active in the pool's context now (see [`Capture`]). The pool
    /// asks before each of its own synchronisations, segment allocations and segment frees,
    /// never on its fast paths. Backends that cannot know answer `Capture::None`.
    fn capture(&mut self) -> Capture {
        Capture::None
    }

    /// Waits until the work of another context (`domain`, as passed to
    /// [`pool::DevicePool::free_async_foreign`]) is done: blocks of this pool freed on that
    /// context's streams become reusable. Backends with one context answer with their own
    /// synchronisation.
    fn synchronize_domain(&mut self, domain: u64) -> Result<(), Self::Error> {
        let _ = domain;
        self.synchronize()
    }
}
