//! The exported malloc family, with glibc's semantics: 16-byte alignment, `errno` as glibc sets
//! it, `realloc(p, 0)` frees and returns NULL, bad alignments give `EINVAL`.
//!
//! Each entry point asks the router first (the thread's arena, inside a region) and otherwise
//! calls the next allocator. A pointer is an arena block exactly when it lies in the arena
//! reservation: one range check in `free`, `realloc` and `malloc_usable_size`. Nothing here
//! panics or allocates through itself.

use core::ffi::{c_int, c_void};
use core::ptr;

use resizealloc::arena::Predicted;
use resizealloc::router;

use crate::real;

const MIN_ALIGN: usize = 16;
const PAGE: usize = 4096;

#[inline(always)]
fn set_errno(e: c_int) {
    // SAFETY: glibc's errno location is always valid for the calling thread.
    unsafe { *libc::__errno_location() = e };
}

#[inline(always)]
fn arena_alloc(size: usize, align: usize) -> *mut c_void {
    // SAFETY: size is at least 1 and align a power of two (callers check).
    unsafe { router::alloc(size.max(1), align) as *mut c_void }
}

// The allocation site for the lifetime predictor (lifetime.rs) is the return address of the
// program's call: `malloc`, `calloc` and `realloc` are naked stubs that load it from the stack
// into the next argument register and jump to the real entry point (two instructions).
#[cfg(target_arch = "x86_64")]
macro_rules! with_site {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) => $imp:path, $reg:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As the C function.
        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> *mut c_void {
            core::arch::naked_asm!(
                concat!("mov ", $reg, ", qword ptr [rsp]"),
                "jmp {imp}",
                imp = sym $imp,
            )
        }
    };
}
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

pub(crate) use with_site;

#[cfg(not(asm_entry_points))]
with_site! {
    /// `malloc(3)`. The inlined fast path calls nothing; everything else is one call.
    fn malloc(size: usize) => malloc_at, "rsi"
}

/// The assembly `malloc` entry point and the two functions it jumps to (x86-64 Linux, with the
/// core crate's thread state in its initial-exec TLS block).
#[cfg(asm_entry_points)]
mod entry {
    use core::ffi::c_void;

    use resizealloc::arena::{self, asm_layout};

    use super::{malloc_predicted, malloc_slow};

    // The assembly `malloc` below reads the core crate's TLS block, which exists only when the core
    // crate is built without its `tls-thread-local` feature. Cargo can enable that feature on the
    // core crate alone (`--features resizealloc/tls-thread-local`, or another crate in the build):
    // the library then linked with the block undefined and failed to load. Now it does not build.
    const _: () = assert!(
        resizealloc::region::STATE_IN_TLS_BLOCK,
        "the core crate keeps its thread state in `thread_local!`: build resizealloc-preload with \
         its own `tls-thread-local` feature"
    );

    /// `malloc(3)`. It loads the thread's `active` value itself (the initial-exec TLS load of
    /// region.rs) and dispatches on it:
    ///
    /// * a thread in a region (`active` is its arena) gets its block right here, in assembly:
    ///   [`Arena::try_alloc_fast_small`] for a block under a page, with no taken branch,
    ///   [`Arena::try_alloc_fast_aligned`] at a cache line's alignment for a larger one, and
    ///   `Arena::bump` (the offsets and tags come from [`asm_layout`]). Each taken branch on the
    ///   way from `malloc` into a Rust function cost the Bumper loop about 3 % (BENCHMARKS.md,
    ///   eleventh session). A full run, 0 bytes or a size beyond any arena go to
    ///   [`malloc_slow`] (it reads no site for a thread in a region, so the second argument
    ///   register holds whatever the program left there);
    /// * a thread outside regions whose mode is known (`SETTLED`) jumps straight to the next
    ///   allocator's `malloc` (seven instructions, two taken branches);
    /// * the rest (first use, process mode) go to [`malloc_unsettled`], with the site (the
    ///   return address) in the second argument register. Only that path uses a site: an
    ///   arena's slow path needs none, so the others do not load it.
    ///
    /// [`Arena::try_alloc_fast_small`]: resizealloc::arena::Arena::try_alloc_fast_small
    /// [`Arena::try_alloc_fast_aligned`]: resizealloc::arena::Arena::try_alloc_fast_aligned
    ///
    /// # Safety
    /// As the C function.
    #[unsafe(naked)]
    #[no_mangle]
    pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
        core::arch::naked_asm!(
            ".p2align 6",
            "mov rax, qword ptr [rip + resizealloc_thread_state@GOTTPOFF]",
            "mov rdx, qword ptr fs:[rax]",
            "cmp rdx, {predict}",
            "jbe 3f",
            // In a region; rdx = the arena. `size - 1` above the small path's: 0 bytes, or a
            // page or more (below, at label 4).
            "lea rax, [rdi - 1]",
            "cmp rax, {small_max}",
            "ja 4f",
            // rcx = top (the header goes there), r8 = the new top: the block's end rounded up to
            // 16 (`limit` is 16-byte aligned, so testing it is testing the end).
            "mov rcx, qword ptr [rdx + {top}]",
            "lea r8, [rdi + rcx + {end_rounding}]",
            "and r8, -{min_align}",
            "cmp r8, qword ptr [rdx + {limit}]",
            "ja {slow}",
            // `bump`: the block, the new top, the header word (size and live tag), the link
            // (the old `below_top`), `below_top` = this header, and the region's count.
            "lea rax, [rcx + {header}]",
            "mov qword ptr [rdx + {top}], r8",
            "shl rdi, {tag_shift}",
            "or rdi, {tag_live}",
            "mov qword ptr [rcx], rdi",
            "mov rsi, qword ptr [rdx + {below_top}]",
            "mov qword ptr [rcx + {link}], rsi",
            "mov qword ptr [rdx + {below_top}], rcx",
            "inc qword ptr [rdx + {region_allocs}]",
            "ret",
            // A page or more: `try_alloc_fast_aligned` at a cache line's alignment. 0 bytes, or
            // more than an arena holds (`size - 1` has a bit at or above `MAX_SLOT`'s): the slow
            // path.
            "4:",
            "shr rax, {max_slot_shift}",
            "jnz {slow}",
            // rcx = top, rax = the block (the first cache line with room for the header in
            // front), r8 = the new top.
            "mov rcx, qword ptr [rdx + {top}]",
            "lea rax, [rcx + {line_rounding}]",
            "and rax, -{line}",
            "lea r8, [rdi + rax + {min_align} - 1]",
            "and r8, -{min_align}",
            "cmp r8, qword ptr [rdx + {limit}]",
            "ja {slow}",
            // rsi = the header; padding in front of it gets a gap header (label 6).
            "lea rsi, [rax - {header}]",
            "cmp rsi, rcx",
            "jne 6f",
            // `bump` again, for a header in rsi: with one copy, one of the two paths would take a
            // branch to it.
            "5:",
            "mov qword ptr [rdx + {top}], r8",
            "shl rdi, {tag_shift}",
            "or rdi, {tag_live}",
            "mov qword ptr [rsi], rdi",
            "mov rcx, qword ptr [rdx + {below_top}]",
            "mov qword ptr [rsi + {link}], rcx",
            "mov qword ptr [rdx + {below_top}], rsi",
            "inc qword ptr [rdx + {region_allocs}]",
            "ret",
            // `[top, header)`: a gap header, so that a walk of the uncounted range steps over it.
            "6:",
            "mov r9, rsi",
            "sub r9, rcx",
            "shl r9, {tag_shift}",
            "or r9, {tag_gap}",
            "mov qword ptr [rcx], r9",
            "jmp 5b",
            "3:",
            "cmp rdx, {settled}",
            "jne 2f",
            // `real::MALLOC` always holds a callable `malloc` (the next object's, or the resolver).
            "jmp qword ptr [rip + {next}]",
            "2:",
            "mov rsi, qword ptr [rsp]",
            "jmp {unsettled}",
            predict = const resizealloc::region::PREDICT_BITS,
            settled = const resizealloc::region::SETTLED_BITS,
            // `is_small_request`: `size - 1` at most a page less two (0 wraps past it).
            small_max = const arena::LINE_ALIGN_FROM - 2,
            top = const asm_layout::TOP,
            limit = const asm_layout::LIMIT,
            below_top = const asm_layout::BELOW_TOP,
            region_allocs = const asm_layout::REGION_ALLOCS,
            // The header, then the end rounded up to `MIN_ALIGN`.
            end_rounding = const arena::HEADER + arena::MIN_ALIGN - 1,
            header = const arena::HEADER,
            link = const asm_layout::LINK,
            tag_shift = const arena::TAG_BITS,
            tag_live = const arena::TAG_LIVE,
            tag_gap = const arena::TAG_GAP,
            // `(size - 1) >> max_slot_shift != 0`: 0 bytes, or more than an arena holds.
            max_slot_shift = const arena::MAX_SLOT.trailing_zeros(),
            // The first cache line with room for the header in front (`block_align`).
            line_rounding = const arena::HEADER + arena::LINE - 1,
            line = const arena::LINE,
            min_align = const arena::MIN_ALIGN,
            slow = sym malloc_slow,
            unsettled = sym malloc_unsettled,
            next = sym crate::real::MALLOC,
        )
    }

    /// `malloc` outside regions for a thread that is not `SETTLED`: not routed yet (`active` null),
    /// or through the predictor (`PREDICT`).
    extern "C" fn malloc_unsettled(
        size: usize,
        site: usize,
        active: *const resizealloc::arena::Arena,
    ) -> *mut c_void {
        if active.is_null() {
            return malloc_slow(size, site);
        }
        malloc_predicted(size.max(1), site)
    }
}

/// `malloc` for a caller at `site`.
pub(crate) extern "C" fn malloc_at(size: usize, site: usize) -> *mut c_void {
    match router::route() {
        router::Route::Arena(a) => malloc_in(size, site, a),
        router::Route::Next => real::malloc(size),
        router::Route::Check => malloc_slow(size, site),
        router::Route::Predict => malloc_predicted(size.max(1), site),
    }
}

/// `malloc` from `a`, the calling thread's active arena: its fast path, else the slow path.
///
/// It needs no site: an active arena's slow path takes every request (`router::alloc_slow_at`
/// reads the site only for a thread with no active arena). So `site` may be anything (the entry
/// point passes whatever the program left in that register): it is passed on to the slow path
/// unread, where a constant cost an instruction, and a dropped argument made the compiler move
/// `a` out of the third register, where the entry point put it.
///
/// A block under a page is served inline; anything else is one jump to
/// [`malloc_in_aligned`]: in one function the compiler joined the two paths at their common
/// tail, and the small one then jumped to it.
#[inline(always)]
fn malloc_in(size: usize, site: usize, a: *const resizealloc::arena::Arena) -> *mut c_void {
    if resizealloc::arena::is_small_request(size) {
        // SAFETY: the thread's own active arena; `size` is 1 to a page less one.
        let p = unsafe { (*a).try_alloc_fast_small(size) };
        if !p.is_null() {
            return p as *mut c_void;
        }
        return malloc_slow(size, site);
    }
    malloc_in_aligned(size, site, a)
}

/// [`malloc_in`] for a block of a page or more, or of 0 bytes (declined, then served by the
/// slow path).
#[inline(never)]
fn malloc_in_aligned(size: usize, site: usize, a: *const resizealloc::arena::Arena) -> *mut c_void {
    // A page or more starts on a cache line (`block_align`): asking for that alignment says so
    // as a constant, where `MIN_ALIGN` would leave the compiler to pick it by size.
    // SAFETY: the thread's own active arena; LINE is a power of two; a size of 0 is declined.
    let p = unsafe { (*a).try_alloc_fast_aligned(size, resizealloc::arena::LINE) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    malloc_slow(size, site)
}

/// `malloc` past the fast paths. `site` is the program's return address, read only when the
/// thread has no active arena (`router::alloc_slow_at`); with one it may be anything.
/// `extern "C"`: `malloc`'s assembly entry point jumps to it.
#[cold]
#[inline(never)]
extern "C" fn malloc_slow(size: usize, site: usize) -> *mut c_void {
    let p = router::alloc_slow_at(size.max(1), MIN_ALIGN, site);
    if !p.is_null() {
        return p as *mut c_void;
    }
    real::malloc(size)
}

/// Process mode (and regions that leave blocks behind): the predictor picks the side. The
/// common cases call nothing (so need no stack frame); the rest is one tail call. `size >= 1`.
#[inline(never)]
fn malloc_predicted(size: usize, site: usize) -> *mut c_void {
    // The thread's state once, for the predictor and the small-block heap's cache.
    let ts = resizealloc::region::state();
    // SAFETY: size at least 1 (the caller's obligation); `ts` is the calling thread's.
    match unsafe { router::try_alloc_predicted_fast(ts, size, site) } {
        Predicted::Block(p) => p as *mut c_void,
        Predicted::Small => malloc_small(ts, size),
        // The arena answers `Small` for everything the small-block heap would take, so this is
        // the next allocator's (markers mode's predicting regions, large requests).
        Predicted::Next => real::malloc(size),
        Predicted::General => malloc_predicted_general(size, site),
    }
}

/// A small request in process mode: the thread's cache of its class in the small-block heap,
/// else one tail call to the rest of the heap (and the next allocator when the heap has no
/// memory).
#[inline(always)]
fn malloc_small(ts: &resizealloc::region::ThreadState, size: usize) -> *mut c_void {
    // Small requests never take the predictor's general path, where a pending give-back
    // otherwise runs: a program that goes on with small blocks only after freeing a phase to
    // the next allocator runs it here (one load while none is pending).
    if crate::glibc_compat::give_back_pending() {
        return malloc_small_uncached(size);
    }
    let p = router::alloc_small_cached(ts, size);
    if !p.is_null() {
        return p as *mut c_void;
    }
    malloc_small_uncached(size)
}

/// [`malloc_small`] past the thread's cache: a pending give-back, then the rest of the
/// routed-away path (the class's page, a new page or the thread's first heap, else the next
/// allocator), out of line so that [`malloc_predicted`] needs no stack frame for it.
#[inline(never)]
fn malloc_small_uncached(size: usize) -> *mut c_void {
    crate::glibc_compat::run_pending_give_back();
    malloc_routed_away(size)
}

/// A block the predictor sent away from the arena: in process mode the small-block heap for
/// small requests, the next allocator for the rest (or when the heap has no memory).
#[inline(always)]
fn malloc_routed_away(size: usize) -> *mut c_void {
    let p = router::alloc_routed_away(size.max(1));
    if !p.is_null() {
        return p as *mut c_void;
    }
    real::malloc(size)
}

/// Everything [`malloc_predicted`]'s fast path left: sampling, probes, the sweep, the arena's
/// slow path; the next allocator when the arena declines.
#[inline(never)]
fn malloc_predicted_general(size: usize, site: usize) -> *mut c_void {
    // Every process-mode allocation stream passes here within a few thousand allocations
    // (samples of short sites, probes of long ones), wherever its blocks go: a pending
    // give-back runs soon after allocation resumes, off the paths every allocation takes.
    crate::glibc_compat::run_pending_give_back();
    // SAFETY: size at least 1, MIN_ALIGN a power of two.
    let p = unsafe { router::alloc_predicted_general(size.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    malloc_routed_away(size)
}

/// `free(3)`, in assembly:
///
/// * a pointer of the next allocator (outside regions nearly all of them): the range check and
///   the watch test, then the next allocator's `free` (eight instructions, two taken branches);
/// * the owner's free of the last block it handed out (LIFO), not counted yet and with nothing
///   freed below it: right here, with no taken branch (the LIFO branch of
///   [`Arena::try_free_local_fast`] and `Arena::release_top`, with the offsets and tags of
///   [`asm_layout`](resizealloc::arena::asm_layout)). Why: each taken branch on the way into a
///   Rust function cost the Bumper loop about 3 % (BENCHMARKS.md, eleventh session);
/// * every other arena block goes to [`free_arena_block_other`], watched foreign pointers to
///   [`free_foreign_watched`].
///
/// The LIFO path tests the link's word before it changes anything: when the block below was
/// freed by its owner already (the release goes on down) or the link is `POISON_LINK` (another
/// thread freed this block: a double free), it leaves the rest to [`free_arena_block_last`].
///
/// The reservation's length is loaded before its base, as `reservation::owns` does (it is
/// published last; x86 keeps loads in program order).
///
/// [`Arena::try_free_local_fast`]: resizealloc::arena::Arena::try_free_local_fast
#[cfg(asm_entry_points)]
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn free(p: *mut c_void) {
    use resizealloc::arena::{self, asm_layout};
    core::arch::naked_asm!(
        ".p2align 6",
        "mov rax, qword ptr [rip + {len}]",
        "mov rcx, rdi",
        "sub rcx, qword ptr [rip + {base}]",
        "cmp rcx, rax",
        "jae 3f",
        // An arena block. rsi = the thread's own arena, or `region::NO_ARENA` (never null).
        "mov rax, qword ptr [rip + resizealloc_thread_state@GOTTPOFF]",
        "mov rsi, qword ptr fs:[rax + {free_arena}]",
        // `is_last_uncounted`: the header (rax) is `below_top`, and not below `uncounted`.
        // Any other block (and any block when rsi is `NO_ARENA`, whose `below_top` is 1): the
        // rest of the fast path, with the arena in rsi.
        "lea rax, [rdi - {header}]",
        "cmp rax, qword ptr [rsi + {below_top}]",
        "jne {other}",
        "cmp rax, qword ptr [rsi + {uncounted}]",
        "jb {other}",
        // rcx = the link; its word's low byte says whether the release would go on down (or
        // that another thread freed this block): then `free_last_uncounted` does it all.
        "mov rcx, qword ptr [rax + {link}]",
        "cmp byte ptr [rcx], {freed_byte}",
        "je {last}",
        // The tag says freed (double frees), the peak is noted, the bump pointer goes back to
        // the header and `below_top` to the link.
        "mov word ptr [rax], {freed_half}",
        "mov rdx, qword ptr [rsi + {top}]",
        "cmp rdx, qword ptr [rsi + {peak_top}]",
        "ja 5f",
        "2:",
        "mov qword ptr [rsi + {top}], rax",
        "mov qword ptr [rsi + {below_top}], rcx",
        "ret",
        "5:",
        "mov qword ptr [rsi + {peak_top}], rdx",
        "jmp 2b",
        "3:",
        "cmp byte ptr [rip + {watch}], 0",
        "jne {watched}",
        // `real::FREE` always holds a callable `free` (the next object's, or the resolver); no
        // bootstrap block exists while the watch flags are clear (`WATCH_FRONT_END`).
        "jmp qword ptr [rip + {next}]",
        len = sym resizealloc::reservation::LEN,
        base = sym resizealloc::reservation::BASE,
        watch = sym resizealloc::mode::FOREIGN_WATCH,
        free_arena = const resizealloc::region::FREE_ARENA_OFFSET,
        header = const arena::HEADER,
        link = const asm_layout::LINK,
        top = const asm_layout::TOP,
        uncounted = const asm_layout::UNCOUNTED,
        below_top = const asm_layout::BELOW_TOP,
        peak_top = const asm_layout::PEAK_TOP,
        freed_byte = const arena::TAG_FREED as u8,
        freed_half = const arena::TAG_FREED as u16,
        last = sym free_arena_block_last,
        other = sym free_arena_block_other,
        watched = sym free_foreign_watched,
        next = sym real::FREE,
    )
}

/// The LIFO free whose release goes on down below the block (or aborts on a poisoned link):
/// `own` is the thread's own arena and the entry point found `p`'s header at its `below_top`,
/// not below `uncounted`.
#[cfg(asm_entry_points)]
extern "C" fn free_arena_block_last(p: *mut c_void, own: *const resizealloc::arena::Arena) {
    // SAFETY: `own` is this thread's own arena (`NO_ARENA`'s `below_top` matches no header) and
    // the entry point tested `is_last_uncounted` of `p`'s header.
    unsafe { (*own).free_last_uncounted(p as *mut u8) }
}

/// `free` of an arena block that the assembly entry point did not free inline: `own` is the
/// thread's own arena ([`Arena::try_free_local_other`], else the slow path), or
/// `region::NO_ARENA` when it has none (the slow path: another thread's block).
///
/// [`Arena::try_free_local_other`]: resizealloc::arena::Arena::try_free_local_other
#[cfg(asm_entry_points)]
extern "C" fn free_arena_block_other(p: *mut c_void, own: *const resizealloc::arena::Arena) {
    if ptr::eq(own, resizealloc::region::no_arena()) {
        return free_slow(p);
    }
    // SAFETY: `own` is this thread's own arena, alive while it runs (the entry point read it
    // from the thread's state); `p` lies in the reservation, so it is an arena block (or the
    // program's bug, which the fast path's checks send to the slow path).
    if !unsafe { (*own).try_free_local_other(p as *mut u8) } {
        free_slow(p);
    }
}

/// `free` of a pointer in the arena reservation: the owner's blocks inline, the rest one cold
/// call. (The assembly `free` makes these tests itself.)
#[cfg(not(asm_entry_points))]
#[inline(always)]
fn free_arena_block(p: *mut c_void) {
    // SAFETY: `p` is in the reservation, so it is an arena block (or the program's bug).
    if !unsafe { router::free_fast(p as *mut u8) } {
        free_slow(p);
    }
}

/// `free(3)`. The owner thread's single-granule blocks are freed inline; everything else is
/// one cold call.
#[cfg(not(asm_entry_points))]
#[no_mangle]
pub extern "C" fn free(p: *mut c_void) {
    // Foreign pointers first: outside regions they are nearly all of them, and one range check
    // and one flag send them on (the next allocator takes NULL too).
    if !router::owns(p as *mut u8) {
        if router::foreign_frees_watched() {
            return free_foreign_watched(p);
        }
        // SAFETY: not ours, and no bootstrap block was ever handed out (the flag says so).
        return unsafe { real::free_next(p) };
    }
    free_arena_block(p)
}

/// A free of a pointer outside the arena while frees to the next allocator are watched:
/// small-block heap blocks go back to it, bootstrap blocks stay, process mode samples. Not
/// cold: in process mode it is the common free.
#[inline(never)]
extern "C" fn free_foreign_watched(p: *mut c_void) {
    if router::owns_small(p as *mut u8) {
        // SAFETY: a block of the small-block heap that the program frees.
        return unsafe { router::free_small(p as *mut u8) };
    }
    if p.is_null() || real::is_boot(p) {
        return;
    }
    if router::note_next_free() {
        crate::glibc_compat::sample_next_free(p);
    }
    // SAFETY: not ours, not a bootstrap block.
    unsafe { real::free_next(p) }
}

/// An arena block the inlined fast path did not take: another thread's, sampled, or invalid
/// (which aborts).
#[cold]
#[inline(never)]
fn free_slow(p: *mut c_void) {
    // SAFETY: `free` found `p` in the reservation: an arena block the program frees (double
    // frees are detected and abort).
    unsafe { router::free_owned(p as *mut u8) };
}

/// `cfree`, the old alias of `free`.
#[no_mangle]
pub extern "C" fn cfree(p: *mut c_void) {
    free(p)
}

with_site! {
    /// `calloc(3)`: `n * size` overflow gives NULL with `ENOMEM`.
    fn calloc(n: usize, size: usize) => calloc_at, "rdx"
}

pub(crate) extern "C" fn calloc_at(n: usize, size: usize, site: usize) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        return calloc_overflow();
    };
    match router::route() {
        router::Route::Arena(a) => {
            // SAFETY: the thread's own active arena (a size of 0 is declined, and served by
            // the slow path).
            let p = unsafe { (*a).try_alloc_zeroed_fast(total) };
            if !p.is_null() {
                return p as *mut c_void;
            }
            calloc_slow(n, size, total, site)
        }
        router::Route::Next => real::calloc(n, size),
        router::Route::Predict => calloc_predicted(n, size, total, site),
        router::Route::Check => calloc_slow(n, size, total, site),
    }
}

/// `calloc` whose `n * size` overflows: NULL with `ENOMEM`. Out of line: the call that finds
/// `errno` made every `calloc` save and restore three registers.
#[cold]
#[inline(never)]
fn calloc_overflow() -> *mut c_void {
    set_errno(libc::ENOMEM);
    ptr::null_mut()
}

/// `calloc` through the predictor: the arena, else the small-block heap (cleared here), else
/// the next allocator.
#[inline(never)]
fn calloc_predicted(n: usize, size: usize, total: usize, site: usize) -> *mut c_void {
    // SAFETY: size at least 1, MIN_ALIGN a power of two.
    let p = unsafe { router::alloc_zeroed(total.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    let p = router::alloc_routed_away(total.max(1));
    if !p.is_null() {
        // SAFETY: a fresh block of at least `total` bytes.
        unsafe { ptr::write_bytes(p, 0, total) };
        return p as *mut c_void;
    }
    real::calloc(n, size)
}

#[inline(never)]
fn calloc_slow(n: usize, size: usize, total: usize, site: usize) -> *mut c_void {
    // SAFETY: size at least 1, MIN_ALIGN a power of two. The arena clears the block unless its
    // memory is known to be fresh from the kernel.
    let p = unsafe { router::alloc_zeroed(total.max(1), MIN_ALIGN, site) };
    if !p.is_null() {
        return p as *mut c_void;
    }
    real::calloc(n, size)
}

with_site! {
    /// `realloc(3)`.
    fn realloc(p: *mut c_void, size: usize) => realloc_at, "rdx"
}

pub(crate) extern "C" fn realloc_at(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    if p.is_null() {
        return malloc_at(size, site);
    }
    if size == 0 {
        return realloc_to_zero(p);
    }
    if let router::Route::Arena(a) = router::route() {
        // SAFETY: the thread's own active arena; `p` is a live block (the caller's contract)
        // and size >= 1.
        if unsafe { (*a).try_resize_last(p as *mut u8, size) } {
            return p;
        }
    }
    realloc_moving(p, size, site)
}

/// `realloc(p, 0)`: frees `p` and returns NULL (glibc's behaviour). Out of line, as is
/// [`realloc_moving`], so that `realloc_at`'s in-place path makes no call and needs no stack
/// frame (it saved and restored five registers on every call).
#[cold]
#[inline(never)]
fn realloc_to_zero(p: *mut c_void) -> *mut c_void {
    free(p);
    ptr::null_mut()
}

/// `realloc` of a non-null `p` to `size >= 1` where the arena's in-place path did not serve it:
/// a move, or the small-block heap's or the next allocator's `realloc`.
#[inline(never)]
fn realloc_moving(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    if router::owns(p as *mut u8) {
        // SAFETY: a live arena block; size >= 1; MIN_ALIGN is a power of two.
        let q = unsafe {
            router::realloc_owned(p as *mut u8, size, MIN_ALIGN, site, |s, _| {
                real::malloc(s) as *mut u8
            })
        };
        if q.is_null() {
            set_errno(libc::ENOMEM);
        }
        return q as *mut c_void;
    }
    if router::owns_small(p as *mut u8) {
        return realloc_small(p, size, site);
    }
    if real::is_boot(p) {
        let q = malloc_at(size, site);
        if !q.is_null() {
            // SAFETY: both blocks are live and at least `min(old, size)` long.
            unsafe {
                ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, real::boot_size(p).min(size))
            };
        }
        return q;
    }
    real::realloc(p, size)
}

/// `realloc` of a small-block heap block (`router::realloc_small`), moved to wherever `malloc`
/// sends the new size.
fn realloc_small(p: *mut c_void, size: usize, site: usize) -> *mut c_void {
    // SAFETY: a live small-block heap block the program gives up on success (the caller's
    // contract); `malloc_at` returns null or a fresh block.
    let q = unsafe { router::realloc_small(p as *mut u8, size, |n| malloc_at(n, site) as *mut u8) };
    if q.is_null() {
        set_errno(libc::ENOMEM);
    }
    q as *mut c_void
}

/// `reallocarray(3)`: overflow gives NULL with `ENOMEM` and leaves `p` alone.
#[no_mangle]
pub extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) => realloc_at(p, total, 0),
        None => {
            set_errno(libc::ENOMEM);
            ptr::null_mut()
        }
    }
}

/// Aligned allocation shared by every aligned entry point; `align` is a power of two.
fn aligned(align: usize, size: usize) -> *mut c_void {
    let align = align.max(MIN_ALIGN);
    let p = arena_alloc(size, align);
    if !p.is_null() {
        return p;
    }
    real::memalign(align, size)
}

/// `posix_memalign(3)`: returns `EINVAL` unless `align` is a power of two multiple of
/// `sizeof(void *)`, `ENOMEM` when no memory; `errno` is left alone, as glibc does.
#[no_mangle]
pub extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if out.is_null() {
        return libc::EINVAL;
    }
    if !align.is_power_of_two() || align % core::mem::size_of::<usize>() != 0 {
        return libc::EINVAL;
    }
    let saved = errno();
    let p = aligned(align, size);
    if p.is_null() {
        set_errno(saved);
        return libc::ENOMEM;
    }
    // SAFETY: `out` is non-null and points to writable storage (the caller's contract).
    unsafe { *out = p };
    0
}

fn errno() -> c_int {
    // SAFETY: see set_errno.
    unsafe { *libc::__errno_location() }
}

/// `aligned_alloc(3)` (C11): a non-power-of-two alignment gives NULL with `EINVAL`.
#[no_mangle]
pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(align, size)
}

/// `memalign(3)`: like glibc, a non-power-of-two alignment is rounded up; one that cannot be
/// rounded gives NULL with `EINVAL`.
#[no_mangle]
pub extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let Some(align) = align.max(1).checked_next_power_of_two() else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if align > usize::MAX / 2 + 1 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    aligned(align, size)
}

/// `valloc(3)`: page aligned.
#[no_mangle]
pub extern "C" fn valloc(size: usize) -> *mut c_void {
    aligned(PAGE, size)
}

/// `pvalloc(3)`: page aligned, size rounded up to whole pages.
#[no_mangle]
pub extern "C" fn pvalloc(size: usize) -> *mut c_void {
    let Some(rounded) = size.max(1).checked_add(PAGE - 1).map(|s| s & !(PAGE - 1)) else {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    aligned(PAGE, rounded)
}

/// `malloc_usable_size(3)`.
#[no_mangle]
pub extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if router::owns(p as *mut u8) {
        // SAFETY: a live arena block (the caller's contract, as with glibc).
        return unsafe { router::usable_size(p as *mut u8) };
    }
    if router::owns_small(p as *mut u8) {
        // SAFETY: a live small-block heap block (the caller's contract).
        return unsafe { router::usable_size_small(p as *mut u8) };
    }
    if real::is_boot(p) {
        return real::boot_size(p);
    }
    real::usable_size(p)
}
