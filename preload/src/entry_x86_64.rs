//! All of the preload library's assembly (x86-64), in one place. Each block mirrors a Rust path
//! that the other builds run (the `tls-thread-local` build on x86-64, and every other target),
//! and `scripts/test.sh` runs the preload tests against both:
//!
//! * `malloc`: a region's block under a page, and at a cache line from a page on. Twin:
//!   `Arena::try_alloc_fast_small`, `Arena::try_alloc_fast_aligned` and `Arena::bump`, through
//!   `malloc_at` and `router::malloc`.
//! * `free`: the owner's LIFO free at `below_top`, and its tag flip of a block of the uncounted
//!   range that releases nothing. Twins: the LIFO branch of `Arena::try_free_local_fast` with
//!   `Arena::release_top`, or with `Arena::rewind_uncounted` for the range's last live block
//!   above freed blocks or padding, and the uncounted branch of `Arena::try_free_local_other`
//!   with `Arena::free_uncounted`, through `malloc.rs`'s `free`.
//! * the profiler's common cases outside regions: `malloc`'s countdown and `free`'s filter
//!   test. Twins: the first branches of `malloc_unrouted` and `free_foreign_watched`.
//! * `with_site!`: `calloc`, `realloc`, `__libc_*` (and `malloc` in the twin build) load the
//!   caller's return address.
//!   Twin: `entry.rs`'s `with_site!`, which passes 0.
//! * `dlsym`: our CUDA hooks for hooked names, the real `dlsym` otherwise. No twin: x86-64 only,
//!   as the CUDA hooks are.
//!
//! The words the blocks read in an arena are [`asm_layout`](resizealloc::arena::asm_layout)'s
//! offsets; the thread state's are `region::OWN_OFFSET` and `region::FREE_ARENA_OFFSET`, in the
//! core crate's TLS block (`region/tls.rs`, the core crate's own assembly).

use core::ffi::{c_char, c_void};

// The allocation site for the lifetime predictor (lifetime.rs) is the return address of the
// program's call: `malloc`, `calloc` and `realloc` are naked stubs that load it from the stack
// into the next argument register and jump to the real entry point (two instructions).
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
pub(crate) use with_site;

/// The assembly `malloc` and `free` entry points and the Rust functions only they jump to (with the
/// core crate's thread state in its initial-exec TLS block).
#[cfg(asm_entry_points)]
mod alloc_free {
    use core::ffi::c_void;

    use resizealloc::arena::{self, asm_layout};

    use resizealloc::router;
    use resizealloc::router::malloc::{
        free_foreign_watched, malloc_predicted, malloc_slow, malloc_unrouted,
    };

    use crate::malloc::NextAllocator;
    use crate::real;
    use core::ptr;

    // The assembly `malloc` below reads the core crate's TLS block, which exists only when the core
    // crate is built without its `tls-thread-local` feature. Cargo can enable that feature on the
    // core crate alone (`--features resizealloc/tls-thread-local`, or another crate in the build):
    // the library then linked with the block undefined and failed to load. Now it does not build.
    const _: () = assert!(
        resizealloc::region::STATE_IN_TLS_BLOCK,
        "the core crate keeps its thread state in `thread_local!`: build resizealloc-preload with \
         its own `tls-thread-local` feature"
    );

    // The exits of the region paths of `malloc` (the block in rax, the arena in rdx) and of the
    // LIFO free (the arena in rsi): `ret`, or, in the `check-invariants` build, a jump to a Rust
    // function that checks the arena's invariants on the state the assembly left, then returns.
    #[cfg(not(feature = "check-invariants"))]
    macro_rules! with_exits {
        (malloc_asm) => {
            malloc_asm!("ret")
        };
        (free_asm) => {
            free_asm!("ret")
        };
    }
    #[cfg(feature = "check-invariants")]
    macro_rules! with_exits {
        (malloc_asm) => {
            malloc_asm!(
                "mov rdi, rax\nmov rsi, rdx\njmp {checked}",
                checked = sym checked_malloc_exit
            )
        };
        (free_asm) => {
            free_asm!("mov rdi, rsi\njmp {checked}", checked = sym checked_free_exit)
        };
    }

    macro_rules! malloc_asm {
        ($exit:literal $(, $op:ident = sym $path:path)*) => {
            core::arch::naked_asm!(
                    ".p2align 6",
                    "mov rax, qword ptr [rip + resizealloc_thread_state@GOTTPOFF]",
                    "mov rdx, qword ptr fs:[rax]",
                    "cmp rdx, {routes}",
                    "jbe 3f",
                    // In a region; rdx = the arena. `size - 1` above the small path's: 0 bytes, or
                    // a page or more (below, at label 4).
                    "lea rax, [rdi - 1]",
                    "cmp rax, {small_max}",
                    "ja 4f",
                    // rcx = top (the header goes there), r8 = the new top: the block's end rounded
                    // up to 16 (`limit` is 16-byte aligned, so testing it is testing the end).
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
                    "inc qword ptr [rdx + {live_uncounted}]",
                    $exit,
                    // A page or more: `try_alloc_fast_aligned` at a cache line's alignment. 0
                    // bytes, or more than an arena holds (`size - 1` has a bit at or above
                    // `MAX_SLOT`'s): the slow path.
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
                    // rsi = the header. Padding `[top, header)` in front of it gets a gap
                    // header, so that a walk of the uncounted range steps over it: the line
                    // gap, whose end follows from where it stands (the header). Written at
                    // `top` whether or not there is padding (without, the block's header below
                    // overwrites it), since whether there is depends on the sizes before, and a
                    // branch on it mispredicted where blocks of a page or more mix with smaller
                    // ones.
                    "lea rsi, [rax - {header}]",
                    "mov qword ptr [rcx], {line_gap}",
                    // `bump` again, for a header in rsi.
                    "mov qword ptr [rdx + {top}], r8",
                    "shl rdi, {tag_shift}",
                    "or rdi, {tag_live}",
                    "mov qword ptr [rsi], rdi",
                    "mov rcx, qword ptr [rdx + {below_top}]",
                    "mov qword ptr [rsi + {link}], rcx",
                    "mov qword ptr [rdx + {below_top}], rsi",
                    "inc qword ptr [rdx + {region_allocs}]",
                    "inc qword ptr [rdx + {live_uncounted}]",
                    $exit,
                    "3:",
                    "cmp rdx, {settled}",
                    "jne 2f",
                    // `real::MALLOC` always holds a callable `malloc` (the next object's, or the
                    // resolver).
                    "jmp qword ptr [rip + {next}]",
                    // rdx is null (no route), `PREDICT` or `COUNTDOWN`. `PREDICT` goes to the
                    // predictor, with the site (label 7); no route to `malloc_unrouted` with the
                    // site (label 8). `COUNTDOWN` (only the profiler's countdown stands between
                    // the thread and the next allocator): the request is counted down from
                    // `sample_left` in memory (rax still holds the TLS offset); when that
                    // borrows, the request is added back and `malloc_unrouted` decides.
                    // `sample_left` stays under `ALWAYS_SAMPLED`, so the borrow sends those on
                    // too.
                    "2:",
                    "cmp rdx, {predict}",
                    "je 7f",
                    "jb 8f",
                    "sub qword ptr fs:[rax + {sample_left}], rdi",
                    "jb 9f",
                    "jmp qword ptr [rip + {next}]",
                    "7:",
                    "mov rsi, qword ptr [rsp]",
                    "jmp {predicted}",
                    "9:",
                    "add qword ptr fs:[rax + {sample_left}], rdi",
                    "8:",
                    "mov rsi, qword ptr [rsp]",
                    "jmp {unrouted}",
                    sample_left = const resizealloc::region::SAMPLE_LEFT_OFFSET,
                    routes = const resizealloc::region::ROUTE_BITS_MAX,
                    predict = const resizealloc::region::PREDICT_BITS,
                    settled = const resizealloc::region::SETTLED_BITS,
                    // `is_small_request`: `size - 1` at most a page less two (0 wraps past it).
                    small_max = const arena::LINE_ALIGN_FROM - 2,
                    top = const asm_layout::TOP,
                    limit = const asm_layout::LIMIT,
                    below_top = const asm_layout::BELOW_TOP,
                    region_allocs = const asm_layout::REGION_ALLOCS,
                    live_uncounted = const asm_layout::LIVE_UNCOUNTED,
                    // The header, then the end rounded up to `MIN_ALIGN`.
                    end_rounding = const arena::HEADER + arena::MIN_ALIGN - 1,
                    header = const arena::HEADER,
                    link = const asm_layout::LINK,
                    tag_shift = const arena::TAG_BITS,
                    tag_live = const arena::TAG_LIVE,
                    line_gap = const arena::LINE_GAP,
                    // `(size - 1) >> max_slot_shift != 0`: 0 bytes, or more than an arena holds.
                    max_slot_shift = const arena::MAX_SLOT.trailing_zeros(),
                    // The first cache line with room for the header in front (`block_align`).
                    line_rounding = const arena::HEADER + arena::LINE - 1,
                    line = const arena::LINE,
                    min_align = const arena::MIN_ALIGN,
                    slow = sym malloc_slow::<NextAllocator>,
                    predicted = sym malloc_predicted_entry,
                    unrouted = sym malloc_unrouted::<NextAllocator>,
                    next = sym crate::real::MALLOC,
                $($op = sym $path,)*
            )
        };
    }

    macro_rules! free_asm {
        ($exit:literal $(, $op:ident = sym $path:path)*) => {
            core::arch::naked_asm!(
                    ".p2align 6",
                    "mov rax, qword ptr [rip + {len}]",
                    "mov rcx, rdi",
                    "sub rcx, qword ptr [rip + {base}]",
                    "cmp rcx, rax",
                    "jae 3f",
                    // An arena block. rsi = the thread's own arena, or `region::NO_ARENA` (never
                    // null).
                    "mov rax, qword ptr [rip + resizealloc_thread_state@GOTTPOFF]",
                    "mov rsi, qword ptr fs:[rax + {free_arena}]",
                    // `is_last_uncounted`: the header (rax) is `below_top`, and not below
                    // `uncounted`. Any other block (and any block when rsi is `NO_ARENA`, whose
                    // `below_top` is 1): the rest of the fast path, with the arena in rsi.
                    "lea rax, [rdi - {header}]",
                    "cmp rax, qword ptr [rsi + {below_top}]",
                    "jne 6f",
                    "cmp rax, qword ptr [rsi + {uncounted}]",
                    "jb {other}",
                    // The range's last live block: `release_uncounted`'s cases go to
                    // `free_last_uncounted`, but for the two commonest. The block is the range's
                    // first (so its only one: nothing but padding lies above `below_top`), not
                    // carried over from the last region, and `release_top` is the whole
                    // release: label 7. A later block, the last live one because every block
                    // below it is freed (or only padding lies there), not carried over, and
                    // `rewind_uncounted` is the whole release: label 20.
                    "je 7f",
                    "cmp qword ptr [rsi + {live_uncounted}], 1",
                    "je 20f",
                    // rcx = the link. Not below the header (another thread freed this block, or
                    // the header was overwritten), or its word's low byte says the release would
                    // go on down: then `free_last_uncounted` does it all, and tells.
                    "mov rcx, qword ptr [rax + {link}]",
                    "cmp rcx, rax",
                    "jae {last}",
                    "cmp byte ptr [rcx], {freed_byte}",
                    "je {last}",
                    // The tag says freed (double frees), the peak is noted, the bump pointer goes
                    // back to the header and `below_top` to the link.
                    "mov word ptr [rax], {freed_half}",
                    "dec qword ptr [rsi + {live_uncounted}]",
                    "mov rdx, qword ptr [rsi + {top}]",
                    "cmp rdx, qword ptr [rsi + {peak_top}]",
                    "ja 5f",
                    "2:",
                    "mov qword ptr [rsi + {top}], rax",
                    "mov qword ptr [rsi + {below_top}], rcx",
                    $exit,
                    "5:",
                    "mov qword ptr [rsi + {peak_top}], rdx",
                    "jmp 2b",
                    // The range's only block (a LIFO pair): the same, once the range is known
                    // not to be carried (a copy, so that neither case jumps back to the other).
                    // On a cache line of its own (the padding follows a jump, so it never runs):
                    // where the branches above put it across two, pairs measured 1-3 % slower.
                    ".p2align 6",
                    "7:",
                    "cmp byte ptr [rsi + {carried}], 0",
                    "jne {last}",
                    "mov rcx, qword ptr [rax + {link}]",
                    "cmp rcx, rax",
                    "jae {last}",
                    "cmp byte ptr [rcx], {freed_byte}",
                    "je {last}",
                    "mov word ptr [rax], {freed_half}",
                    "dec qword ptr [rsi + {live_uncounted}]",
                    "mov rdx, qword ptr [rsi + {top}]",
                    "cmp rdx, qword ptr [rsi + {peak_top}]",
                    "ja 15f",
                    "12:",
                    "mov qword ptr [rsi + {top}], rax",
                    "mov qword ptr [rsi + {below_top}], rcx",
                    $exit,
                    "15:",
                    "mov qword ptr [rsi + {peak_top}], rdx",
                    "jmp 12b",
                    // The range's last live block, not its first: every block below it in the
                    // range is free (or only alignment padding lies there, as in front of a
                    // block of a page or more), so the bump pointer goes back to `uncounted`
                    // and `below_top` to `no_link` (`rewind_uncounted`), unless the range was
                    // carried over, or the release is large enough for process mode's bound to
                    // want a look (`note_release`): those go to `free_last_uncounted`.
                    "20:",
                    "cmp byte ptr [rsi + {carried}], 0",
                    "jne {last}",
                    // The link must be `no_link <= link < hdr` (`link_below`: one compare of
                    // offsets from `no_link`, r9), else (overwritten, or `POISON_LINK`: another
                    // thread freed the block) `free_last_uncounted` tells.
                    "mov rcx, qword ptr [rax + {link}]",
                    "lea r9, [rsi + {limit}]",
                    "sub rcx, r9",
                    "mov r8, rax",
                    "sub r8, r9",
                    "cmp rcx, r8",
                    "jae {last}",
                    // rdx = top, rcx = uncounted, r8 = the bytes released.
                    "mov rdx, qword ptr [rsi + {top}]",
                    "mov rcx, qword ptr [rsi + {uncounted}]",
                    "mov r8, rdx",
                    "sub r8, rcx",
                    "cmp r8, {look_soon_bytes}",
                    "jae {last}",
                    "mov word ptr [rax], {freed_half}",
                    "dec qword ptr [rsi + {live_uncounted}]",
                    "cmp rdx, qword ptr [rsi + {peak_top}]",
                    "ja 25f",
                    "22:",
                    "mov qword ptr [rsi + {top}], rcx",
                    "mov qword ptr [rsi + {below_top}], r9",
                    $exit,
                    "25:",
                    "mov qword ptr [rsi + {peak_top}], rdx",
                    "jmp 22b",
                    // Not the last block: the tag flip of a live block of the uncounted range
                    // `[uncounted, top)` that is not the range's last live block (then
                    // `free_uncounted` releases nothing: a block that ends at `top` is
                    // `below_top`, the LIFO branch's). Tested before anything changes; any other
                    // block goes to `free_arena_block_other`, which tests it all again.
                    // `NO_ARENA`'s `uncounted` and `top` are equal: an empty range.
                    "6:",
                    // `uncounted <= hdr < top` is the range test.
                    "cmp rax, qword ptr [rsi + {uncounted}]",
                    "jb {other}",
                    "cmp rax, qword ptr [rsi + {top}]",
                    "jae {other}",
                    // The header's tag: live, else a sampled block or a double free (the Rust
                    // path tells); the link below the header, else `check_link` aborts there.
                    "movzx ecx, word ptr [rax]",
                    "cmp ecx, {tag_live}",
                    "jne {other}",
                    "cmp qword ptr [rax + {link}], rax",
                    "jae {other}",
                    "cmp qword ptr [rsi + {live_uncounted}], 1",
                    "je {other}",
                    "mov word ptr [rax], {freed_half}",
                    "dec qword ptr [rsi + {live_uncounted}]",
                    $exit,
                    // The watch flags against the lowest, the profiler's: below it (none) the
                    // next allocator's `free` (label 3's fall-through), above it (any other
                    // flag) the watched path; equal (the profiler alone, so no bootstrap block
                    // either) the filter: a block whose slot is zero was not sampled, and goes
                    // straight on.
                    "3:",
                    "cmp byte ptr [rip + {watch}], {watch_profile}",
                    "jae 8f",
                    // `real::FREE` always holds a callable `free` (the next object's, or the
                    // resolver); no bootstrap block exists while the watch flags are clear
                    // (`WATCH_FRONT_END`).
                    "jmp qword ptr [rip + {next}]",
                    "8:",
                    "ja {watched}",
                    "imul eax, edi, {filter_multiplier}",
                    "shr eax, {filter_shift}",
                    "lea rcx, [rip + {filter}]",
                    "cmp byte ptr [rcx + rax], 0",
                    "jne {watched}",
                    "jmp qword ptr [rip + {next}]",
                    watch_profile = const resizealloc::mode::WATCH_PROFILE,
                    filter = sym resizealloc::profile::FILTER,
                    filter_multiplier = const resizealloc::profile::FILTER_MULTIPLIER as i32,
                    filter_shift = const 32 - resizealloc::profile::FILTER_BITS,
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
                    live_uncounted = const asm_layout::LIVE_UNCOUNTED,
                    carried = const asm_layout::CARRIED,
                    limit = const asm_layout::LIMIT,
                    look_soon_bytes = const asm_layout::LOOK_SOON_BYTES,
                    freed_byte = const arena::TAG_FREED as u8,
                    freed_half = const arena::TAG_FREED as u16,
                    tag_live = const arena::TAG_LIVE,
                    last = sym free_arena_block_last,
                    other = sym free_arena_block_other,
                    watched = sym free_foreign_watched::<NextAllocator>,
                    next = sym real::FREE,
                $($op = sym $path,)*
            )
        };
    }

    /// `malloc(3)`. It loads the thread's `active` value itself (the initial-exec TLS load of
    /// region/tls.rs) and dispatches on it:
    ///
    /// * a thread in a region (`active` is its arena) gets its block right here, in assembly:
    ///   [`Arena::try_alloc_fast_small`] for a block under a page, with no taken branch,
    ///   [`Arena::try_alloc_fast_aligned`] at a cache line's alignment for a larger one, and
    ///   `Arena::bump` (the offsets and tags come from [`asm_layout`]). Each taken branch on the
    ///   way from `malloc` into a Rust function cost the Bumper loop about 3 % (`scripts/bench.sh`).
    ///   A full run, 0 bytes or a size beyond any arena go to
    ///   [`malloc_slow`] (it reads no site for a thread in a region, so the second argument
    ///   register holds whatever the program left there);
    /// * a thread outside regions whose mode is known (`SETTLED`) jumps straight to the next
    ///   allocator's `malloc` (seven instructions, two taken branches);
    /// * a thread outside regions while the profiler runs in markers or off mode
    ///   (`COUNTDOWN`) counts the request down from its `sample_left` and jumps to the next
    ///   allocator's `malloc` (five instructions more than `SETTLED`), unless the request does
    ///   not fit in what is left (the common case of `malloc_unrouted` and
    ///   `profile::take_sample`, its twin);
    /// * the rest go with the site (the return address) in the second argument register to
    ///   [`malloc_predicted_entry`] (`PREDICT`: process mode) or to `malloc_unrouted` (first
    ///   use, a sample). Only those paths use a site: an arena's slow path needs none, so the
    ///   others do not load it.
    ///
    /// [`Arena::try_alloc_fast_small`]: resizealloc::arena::Arena::try_alloc_fast_small
    /// [`Arena::try_alloc_fast_aligned`]: resizealloc::arena::Arena::try_alloc_fast_aligned
    ///
    /// # Safety
    /// As the C function.
    #[unsafe(naked)]
    #[no_mangle]
    pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
        with_exits!(malloc_asm)
    }

    /// `malloc` through the lifetime predictor (`active` is `PREDICT`), with the program's
    /// return address as the site.
    extern "C" fn malloc_predicted_entry(size: usize, site: usize) -> *mut c_void {
        malloc_predicted::<NextAllocator>(size.max(1), site).cast()
    }

    /// `free(3)`, in assembly:
    ///
    /// * a pointer of the next allocator (outside regions nearly all of them): the range check and
    ///   the watch test, then the next allocator's `free` (eight instructions, two taken branches);
    ///   while only the profiler watches, its filter's slot for the pointer first (the common
    ///   case of `free_foreign_watched`, its twin), six more;
    /// * the owner's free of the last block it handed out (LIFO), not counted yet, with nothing
    ///   freed below it and, if it is the uncounted range's last live block, its first one and
    ///   not carried over from the last region: right here, with no taken branch (the LIFO branch of
    ///   [`Arena::try_free_local_fast`] and `Arena::release_top`, with the offsets and tags of
    ///   [`asm_layout`]). Why: each taken branch on the way into a
    ///   Rust function cost the Bumper loop about 3 % (`scripts/bench.sh`);
    /// * the same free of the range's last live block when it is not the range's first (the
    ///   blocks below it are freed, or only the alignment padding in front of a block of a page
    ///   or more lies there), not carried over, releasing less than `LOOK_SOON_BYTES`: the bump
    ///   pointer goes back to where the range began (`Arena::rewind_uncounted`), right here too
    ///   (a pair of a block of a page or more is such a free: its padding makes it not the
    ///   range's first block);
    /// * the owner's free of any other live block it handed out since the counts were last looked
    ///   at (the uncounted range), when that block is not the range's last live one (a block
    ///   that ends at the bump pointer is `below_top`, the LIFO case): its tag says freed and the
    ///   range's live count drops, right here (the uncounted branch of
    ///   [`Arena::try_free_local_other`] and `Arena::free_uncounted`). Frees in allocation
    ///   order, at random or in a tree's post-order are nearly all of this kind;
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
    /// [`Arena::try_free_local_other`]: resizealloc::arena::Arena::try_free_local_other
    #[unsafe(naked)]
    #[no_mangle]
    pub extern "C" fn free(p: *mut c_void) {
        with_exits!(free_asm)
    }

    /// The LIFO free whose release goes on down below the block (or aborts on a link that names
    /// no block below it: another thread freed the block, or its header was overwritten):
    /// `own` is the thread's own arena and the entry point found `p`'s header at its `below_top`,
    /// not below `uncounted`.
    extern "C" fn free_arena_block_last(p: *mut c_void, own: *const resizealloc::arena::Arena) {
        // SAFETY: `own` is this thread's own arena (`NO_ARENA`'s `below_top` matches no header) and
        // the entry point tested `is_last_uncounted` of `p`'s header.
        unsafe { (*own).free_last_uncounted(p as *mut u8) }
    }

    /// `free` of an arena block that the assembly entry point did not free inline: `own` is the
    /// thread's own arena ([`Arena::try_free_local_other`], which tries the uncounted and the
    /// counted paths, else [`router::free_owned`]), or `region::NO_ARENA` when it has none
    /// (`free_owned`: another thread's block).
    ///
    /// [`Arena::try_free_local_other`]: resizealloc::arena::Arena::try_free_local_other
    extern "C" fn free_arena_block_other(p: *mut c_void, own: *const resizealloc::arena::Arena) {
        // SAFETY: `own` is this thread's own arena, alive while it runs (the entry point read it
        // from the thread's state), unless it is `NO_ARENA`; `p` lies in the reservation, so it
        // is an arena block (or the program's bug, which the fast path's checks send to
        // `free_owned`, and `free_owned` reports).
        unsafe {
            if ptr::eq(own, resizealloc::region::no_arena())
                || !(*own).try_free_local_other(p as *mut u8)
            {
                router::free_owned(p as *mut u8);
            }
        }
    }

    /// The `check-invariants` build's exit of `malloc`'s region paths: checks the arena, then
    /// returns the block.
    #[cfg(feature = "check-invariants")]
    extern "C" fn checked_malloc_exit(
        block: *mut c_void,
        arena: *const resizealloc::arena::Arena,
    ) -> *mut c_void {
        check_arena(arena);
        block
    }

    /// The `check-invariants` build's exit of `free`'s LIFO path.
    #[cfg(feature = "check-invariants")]
    extern "C" fn checked_free_exit(arena: *const resizealloc::arena::Arena) {
        check_arena(arena);
    }

    #[cfg(feature = "check-invariants")]
    fn check_arena(arena: *const resizealloc::arena::Arena) {
        // SAFETY: the calling thread's own arena, which the assembly path just used.
        if let Err(what) = unsafe { (*arena).check_invariants() } {
            resizealloc::os::write_stderr(
                b"resizealloc: arena invariant broken after the assembly path: ",
            );
            resizealloc::os::write_stderr(what.as_bytes());
            resizealloc::os::fatal(b"\n");
        }
    }
}

#[cfg(asm_entry_points)]
pub(crate) use alloc_free::free;

/// `dlsym`: our hooks for the hooked names, NULL for our CUDA exports in a process without
/// their real functions, the real `dlsym` for everything else. Naked, and
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
        "cmp rax, 1", // HIDDEN: answer NULL
        "jne 3f",
        "xor eax, eax",
        "3:",
        "ret",
        filter = sym crate::cuda::dlsym_filter,
        real = sym crate::cuda::RESIZEALLOC_REAL_DLSYM,
    )
}
