//! A host-memory stand-in for the CUDA driver, for tests that must run without a GPU.
//!
//! Blocks are real host memory (so tests can write through the returned addresses and check
//! contents), calls are counted, and a capacity limit makes out-of-memory testable. The counts
//! are also kept in a shared [`MockCounters`] that outlives the backend, so a test can check what
//! a pool gave back when it was dropped (the backend is dropped with it).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Backend, Capture, DevPtr};

/// Errors with the driver's numbering (`CUresult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MockError {
    /// `CUDA_ERROR_INVALID_VALUE` (1).
    InvalidValue,
    /// `CUDA_ERROR_OUT_OF_MEMORY` (2).
    OutOfMemory,
}

/// The backend's counts, shared with whoever asked for them through
/// [`HostBackend::counters`]; they stay readable after the backend is gone.
#[derive(Debug, Default)]
pub struct MockCounters {
    /// `alloc` calls that succeeded.
    pub allocs: AtomicU64,
    /// `free` calls that succeeded.
    pub frees: AtomicU64,
    /// Blocks still allocated when the backend was dropped: the client never freed them (the
    /// backend releases their host memory itself, and does not count that as a `free`).
    pub leaked_at_drop: AtomicU64,
}

impl MockCounters {
    /// Blocks allocated and not freed through `free` (leaks at drop included).
    pub fn live(&self) -> u64 {
        self.allocs.load(Ordering::Relaxed) - self.frees.load(Ordering::Relaxed)
    }
}

/// Host memory posing as a device.
#[derive(Debug)]
pub struct HostBackend {
    /// Bytes the "device" can hold.
    pub capacity: usize,
    /// Bytes currently allocated.
    pub used: usize,
    /// Number of `alloc` calls that succeeded.
    pub allocs: u64,
    /// Number of `free` calls that succeeded.
    pub frees: u64,
    /// Number of `synchronize` calls.
    pub syncs: u64,
    /// The capture state the backend reports (tests set it).
    pub capture: Capture,
    /// Calls a real driver would have refused during the capture in force, and which would
    /// have invalidated it: a synchronisation during any capture, an allocation or free during
    /// a global one. Counted, and carried out anyway.
    pub illegal_calls: u64,
    /// The domains passed to `synchronize_domain`, in order.
    pub domain_syncs: Vec<u64>,
    blocks: BTreeMap<DevPtr, usize>,
    shared: Arc<MockCounters>,
}

const ALIGN: usize = 4096;

impl HostBackend {
    /// A device with `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        HostBackend {
            capacity,
            used: 0,
            allocs: 0,
            frees: 0,
            syncs: 0,
            capture: Capture::None,
            illegal_calls: 0,
            domain_syncs: Vec::new(),
            blocks: BTreeMap::new(),
            shared: Arc::default(),
        }
    }

    /// The counts as a handle that outlives the backend.
    pub fn counters(&self) -> Arc<MockCounters> {
        Arc::clone(&self.shared)
    }

    /// Blocks currently held from this backend.
    pub fn outstanding(&self) -> usize {
        self.blocks.len()
    }
}

impl Backend for HostBackend {
    type Error = MockError;

    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, MockError> {
        if self.capture == Capture::Global {
            self.illegal_calls += 1;
        }
        if bytes == 0 {
            return Err(MockError::InvalidValue);
        }
        if bytes > self.capacity - self.used {
            return Err(MockError::OutOfMemory);
        }
        let layout = Layout::from_size_align(bytes, ALIGN).map_err(|_| MockError::OutOfMemory)?;
        // SAFETY: non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        if p.is_null() {
            return Err(MockError::OutOfMemory);
        }
        self.used += bytes;
        self.allocs += 1;
        self.shared.allocs.fetch_add(1, Ordering::Relaxed);
        self.blocks.insert(p as DevPtr, bytes);
        Ok(p as DevPtr)
    }

    fn free(&mut self, ptr: DevPtr) -> Result<(), MockError> {
        if self.capture == Capture::Global {
            self.illegal_calls += 1;
        }
        let bytes = self.blocks.remove(&ptr).ok_or(MockError::InvalidValue)?;
        // SAFETY: `ptr` came from `alloc` with this size and alignment and is freed once.
        unsafe {
            dealloc(
                ptr as *mut u8,
                Layout::from_size_align_unchecked(bytes, ALIGN),
            )
        };
        self.used -= bytes;
        self.frees += 1;
        self.shared.frees.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), MockError> {
        if self.capture != Capture::None {
            self.illegal_calls += 1;
        }
        self.syncs += 1;
        Ok(())
    }

    fn capture(&mut self) -> Capture {
        self.capture
    }

    fn synchronize_domain(&mut self, domain: u64) -> Result<(), MockError> {
        if self.capture != Capture::None {
            self.illegal_calls += 1;
        }
        self.domain_syncs.push(domain);
        Ok(())
    }

    fn is_out_of_memory(&self, e: &MockError) -> bool {
        *e == MockError::OutOfMemory
    }
}

impl Drop for HostBackend {
    /// Releases the host memory of blocks the client never freed, and counts them as leaks.
    fn drop(&mut self) {
        let leaked = std::mem::take(&mut self.blocks);
        self.shared
            .leaked_at_drop
            .fetch_add(leaked.len() as u64, Ordering::Relaxed);
        for (ptr, bytes) in leaked {
            // SAFETY: `ptr` came from `alloc` with this size and alignment and was never freed
            // (it was still in `blocks`).
            unsafe {
                dealloc(
                    ptr as *mut u8,
                    Layout::from_size_align_unchecked(bytes, ALIGN),
                )
            };
        }
    }
}
