//! The exported entry points that take the caller's return address (the lifetime predictor's
//! allocation site), `free`, and the Rust twins of the assembly paths of `entry_x86_64.rs`:
//! `malloc` and `free` are the assembly ones on x86-64 Linux with the core crate's TLS block,
//! these elsewhere (and in the `tls-thread-local` build, which `scripts/test.sh` runs the preload
//! tests against on x86-64 too).

use core::ffi::c_void;

use crate::malloc::calloc_at;
#[cfg(not(asm_entry_points))]
use crate::malloc::malloc_at;
use crate::realloc::realloc_at;

// The allocation site for the lifetime predictor (lifetime.rs) is the return address of the
// program's call: on x86-64 `malloc`, `calloc` and `realloc` are naked stubs that load it from
// the stack into the next argument register and jump to the real entry point (two
// instructions, `entry_x86_64.rs`); elsewhere the site is 0.
#[cfg(target_arch = "x86_64")]
pub(crate) use crate::entry_x86_64::with_site;
#[cfg(not(target_arch = "x86_64"))]
macro_rules! with_site {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) => $imp:path, $reg:literal) => {
        $(#[$doc])*
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> *mut c_void {
            $imp($($arg,)* 0)
        }
    };
}
#[cfg(not(target_arch = "x86_64"))]
pub(crate) use with_site;

#[cfg(not(asm_entry_points))]
with_site! {
    /// `malloc(3)`. The inlined fast path calls nothing; everything else is one call.
    fn malloc(size: usize) => malloc_at, "rsi"
}

#[cfg(asm_entry_points)]
pub(crate) use crate::entry_x86_64::free;
#[cfg(not(asm_entry_points))]
pub(crate) use crate::malloc::free;

/// `cfree`, the old alias of `free`.
#[no_mangle]
pub extern "C" fn cfree(p: *mut c_void) {
    free(p)
}

with_site! {
    /// `calloc(3)`: `n * size` overflow gives NULL with `ENOMEM`.
    fn calloc(n: usize, size: usize) => calloc_at, "rdx"
}

with_site! {
    /// `realloc(3)`.
    fn realloc(p: *mut c_void, size: usize) => realloc_at, "rdx"
}
