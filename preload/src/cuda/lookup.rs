//! How the hooks reach programs that do not call them by symbol: `cuGetProcAddress`/`_v2`
//! (the route of cudart >= 12, cuda-python and cudarc), whose answers are swapped for the
//! hooked names, and `dlsym`, overridden for the hooked names only.
//!
//! The overridden `dlsym` also keeps the library from looking like CUDA: a lookup of one of
//! its CUDA exports in a process that has no real function of that name (no driver, or no
//! cudart) answers NULL, with a `dlerror` message, as it would without the library. Probes
//! that bind at load time (weak references, `dlvsym`, `RTLD_NEXT` lookups from objects loaded
//! before the library) still see the exports; what those get back is what a real cudart and
//! driver answer on a machine without a driver (see `driver::no_driver`, `driver::no_runtime`).

use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicPtr, Ordering};

use resizealloc::options;

use super::driver::{self as drv, CUresult, CUDA_SUCCESS};
use super::driver_hooks::*;
use super::runtime_hooks::*;

const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 2;

/// Our hook for a driver entry point, by exact symbol name (as `dlsym` sees it); null for
/// names we do not hook. The runtime hooks are reached by symbol only: a program that looks
/// `cudaMalloc` up with `dlsym` gets cudart's, whose driver calls are hooked.
fn hook_by_symbol(name: &[u8]) -> *mut c_void {
    let f: *const () = match name {
        b"cuMemAlloc_v2" => cuMemAlloc_v2 as *const (),
        b"cuMemFree_v2" => cuMemFree_v2 as *const (),
        b"cuMemAllocAsync" => cuMemAllocAsync as *const (),
        b"cuMemAllocAsync_ptsz" => cuMemAllocAsync_ptsz as *const (),
        b"cuMemFreeAsync" => cuMemFreeAsync as *const (),
        b"cuMemFreeAsync_ptsz" => cuMemFreeAsync_ptsz as *const (),
        b"cuCtxSynchronize" => cuCtxSynchronize as *const (),
        b"cuCtxDestroy_v2" => cuCtxDestroy_v2 as *const (),
        b"cuStreamDestroy_v2" => cuStreamDestroy_v2 as *const (),
        b"cuDevicePrimaryCtxRelease_v2" => cuDevicePrimaryCtxRelease_v2 as *const (),
        b"cuMemPoolSetAccess" => cuMemPoolSetAccess as *const (),
        b"cuDevicePrimaryCtxReset_v2" => cuDevicePrimaryCtxReset_v2 as *const (),
        b"cuMemGetAddressRange_v2" => cuMemGetAddressRange_v2 as *const (),
        b"cuPointerGetAttribute" => cuPointerGetAttribute as *const (),
        b"cuPointerGetAttributes" => cuPointerGetAttributes as *const (),
        b"cuGetProcAddress" => cuGetProcAddress as *const (),
        b"cuGetProcAddress_v2" => cuGetProcAddress_v2 as *const (),
        b"cuMemPoolCreate" => cuMemPoolCreate as *const (),
        b"cuMemAllocFromPoolAsync" => cuMemAllocFromPoolAsync as *const (),
        b"cuMemAllocFromPoolAsync_ptsz" => cuMemAllocFromPoolAsync_ptsz as *const (),
        b"cuStreamBeginCapture_v2" => cuStreamBeginCapture_v2 as *const (),
        b"cuStreamBeginCapture_ptsz" => cuStreamBeginCapture_ptsz as *const (),
        b"cuStreamEndCapture" => cuStreamEndCapture as *const (),
        b"cuStreamEndCapture_ptsz" => cuStreamEndCapture_ptsz as *const (),
        b"cuIpcGetMemHandle" => cuIpcGetMemHandle as *const (),
        b"cuMemCreate" => cuMemCreate as *const (),
        b"cuMemAllocManaged" => cuMemAllocManaged as *const (),
        b"cuMemAllocHost_v2" => cuMemAllocHost_v2 as *const (),
        b"cuMemHostAlloc" => cuMemHostAlloc as *const (),
        _ => core::ptr::null(),
    };
    f as *mut c_void
}

/// Our other CUDA exports, which `dlsym` never answers with a hook of its own: the runtime
/// hooks and `cuInit`. The flag says whether the real function is the runtime's.
fn other_export(name: &[u8]) -> Option<(*mut c_void, bool)> {
    let (f, runtime): (*const (), bool) = match name {
        b"cuInit" => (cuInit as *const (), false),
        b"cudaMalloc" => (cudaMalloc as *const (), true),
        b"cudaFree" => (cudaFree as *const (), true),
        b"cudaMallocAsync" => (cudaMallocAsync as *const (), true),
        b"cudaMallocAsync_ptsz" => (cudaMallocAsync_ptsz as *const (), true),
        b"cudaFreeAsync" => (cudaFreeAsync as *const (), true),
        b"cudaFreeAsync_ptsz" => (cudaFreeAsync_ptsz as *const (), true),
        b"cudaDeviceSynchronize" => (cudaDeviceSynchronize as *const (), true),
        b"cudaDeviceReset" => (cudaDeviceReset as *const (), true),
        _ => return None,
    };
    Some((f as *mut c_void, runtime))
}

/// What `dlsym_filter` returns for "answer NULL": no function lives at address 1.
const HIDDEN: *mut c_void = core::ptr::without_provenance_mut(1);

/// `dlsym(handle, name)` for one of our CUDA exports (`own`) whose real function is nowhere in
/// the process: what the real `dlsym` finds, unless that is our export, in which case NULL
/// with the `dlerror` message of a failed lookup ([`HIDDEN`]). A definition that comes before
/// us (the program's own, say a statically linked cudart) is still found.
fn answer_without_real(handle: *mut c_void, name: *const c_char, own: *mut c_void) -> *mut c_void {
    let real = drv::real_dlsym();
    // SAFETY: the real dlsym, with the caller's handle and NUL-terminated name.
    let p = unsafe { real(handle, name) };
    if !p.is_null() && p != own {
        return p;
    }
    if p == own {
        // Leave the message a failed lookup leaves: look the name up where it is not.
        static LIBC: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
        let mut libc_handle = LIBC.load(Ordering::Acquire);
        if libc_handle.is_null() {
            // SAFETY: NUL-terminated name; RTLD_NOLOAD only finds the loaded libc, which stays
            // loaded for the life of the process (the handle is kept).
            libc_handle =
                unsafe { libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
            LIBC.store(libc_handle, Ordering::Release);
        }
        if !libc_handle.is_null() {
            // SAFETY: a live handle and a NUL-terminated name no libc defines; only the error
            // it leaves behind is wanted.
            unsafe { real(libc_handle, name) };
        }
    }
    HIDDEN
}

/// Our hook for a base name as `cuGetProcAddress` is asked for it, when the requested CUDA
/// version gets the ABI our hook implements (older versions keep the driver's answer).
fn hook_by_base_name(name: &[u8], version: c_int, flags: u64) -> *mut c_void {
    let ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0;
    let (symbol, since): (&[u8], c_int) = match name {
        b"cuMemAlloc" => (b"cuMemAlloc_v2", 3020),
        b"cuMemFree" => (b"cuMemFree_v2", 3020),
        b"cuMemGetAddressRange" => (b"cuMemGetAddressRange_v2", 3020),
        b"cuCtxDestroy" => (b"cuCtxDestroy_v2", 4000),
        b"cuStreamDestroy" => (b"cuStreamDestroy_v2", 4000),
        b"cuDevicePrimaryCtxRelease" => (b"cuDevicePrimaryCtxRelease_v2", 11000),
        b"cuMemPoolSetAccess" => (b"cuMemPoolSetAccess", 11020),
        b"cuDevicePrimaryCtxReset" => (b"cuDevicePrimaryCtxReset_v2", 11000),
        b"cuMemAllocAsync" if ptds => (b"cuMemAllocAsync_ptsz", 11020),
        b"cuMemFreeAsync" if ptds => (b"cuMemFreeAsync_ptsz", 11020),
        b"cuMemAllocAsync" => (b"cuMemAllocAsync", 11020),
        b"cuMemFreeAsync" => (b"cuMemFreeAsync", 11020),
        b"cuGetProcAddress" if version >= 12000 => (b"cuGetProcAddress_v2", 12000),
        b"cuGetProcAddress" => (b"cuGetProcAddress", 11030),
        b"cuMemAllocFromPoolAsync" if ptds => (b"cuMemAllocFromPoolAsync_ptsz", 11020),
        b"cuMemAllocFromPoolAsync" => (b"cuMemAllocFromPoolAsync", 11020),
        b"cuMemPoolCreate" => (b"cuMemPoolCreate", 11020),
        b"cuCtxSynchronize" => (b"cuCtxSynchronize", 0),
        b"cuPointerGetAttribute" => (b"cuPointerGetAttribute", 0),
        b"cuPointerGetAttributes" => (b"cuPointerGetAttributes", 7000),
        // cuStreamBeginCapture's ABI with a mode argument (the _v2 symbol) since 10.1.
        b"cuStreamBeginCapture" if ptds => (b"cuStreamBeginCapture_ptsz", 10010),
        b"cuStreamBeginCapture" => (b"cuStreamBeginCapture_v2", 10010),
        b"cuStreamEndCapture" if ptds => (b"cuStreamEndCapture_ptsz", 10000),
        b"cuStreamEndCapture" => (b"cuStreamEndCapture", 10000),
        b"cuIpcGetMemHandle" => (b"cuIpcGetMemHandle", 4010),
        b"cuMemCreate" => (b"cuMemCreate", 10020),
        b"cuMemAllocManaged" => (b"cuMemAllocManaged", 6000),
        b"cuMemAllocHost" => (b"cuMemAllocHost_v2", 3020),
        b"cuMemHostAlloc" => (b"cuMemHostAlloc", 2020),
        _ => return core::ptr::null_mut(),
    };
    if version < since {
        return core::ptr::null_mut();
    }
    hook_by_symbol(symbol)
}

fn swap_proc(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) {
    if symbol.is_null() || pfn.is_null() || !options::get().cuda {
        return;
    }
    // SAFETY: the driver just answered for this NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let hook = hook_by_base_name(name, version, flags);
    if !hook.is_null() {
        // SAFETY: `pfn` is the caller's out pointer, just written by the driver.
        unsafe { *pfn = hook };
    }
}

/// `cuGetProcAddress`: the driver's answer, with our hooks for the hooked names.
#[no_mangle]
pub extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    let r = match drv::cu_get_proc_address() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(symbol, pfn, version, flags) },
        None => return drv::no_driver(),
    };
    if r == CUDA_SUCCESS {
        swap_proc(symbol, pfn, version, flags);
    }
    r
}

/// `cuGetProcAddress_v2` (CUDA 12): as `cuGetProcAddress`.
#[no_mangle]
pub extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    let r = match drv::cu_get_proc_address_v2() {
        // SAFETY: forwarded arguments.
        Some(f) => unsafe { f(symbol, pfn, version, flags, status) },
        None => return drv::no_driver(),
    };
    if r == CUDA_SUCCESS {
        swap_proc(symbol, pfn, version, flags);
    }
    r
}

/// Decides whether `dlsym(handle, name)` should answer with one of our hooks; null means "ask the
/// real dlsym", [`HIDDEN`] means "answer NULL". Called from the naked `dlsym` (`entry_x86_64.rs`),
/// so it must not call our `dlsym` itself (it calls the real one). `RTLD_NEXT` lookups depend on
/// the caller's address, so they always go to the real dlsym.
pub(crate) extern "C" fn dlsym_filter(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    drv::real_dlsym(); // make sure the jump target exists
    if name.is_null() || handle == libc::RTLD_NEXT {
        return core::ptr::null_mut();
    }
    // SAFETY: dlsym's contract: a NUL-terminated name. Only the first bytes are read before the
    // cheap reject.
    let (c0, c1) = unsafe { (*name as u8, if *name == 0 { 0 } else { *name.add(1) as u8 }) };
    if c0 != b'c' || c1 != b'u' {
        return core::ptr::null_mut();
    }
    // SAFETY: as above.
    let cname = unsafe { CStr::from_ptr(name) };
    let bytes = cname.to_bytes();
    let hook = hook_by_symbol(bytes);
    if !hook.is_null() {
        if drv::driver_symbol(cname).is_null() {
            return answer_without_real(handle, name, hook);
        }
        return if options::get().cuda {
            hook
        } else {
            core::ptr::null_mut()
        };
    }
    match other_export(bytes) {
        Some((own, true)) if drv::runtime_symbol(cname).is_null() => {
            answer_without_real(handle, name, own)
        }
        Some((own, false)) if drv::driver_symbol(cname).is_null() => {
            answer_without_real(handle, name, own)
        }
        _ => core::ptr::null_mut(),
    }
}
