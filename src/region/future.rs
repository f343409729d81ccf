//! Regions for async code: a future whose every poll runs inside a region.
//!
//! [`region`](super::region) takes a closure, which cannot hold an `.await`. An async handler's
//! temporaries mostly live between two `.await`s: a body parsed, a value computed, a reply
//! formatted, all inside one `poll`. [`InRegion`] runs each `poll` of the future it wraps in a
//! region on the thread that polls it, so those temporaries bump from that thread's arena and
//! its region end takes them back. What the future keeps across an `.await` (its own state,
//! a buffer it reads into over many polls) escapes the poll's region as any block escapes a
//! region: it stays valid until it is freed, from whatever thread runs the later poll.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::{state, RegionGuard};

/// The least capacity the arena of a thread that polls futures in regions plans (see
/// [`Arena::plan_at_least`](crate::arena::Arena::plan_at_least)): its regions are the
/// interleaved polls of many tasks, whose blocks kept across an `.await` die many polls later.
/// A tokio service of 256 in-flight requests ran without its arenas closing from 2 MiB on
/// (BENCHMARKS.md, the async service).
pub const POLL_PLAN: usize = 2 << 20;

/// After a poll, outside regions: the thread's arena plans [`POLL_PLAN`] at least. One load
/// and a compare once it does.
#[inline]
fn plan_for_polls() {
    let ts = state();
    if ts.depth.get() != 0 {
        return; // a poll inside a region: the outermost end is still to come
    }
    let a = ts.arena.get();
    if a.is_null() {
        return;
    }
    // SAFETY: the calling thread's own arena, between its regions.
    let arena = unsafe { &*a };
    if arena.min_capacity() < POLL_PLAN {
        arena.plan_at_least(POLL_PLAN);
    }
}

/// A future that polls `F` inside a region on the polling thread (see the module docs).
///
/// Made by [`InRegion::new`] or [`InRegionExt::in_region`]. Nested adapters and [`region`]
/// calls inside a poll nest as regions do; a poll that panics still ends its region (the guard
/// ends it while unwinding). A thread that polls one plans its arena at [`POLL_PLAN`] at least.
/// `InRegion<F>` is `Send`, `Sync` and `Unpin` exactly when `F` is.
///
/// [`region`]: super::region
#[derive(Debug, Clone)]
#[must_use = "futures do nothing unless polled"]
pub struct InRegion<F> {
    inner: F,
}

impl<F> InRegion<F> {
    /// Wraps `inner`: each of its polls runs in a region.
    pub const fn new(inner: F) -> Self {
        InRegion { inner }
    }

    /// The wrapped future, unwrapped (before it completes).
    pub fn into_inner(self) -> F {
        self.inner
    }
}

impl<F: Future> Future for InRegion<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning of `inner`: `InRegion` never moves it out of a pinned
        // `self` (`into_inner` takes `self` by value, which a pinned future cannot give), has
        // no `Drop` of its own, and is `Unpin` only when `F` is (auto trait).
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.inner) };
        let out = {
            let _region = RegionGuard::enter();
            inner.poll(cx)
        };
        plan_for_polls();
        out
    }
}

/// [`InRegion`] as a method of every future: `handler(request).in_region().await`.
pub trait InRegionExt: Future + Sized {
    /// This future with each poll in a region (see [`InRegion`]).
    fn in_region(self) -> InRegion<Self> {
        InRegion::new(self)
    }
}

impl<F: Future> InRegionExt for F {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::region_depth;
    use core::task::Waker;

    /// Pending once, then ready; records the depth it saw in each poll.
    struct Twice {
        polls: u32,
        depths: Vec<u32>,
    }

    impl Future for Twice {
        type Output = Vec<u32>;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<u32>> {
            let d = region_depth();
            self.depths.push(d);
            self.polls += 1;
            if self.polls == 1 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(core::mem::take(&mut self.depths))
            }
        }
    }

    #[test]
    fn every_poll_runs_in_a_region_and_nests() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut f = Box::pin(
            Twice {
                polls: 0,
                depths: Vec::new(),
            }
            .in_region()
            .in_region(),
        );
        assert!(f.as_mut().poll(&mut cx).is_pending());
        assert_eq!(region_depth(), 0, "the region ends with the poll");
        let Poll::Ready(depths) = f.as_mut().poll(&mut cx) else {
            panic!("ready on the second poll")
        };
        assert_eq!(depths, vec![2, 2]);
        assert_eq!(region_depth(), 0);
    }
}
