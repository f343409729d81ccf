//! What the heap checks find (a block freed twice, a pointer that starts no block, an
//! overwritten header; in the `heap-debug` build of the preload library also a write past a
//! block's end or into a freed block, a sized delete of the wrong size), and the one line on
//! stderr that they abort with, for every heap.

use crate::os;

/// What a check found at a block handed to `free`, `realloc` or `malloc_usable_size`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Misuse {
    /// The block is free already: a double free, or a use of a freed block.
    Freed,
    /// No live block starts there (an interior or misaligned pointer, a slot never handed
    /// out), or, in the arena, its header word was overwritten.
    NotABlock,
    /// An arena block's tag says live but its link is no block below it: the bytes right
    /// before the block were overwritten (a write before it, or past the end of the one before).
    HeaderOverwritten,
    /// The bytes right after the block were overwritten (`heap-debug` build: its canary).
    WrittenPastEnd,
    /// A freed block was written to before it was reused (`heap-debug` build: its poison).
    WrittenAfterFree,
    /// A C++ sized delete named another size than the block was allocated with (`heap-debug`
    /// build).
    SizeMismatch,
}

/// The heap the block belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HeapKind {
    Arena,
    SmallBlocks,
    /// The `heap-debug` build's guards, around blocks of any heap.
    Guarded,
}

/// Aborts with `resizealloc: <what>: block 0x…[ of N bytes] (<heap>)`. `size` is the size the
/// block's header or size class records, where it can be trusted.
#[cold]
#[inline(never)]
pub fn abort(what: Misuse, heap: HeapKind, p: usize, size: Option<usize>) -> ! {
    let text = match (what, heap) {
        (Misuse::Freed, _) => {
            "double free detected (or a realloc or malloc_usable_size of a freed block)"
        }
        (Misuse::NotABlock, HeapKind::Arena) => {
            "invalid pointer (no live block starts there, or its header was overwritten)"
        }
        (Misuse::NotABlock, HeapKind::SmallBlocks) => {
            "invalid pointer (not the start of a block of its page)"
        }
        (Misuse::NotABlock, HeapKind::Guarded) => {
            "invalid pointer (no block starts there, or the guard before it was overwritten)"
        }
        (Misuse::WrittenPastEnd, _) => "heap corruption: written past the end of the block",
        (Misuse::WrittenAfterFree, _) => "heap corruption: the block was written after its free",
        (Misuse::SizeMismatch, _) => "sized delete of another size than the block's",
        (Misuse::HeaderOverwritten, _) => {
            "heap corruption: the header before the block was overwritten"
        }
    };
    let heap = match heap {
        HeapKind::Arena => "arena",
        HeapKind::SmallBlocks => "small-block heap",
        HeapKind::Guarded => "heap-debug",
    };
    let mut line = os::Line::new();
    line.text("resizealloc: ")
        .text(text)
        .text(": block ")
        .hex(p);
    if let Some(n) = size {
        line.text(" of ").num(n as u64).text(" bytes");
    }
    line.text(" (").text(heap).text(")\n");
    os::fatal(line.as_bytes())
}
