//! The `heap-debug` build's C++ sized deletes, `operator delete(void *, size_t)` and
//! `operator delete[](void *, size_t)`, which check the size: compilers pass the size the
//! object was allocated with (C++14 and later), so another size is a delete of the wrong type
//! or of a pointer that is no `new`'s. Such a delete aborts with one line naming the block;
//! glibc's (libstdc++'s, which ignore the size) frees it. The release build leaves these names
//! to the C++ runtime: a check there would cost every `delete` a look at the block's size.
//!
//! Each one then does what the C++ runtime's does: it calls the unsized delete, found in the
//! process's global scope, so that a program that replaces `operator delete(void *)` keeps its
//! own. The size is checked only when that unsized delete is the C++ runtime's own (which
//! calls `free`): a replaced `operator new` may hand out pointers that are no `malloc` block's
//! start, and their size means nothing to the heaps.

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

/// An unsized delete, looked up by name on first use.
struct Unsized {
    name: &'static core::ffi::CStr,
    /// 0: not looked up; `FREE`: none in the process, or the C++ runtime's (which only calls
    /// `free`); otherwise the address of a replacement.
    addr: AtomicUsize,
}

/// What [`Unsized::addr`] holds when deleting is `free` with the size checked.
const FREE: usize = 1;

static DELETE: Unsized = Unsized {
    name: c"_ZdlPv",
    addr: AtomicUsize::new(0),
};
static DELETE_ARRAY: Unsized = Unsized {
    name: c"_ZdaPv",
    addr: AtomicUsize::new(0),
};

impl Unsized {
    /// The replacement's address, or `None` when the delete is `free` (checked).
    fn replacement(&self) -> Option<unsafe extern "C" fn(*mut c_void)> {
        let mut a = self.addr.load(Ordering::Acquire);
        if a == 0 {
            a = look_up(self.name);
            self.addr.store(a, Ordering::Release);
        }
        // SAFETY: any value but `FREE` is the address of a function with this C++ signature.
        (a != FREE)
            .then(|| unsafe { core::mem::transmute::<usize, unsafe extern "C" fn(*mut c_void)>(a) })
    }
}

/// The first definition of `name` in the global scope, or [`FREE`] when there is none or it
/// lies in the C++ runtime (libstdc++ or libc++). Two threads may both look; they agree.
#[cold]
#[inline(never)]
fn look_up(name: &core::ffi::CStr) -> usize {
    // SAFETY: a lookup of a NUL-terminated name; made outside the allocator's internals (`dlsym`
    // may allocate through the library, which is fine here).
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    if f.is_null() {
        return FREE;
    }
    // SAFETY: `info` is written by `dladdr`; `dli_fname` is a NUL-terminated path when it
    // returns nonzero.
    let file = unsafe {
        let mut info: libc::Dl_info = core::mem::zeroed();
        if libc::dladdr(f, &mut info) == 0 || info.dli_fname.is_null() {
            return f as usize;
        }
        core::ffi::CStr::from_ptr(info.dli_fname as *const c_char).to_bytes()
    };
    let base = file.rsplit(|&c| c == b'/').next().unwrap_or(file);
    if base.starts_with(b"libstdc++.so") || base.starts_with(b"libc++.so") {
        FREE
    } else {
        f as usize
    }
}

fn sized_delete(p: *mut c_void, size: usize, plain: &Unsized) {
    match plain.replacement() {
        // SAFETY: the program's own unsized delete, given what the program gave us.
        Some(replacement) => unsafe { replacement(p) },
        None => crate::debug_heap::sized_free(p, size),
    }
}

/// `operator delete(void *, std::size_t)`.
#[no_mangle]
pub extern "C" fn _ZdlPvm(p: *mut c_void, size: usize) {
    sized_delete(p, size, &DELETE)
}

/// `operator delete[](void *, std::size_t)`.
#[no_mangle]
pub extern "C" fn _ZdaPvm(p: *mut c_void, size: usize) {
    sized_delete(p, size, &DELETE_ARRAY)
}
