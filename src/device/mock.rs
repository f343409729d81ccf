//! A host-memory stand-in for the CUDA driver, for tests that must run without a GPU.
//!
//! Blocks are real host memory (so tests can write through the returned addresses and check
//! contents), calls are counted, and a capacity limit makes out-of-memory testable.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::BTreeMap;

use super::{Backend, DevPtr};

/// Errors with the driver's numbering (`CUresult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MockError {
    /// `CUDA_ERROR_INVALID_VALUE` (1).
    InvalidValue,
    /// `CUDA_ERROR_OUT_OF_MEMORY` (2).
    OutOfMemory,
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
    blocks: BTreeMap<DevPtr, usize>,
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
            blocks: BTreeMap::new(),
        }
    }

    /// Blocks currently held from this backend.
    pub fn outstanding(&self) -> usize {
        self.blocks.len()
    }
}

impl Backend for HostBackend {
    type Error = MockError;

    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, MockError> {
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
        self.blocks.insert(p as DevPtr, bytes);
        Ok(p as DevPtr)
    }

    fn free(&mut self, ptr: DevPtr) -> Result<(), MockError> {
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
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), MockError> {
        self.syncs += 1;
        Ok(())
    }

    fn is_out_of_memory(&self, e: &MockError) -> bool {
        *e == MockError::OutOfMemory
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        let ptrs: Vec<DevPtr> = self.blocks.keys().copied().collect();
        for p in ptrs {
            let _ = self.free(p);
        }
    }
}
