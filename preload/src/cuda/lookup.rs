//! How the hooks reach programs that do not call them by symbol: `cuGetProcAddress`/`_v2`
//! (the route of cudart >= 12, cuda-python and cudarc), whose answers are swapped for the
//! hooked names, and `dlsym`, overridden for the hooked names only.

use core::ffi::{c_char, c_int, c_void, CStr};

use resizealloc::options;

use super::driver::RESIZEALLOC_REAL_DLSYM;
use super::driver::{self as drv, CUresult, CUDA_ERROR_NOT_INITIALIZED, CUDA_SUCCESS};
use super::driver_hooks::*;

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
        _ => core::ptr::null(),
    };
    f as *mut c_void
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
        None => return CUDA_ERROR_NOT_INITIALIZED,
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
        None => return CUDA_ERROR_NOT_INITIALIZED,
    };
    if r == CUDA_SUCCESS {
        swap_proc(symbol, pfn, version, flags);
    }
    r
}

/// Decides whether `dlsym(handle, name)` should answer with one of our hooks; null means "ask
/// the real dlsym". Called from the naked `dlsym` below, so it must not call `dlsym` itself.
extern "C" fn dlsym_filter(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    drv::real_dlsym(); // make sure the jump target exists
    if name.is_null() || handle == libc::RTLD_NEXT {
        return core::ptr::null_mut();
    }
    // SAFETY: dlsym's contract: a NUL-terminated name. Only the first bytes are read before the
    // cheap reject.
    let (c0, c1) = unsafe { (*name as u8, if *name == 0 { 0 } else { *name.add(1) as u8 }) };
    if c0 != b'c' || c1 != b'u' || !options::get().cuda {
        return core::ptr::null_mut();
    }
    // SAFETY: as above.
    hook_by_symbol(unsafe { CStr::from_ptr(name) }.to_bytes())
}

/// `dlsym`: our hooks for the hooked names, the real `dlsym` for everything else. Naked, and
/// the real one is reached with a jump, so glibc still sees the caller's return address (which
/// `RTLD_NEXT` depends on).
///
/// # Safety
/// As `dlsym(3)`.
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {filter}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jnz 2f",
        "jmp qword ptr [rip + {real}]",
        "2:",
        "ret",
        filter = sym dlsym_filter,
        real = sym RESIZEALLOC_REAL_DLSYM,
    )
}
