//! `setrlimit` and `prlimit`: a program that lowers `RLIMIT_AS` (test harnesses, sandboxes and
//! judges do it at the start of `main`) after the library reserved its address space would find
//! every later mapping refused: thread stacks, glibc's large blocks. Before the limit is passed
//! on, the reservations give back what they hold beyond their budget under the new limit
//! (`resizealloc::reservation::fit_address_limit`, `resizealloc::slab::fit_address_limit`).
//! A limit lowered by the raw system call is seen at the library's next slow path that maps
//! address space instead.

use core::ffi::c_int;

use crate::malloc::set_errno;
use crate::real::NextFn;

static NEXT_SETRLIMIT: NextFn = NextFn::new(c"setrlimit");
static NEXT_SETRLIMIT64: NextFn = NextFn::new(c"setrlimit64");
static NEXT_PRLIMIT: NextFn = NextFn::new(c"prlimit");
static NEXT_PRLIMIT64: NextFn = NextFn::new(c"prlimit64");

type SetFn = unsafe extern "C" fn(c_int, *const libc::rlimit) -> c_int;
type PrFn =
    unsafe extern "C" fn(libc::pid_t, c_int, *const libc::rlimit, *mut libc::rlimit) -> c_int;

/// Gives back address space before `RLIMIT_AS` becomes `*rlim`'s soft limit.
///
/// # Safety
/// `rlim` is null or readable (the caller's contract with `setrlimit`).
unsafe fn before(resource: c_int, rlim: *const libc::rlimit) {
    if resource != libc::RLIMIT_AS as c_int || rlim.is_null() {
        return;
    }
    // SAFETY: the caller's obligation.
    let limit = unsafe { (*rlim).rlim_cur };
    resizealloc::reservation::fit_address_limit(Some(limit));
    resizealloc::slab::fit_address_limit(Some(limit));
}

/// Whether `pid` names this process (0 or its own pid).
fn this_process(pid: libc::pid_t) -> bool {
    // SAFETY: getpid has no preconditions.
    pid == 0 || pid == unsafe { libc::getpid() }
}

/// `setrlimit(2)`.
///
/// # Safety
/// As `setrlimit(2)`.
#[no_mangle]
pub unsafe extern "C" fn setrlimit(resource: c_int, rlim: *const libc::rlimit) -> c_int {
    // SAFETY: forwarded obligations.
    unsafe { set(&NEXT_SETRLIMIT, resource, rlim) }
}

/// `setrlimit64`: the same on 64-bit targets.
///
/// # Safety
/// As `setrlimit(2)`.
#[no_mangle]
pub unsafe extern "C" fn setrlimit64(resource: c_int, rlim: *const libc::rlimit) -> c_int {
    // SAFETY: forwarded obligations.
    unsafe { set(&NEXT_SETRLIMIT64, resource, rlim) }
}

/// # Safety
/// As `setrlimit(2)`.
unsafe fn set(next: &NextFn, resource: c_int, rlim: *const libc::rlimit) -> c_int {
    // SAFETY: forwarded obligations.
    unsafe { before(resource, rlim) };
    match next.get() {
        // SAFETY: the next object's function of this name, which has this signature.
        Some(f) => unsafe {
            core::mem::transmute::<*mut core::ffi::c_void, SetFn>(f)(resource, rlim)
        },
        None => {
            set_errno(libc::ENOSYS);
            -1
        }
    }
}

/// `prlimit(2)`.
///
/// # Safety
/// As `prlimit(2)`.
#[no_mangle]
pub unsafe extern "C" fn prlimit(
    pid: libc::pid_t,
    resource: c_int,
    new: *const libc::rlimit,
    old: *mut libc::rlimit,
) -> c_int {
    // SAFETY: forwarded obligations.
    unsafe { pr(&NEXT_PRLIMIT, pid, resource, new, old) }
}

/// `prlimit64`: the same on 64-bit targets.
///
/// # Safety
/// As `prlimit(2)`.
#[no_mangle]
pub unsafe extern "C" fn prlimit64(
    pid: libc::pid_t,
    resource: c_int,
    new: *const libc::rlimit,
    old: *mut libc::rlimit,
) -> c_int {
    // SAFETY: forwarded obligations.
    unsafe { pr(&NEXT_PRLIMIT64, pid, resource, new, old) }
}

/// # Safety
/// As `prlimit(2)`.
unsafe fn pr(
    next: &NextFn,
    pid: libc::pid_t,
    resource: c_int,
    new: *const libc::rlimit,
    old: *mut libc::rlimit,
) -> c_int {
    if this_process(pid) {
        // SAFETY: forwarded obligations.
        unsafe { before(resource, new) };
    }
    match next.get() {
        // SAFETY: the next object's function of this name, which has this signature.
        Some(f) => unsafe {
            core::mem::transmute::<*mut core::ffi::c_void, PrFn>(f)(pid, resource, new, old)
        },
        None => {
            set_errno(libc::ENOSYS);
            -1
        }
    }
}
