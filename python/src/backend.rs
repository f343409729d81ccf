//! Which regions `region()` marks.
//!
//! * **Preloaded**: `libresizealloc.so` serves this process's `malloc` (`LD_PRELOAD`). Then every
//!   allocation, NumPy's and Python's included, already goes through it, and the markers must be
//!   *its* markers: the extension calls `resize_region_begin`/`_end` through function pointers
//!   found once with `dlsym` (a native call, not ctypes).
//! * **Own**: otherwise the extension uses its own copy of the core crate (its own thread state
//!   and address-space reservation), and reaches allocations through NumPy's memory handler
//!   (`numpy_mem.rs`) and Python's raw-domain allocator (`rawmem.rs`).
//!
//! "Preloaded" means more than "the C API is in the process": the library that exports
//! `resize_region_begin` must also be the one that `malloc` resolves to. A library loaded with
//! `ctypes.CDLL` (not preloaded) exports the markers but serves nobody's `malloc`.

use core::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

use resizealloc::Stats;

/// The preloaded library's C API (see `preload/include/resizealloc.h`).
pub struct Preloaded {
    pub begin: unsafe extern "C" fn(),
    pub end: unsafe extern "C" fn() -> c_int,
    pub depth: unsafe extern "C" fn() -> c_int,
    pub stats_get: unsafe extern "C" fn(*mut Stats, usize) -> c_int,
    pub trim: unsafe extern "C" fn(),
    /// The library's file, as the dynamic loader names it.
    pub path: String,
}

static PRELOADED: OnceLock<Option<Preloaded>> = OnceLock::new();

/// The preloaded library, or `None` when the extension's own arenas serve regions. Decided once.
#[inline(always)]
pub fn preloaded() -> Option<&'static Preloaded> {
    PRELOADED.get_or_init(detect).as_ref()
}

fn sym(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads the loader's tables.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

/// `dladdr` of `p`: the base address and file name of the object that holds it.
fn object_of(p: *const c_void) -> Option<(usize, String)> {
    // SAFETY: Dl_info is plain data; all-zero is a valid value for dladdr to overwrite.
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    // SAFETY: `info` is a valid out pointer; dladdr only reads the loader's tables.
    if p.is_null() || unsafe { libc::dladdr(p, &mut info) } == 0 {
        return None;
    }
    let name = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
        unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned()
    };
    Some((info.dli_fbase as usize, name))
}

fn detect() -> Option<Preloaded> {
    if std::env::var_os("RESIZEALLOC_PY_IGNORE_PRELOAD").is_some_and(|v| v == "1") {
        // For tests and measurements: use the extension's own arenas even when preloaded.
        return None;
    }
    let begin = sym(c"resize_region_begin");
    let (lib_base, path) = object_of(begin)?;
    let (malloc_base, _) = object_of(sym(c"malloc"))?;
    if lib_base != malloc_base {
        return None;
    }
    let (end, depth, stats_get, trim) = (
        sym(c"resize_region_end"),
        sym(c"resize_region_depth"),
        sym(c"resize_stats_get"),
        sym(c"resize_trim"),
    );
    if end.is_null() || depth.is_null() || stats_get.is_null() || trim.is_null() {
        return None;
    }
    // SAFETY: these symbols are the C API of libresizealloc.so, whose signatures are those of
    // `preload/include/resizealloc.h`, which the field types repeat; the library is never
    // unloaded (it serves malloc, and is linked with -z nodelete).
    unsafe {
        Some(Preloaded {
            begin: core::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(begin),
            end: core::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(end),
            depth: core::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(depth),
            stats_get: core::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut Stats, usize) -> c_int,
            >(stats_get),
            trim: core::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(trim),
            path,
        })
    }
}
