//! Link flags of `libresizealloc.so`, and the `asm_entry_points` cfg.
//!
//! `-z nodelete`: the library registers a pthread key destructor (thread exit orphans the
//! thread's arena) and hands out memory that outlives any handle to it. A `dlclose` that
//! unmapped it would leave the destructor, and the arenas' blocks, pointing into nothing: the
//! next thread that exits after it would jump into unmapped code. With the flag, `dlclose`
//! succeeds and the library stays mapped until the process ends.
//!
//! `-soname libresizealloc.so.MAJOR`: what a program linked with `-lresizealloc` records and
//! loads at run time. A program run under `LD_PRELOAD` of another build of the library (same
//! SONAME) gets that one copy, not two.

//!
//! `asm_entry_points`: `malloc` and `free` are the assembly entry points of `src/malloc.rs`,
//! which read the core crate's initial-exec TLS block: on x86-64 Linux, unless the
//! `tls-thread-local` feature keeps the thread state in `thread_local!` (the core crate's
//! `region::STATE_IN_TLS_BLOCK`, asserted there) or the `heap-debug` build guards every block
//! (its `malloc` and `free` are the Rust ones, which hand each call to `debug_heap.rs`).

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    // The SONAME programs linked against the library record: one per major version
    // (scripts/install.sh makes libresizealloc.so.MAJOR point at the versioned file).
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libresizealloc.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(asm_entry_points)");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let tls_thread_local = std::env::var_os("CARGO_FEATURE_TLS_THREAD_LOCAL").is_some();
    let heap_debug = std::env::var_os("CARGO_FEATURE_HEAP_DEBUG").is_some();
    if arch == "x86_64" && os == "linux" && !tls_thread_local && !heap_debug {
        println!("cargo::rustc-cfg=asm_entry_points");
    }
}
