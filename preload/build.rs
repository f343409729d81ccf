//! Link flags of `libresizealloc.so`.
//!
//! `-z nodelete`: the library registers a pthread key destructor (thread exit orphans the
//! thread's arena) and hands out memory that outlives any handle to it. A `dlclose` that
//! unmapped it would leave the destructor, and the arenas' blocks, pointing into nothing: the
//! next thread that exits after it would jump into unmapped code. With the flag, `dlclose`
//! succeeds and the library stays mapped until the process ends.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}
