//! Words the preload library's entry points read from assembly, public as read-only views.
//!
//! `free` and `malloc` in `libresizealloc.so` test a few of the core crate's words before any
//! call (the arena reservation's bounds, the foreign-free watch flags), so the symbols must be
//! reachable from the other crate. A `pub static` atomic would let safe code store into it and
//! break the range check every soundness argument rests on; [`Published`] gives other crates
//! loads only, and this crate keeps the stores.

use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// An atomic that other crates may only load. Same layout as `A` (assembly reads it as one).
///
/// ```compile_fail
/// use core::sync::atomic::Ordering;
/// // Safe code outside the crate cannot move the reservation's bounds.
/// resizealloc::reservation::LEN.atomic().store(1 << 40, Ordering::Relaxed);
/// ```
#[repr(transparent)]
pub struct Published<A>(A);

impl<A> Published<A> {
    pub(crate) const fn new(a: A) -> Self {
        Published(a)
    }

    /// The atomic itself, for this crate's stores and read-modify-writes.
    pub(crate) fn atomic(&self) -> &A {
        &self.0
    }
}

impl Published<AtomicUsize> {
    /// The current value.
    #[inline(always)]
    pub fn load(&self, order: Ordering) -> usize {
        self.0.load(order)
    }
}

impl Published<AtomicU8> {
    /// The current value.
    #[inline(always)]
    pub fn load(&self, order: Ordering) -> u8 {
        self.0.load(order)
    }
}
