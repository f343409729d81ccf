//! glibc's extensions of the malloc family, so that programs and tools that use them see the
//! arenas too.
//!
//! * `__libc_malloc`, `__libc_free`, `__libc_calloc`, `__libc_realloc`, `__libc_memalign`,
//!   `__libc_valloc`, `__libc_pvalloc`: glibc's own names for the family. They are the exported
//!   functions of `malloc.rs` under another name, so a block from one name can be freed by any
//!   other (without them, `__libc_free` of an arena block reached glibc and aborted). mimalloc
//!   and tcmalloc export these names too.

use core::ffi::c_void;

use crate::malloc;

// ------------------------------------------------------------------------------ __libc_*

/// `__libc_malloc`: `malloc`.
#[no_mangle]
pub extern "C" fn __libc_malloc(size: usize) -> *mut c_void {
    malloc::malloc(size)
}

/// `__libc_free`: `free` (arena blocks included).
#[no_mangle]
pub extern "C" fn __libc_free(p: *mut c_void) {
    malloc::free(p)
}

/// `__libc_calloc`: `calloc`.
#[no_mangle]
pub extern "C" fn __libc_calloc(n: usize, size: usize) -> *mut c_void {
    malloc::calloc(n, size)
}

/// `__libc_realloc`: `realloc`.
#[no_mangle]
pub extern "C" fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    malloc::realloc(p, size)
}

/// `__libc_memalign`: `memalign`.
#[no_mangle]
pub extern "C" fn __libc_memalign(align: usize, size: usize) -> *mut c_void {
    malloc::memalign(align, size)
}

/// `__libc_valloc`: `valloc`.
#[no_mangle]
pub extern "C" fn __libc_valloc(size: usize) -> *mut c_void {
    malloc::valloc(size)
}

/// `__libc_pvalloc`: `pvalloc`.
#[no_mangle]
pub extern "C" fn __libc_pvalloc(size: usize) -> *mut c_void {
    malloc::pvalloc(size)
}
