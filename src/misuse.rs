//! What the heap checks find (a block freed twice, a pointer that starts no block, an
//! overwritten header), and the one line on stderr that they abort with, for both heaps.

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
}

/// The heap the block belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HeapKind {
    Arena,
    SmallBlocks,
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
        (Misuse::HeaderOverwritten, _) => {
            "heap corruption: the header before the block was overwritten"
        }
    };
    let heap = match heap {
        HeapKind::Arena => "arena",
        HeapKind::SmallBlocks => "small-block heap",
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
