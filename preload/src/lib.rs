//! `libresizealloc.so`: run an unmodified, dynamically linked program as
//! `LD_PRELOAD=libresizealloc.so ./app` and its allocations inside regions go to the thread's
//! resize arena; everything else goes to the next allocator in the chain (glibc, or whatever
//! comes after us in `LD_PRELOAD`).
//!
//! Modules, each importing only from those below it:
//!
//! * `entry.rs`: the exports that take the caller's site (`calloc`, `realloc`, and `malloc`
//!   where it is not the assembly one), `cfree`, and the `free` every other module calls;
//! * `glibc_compat.rs`: glibc's extensions (`__libc_*`, `mallinfo2`, `malloc_trim`, reports);
//! * `realloc.rs`: the `realloc` family;
//! * `limits.rs`: `setrlimit` and `prlimit`, which give address space back before `RLIMIT_AS`
//!   falls;
//! * `entry_x86_64.rs`: all of the library's assembly: the `malloc` and `free` entry points,
//!   the site stubs, the `dlsym` override;
//! * `malloc.rs`: the Rust paths of the malloc family (and the Rust twin of `free`);
//! * `give_back.rs`: process mode's give-back of the next allocator's free memory;
//! * `real.rs`: finding the next allocator and its extensions, and the bootstrap buffer;
//! * `chain.rs`: whether a caller is an object after the library (the next allocator), for
//!   the `__libc_*` exports;
//! * `cxx.rs` (`heap-debug` build): C++'s sized deletes, which check the size they are given;
//! * `debug_heap.rs`: the `heap-debug` build's guards, poison and quarantine, in front of the
//!   paths of `malloc.rs` and `realloc.rs`;
//! * `capi.rs`: the C API of `include/resizealloc.h`;
//! * `report.rs`: stderr output without allocating;
//! * `cuda/`: the CUDA driver and runtime hooks in front of the device pools;
//! * this file: the constructor (options, exit summary, the `heap-debug` build's fork handlers;
//!   the device pools register theirs when the first pool is made).

#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

mod capi;
mod chain;
#[cfg(target_arch = "x86_64")]
mod cuda;
#[cfg(feature = "heap-debug")]
mod cxx;
mod debug_heap;
mod entry;
#[cfg(target_arch = "x86_64")]
mod entry_x86_64;
mod give_back;
mod glibc_compat;
mod limits;
mod malloc;
mod real;
mod realloc;
mod report;

use resizealloc::options;

/// Runs when the library is loaded, after libc is initialised: reads `RESIZEALLOC_*` (unless
/// the first allocation already did), installs the fork handlers and the exit summary.
extern "C" fn init() {
    let o = if resizealloc::region::options_ready() {
        options::get()
    } else {
        options::init_from_env()
    };
    if o.verbose {
        report::options_banner(&o);
    }
    // glibc gives `main_arena` to whichever thread calls its malloc first, counting it as the
    // main thread. When every allocation of the main thread goes to an arena (process mode), the
    // first may come from a worker, whose exit then detaches `main_arena` from under the threads
    // still using it ("malloc assertion failure in __malloc_arena_thread_freeres"). One call
    // here, on the main thread at load time, keeps glibc's count right.
    real::free(real::malloc(1));
    real::resolve_early();
    // Our entry points pass the caller's return address: regions may predict by site.
    resizealloc::lifetime::set_sites_known();
    // SAFETY: registering handlers with the right signatures; they never unwind.
    unsafe {
        resizealloc::fork::register_handlers();
        if cfg!(feature = "heap-debug") {
            libc::pthread_atfork(
                Some(debug_heap::fork_prepare),
                Some(debug_heap::fork_parent),
                Some(debug_heap::fork_child),
            );
        }
        if o.stats {
            libc::atexit(at_exit);
        }
        // The region advisor's report, when RESIZEALLOC_PROFILE asks for it.
        resizealloc::advisor::register();
        if cfg!(feature = "heap-debug") {
            libc::atexit(debug_heap::check_quarantine_at_exit);
        }
    }
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn at_exit() {
    report::stats_summary();
}
