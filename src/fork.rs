//! `fork` support: the library's locks are taken before `fork` and released after it in the
//! parent and the child, so that the child never inherits a lock held by a thread that does not
//! exist there (its next slow path would spin forever).
//!
//! Both front ends register the core's handlers: the preload library at load time (before any
//! thread exists), `ResizeAlloc` from its first slow path (and the Rust API's `region_begin`,
//! `stats` and `trim`, which take the slot table's lock without allocating). They register once
//! per copy of the crate (a Rust program that also preloads the library has two copies, each
//! with its own locks). Other parts with locks of their own (the profiler, the preload
//! library's device pools) register their own handlers, each behind a [`Gate`].
//!
//! A handler never waits for a lock its own thread may hold. `fork` may be called from a signal
//! handler that interrupted this very thread inside a slow path, or inside `fork` itself (glibc
//! bug 24161, its test `tst-mallocfork2`), and then the lock is held by the frame below. So,
//! as glibc does for its own malloc locks:
//! * in a process with one thread (glibc's `__libc_single_threaded`) the handlers take nothing:
//!   no other thread can hold a lock, and none can exist in the child;
//! * a `fork` nested inside another one's handlers on the same thread (a signal handler that
//!   forks while the outer `fork` holds the locks) takes nothing either, and releases nothing;
//! * otherwise stdio's list lock is taken first, as glibc's `fork` takes it before its own
//!   malloc locks (a thread in `getline` holds a stream's lock while it allocates), and each
//!   lock of ours is waited for at most [`FORK_WAIT_MS`]: a lock that another thread
//!   holds is let go in microseconds. One that is still held then is left alone, every lock
//!   taken so far is released, and the child resets every lock (it has one thread, so each
//!   holder is gone, or is the frame this thread's signal handler interrupted; the data under a
//!   lock reset that way may be halfway through a change, which is the price of not hanging).
//!
//! Left open: a thread that forks while another is inside `register_handlers` (at the
//! process's first allocation) may fork before the handlers exist; and a Rust program whose
//! very first allocation happens inside another library's fork handler would call
//! `pthread_atfork` from there, which glibc does not allow.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU8, Ordering};

use crate::{reservation, slab};

static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Registers the handlers with `pthread_atfork`, once. Must not be called from inside `malloc`
/// before the libc is ready (glibc may allocate to record the handlers): the preload library
/// calls it from its constructor, and the Rust front end's allocations never reach our
/// `malloc` through glibc.
#[inline]
pub fn register_handlers() {
    if !REGISTERED.load(Ordering::Relaxed) {
        register_slow();
    }
}

#[cold]
#[inline(never)]
fn register_slow() {
    if REGISTERED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: handlers with the right signatures, which never unwind.
    if unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) } != 0 {
        // Out of memory in glibc: try again from the next slow path.
        REGISTERED.store(false, Ordering::Release);
    }
}

/// The gate of the core's own handlers.
static GATE: Gate = Gate::new();

/// Takes every lock, in the order the slow paths take them: the slot table before the
/// small-block heap's (an arena is never acquired under a heap lock).
extern "C" fn prepare() {
    if !GATE.enter() {
        return;
    }
    let all = reservation::fork_prepare()
        && (slab::fork_prepare() || {
            // SAFETY: `reservation::fork_prepare` took the table lock in this thread just now.
            unsafe { reservation::fork_finish() };
            false
        });
    GATE.took(all);
}

/// Releases what [`prepare`] took, in the parent.
extern "C" fn parent() {
    if GATE.leave(false) == Leave::Release {
        // SAFETY: `prepare` took every lock in this thread.
        unsafe { release() };
    }
}

/// Releases what [`prepare`] took, in the child, or resets the locks it could not take.
extern "C" fn child() {
    if GATE.leave(true) != Leave::Nothing {
        // SAFETY: `prepare` took every lock in this thread (whose copy this is), or the gate
        // says it gave up on one: the child has one thread, so no holder of any lock is left
        // but the frame this thread's signal handler interrupted (see the module docs).
        unsafe { release() };
    }
}

/// # Safety
/// Every lock is held by the calling thread's `prepare`, or the caller is a child after a
/// `prepare` that gave up.
unsafe fn release() {
    // SAFETY: the caller's obligation.
    unsafe {
        slab::fork_finish();
        reservation::fork_finish();
    }
}

// ------------------------------------------------------------------------------ the gate

/// How long a fork handler waits for a lock before it gives up on it: long enough for any
/// thread that holds one to let it go (slow paths hold them for microseconds), short enough
/// that a lock held by the frame a signal handler interrupted costs a fork no more than this.
pub const FORK_WAIT_MS: u64 = 200;

/// What a parent or child handler does with the locks its prepare handler dealt with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leave {
    /// Nothing was taken (one thread, or a `fork` nested in another one's handlers).
    Nothing,
    /// Every lock was taken by this thread: release them.
    Release,
    /// In the child, after a prepare that gave up on a lock: reset every lock.
    Reset,
}

/// One set of `fork` handlers' record of what its prepare handler took (see the module docs).
///
/// Invariants: `owner` is 0 or the thread between a prepare handler that waited for the gate
/// and the matching parent or child handler; only that thread (or, in a process with one
/// thread, the only one) touches `depth` and `state`, so their orderings are relaxed.
pub struct Gate {
    owner: AtomicI32,
    /// Prepare handlers entered and not yet left on the owning thread: more than 1 inside a
    /// `fork` nested in another one's handlers.
    depth: AtomicU32,
    /// What the outermost prepare did: [`NOTHING`], [`HOLDING`] or [`GAVE_UP`].
    state: AtomicU8,
}

const NOTHING: u8 = 0;
const HOLDING: u8 = 1;
const GAVE_UP: u8 = 2;

impl Gate {
    pub const fn new() -> Self {
        Gate {
            owner: AtomicI32::new(0),
            depth: AtomicU32::new(0),
            state: AtomicU8::new(NOTHING),
        }
    }

    /// Called first by a prepare handler: true when it must take its locks now (with
    /// [`wait_for`]) and then say with [`took`](Gate::took) whether it got them all. False in a
    /// process with one thread and inside a `fork` nested in another one's handlers on this
    /// thread. Waits while another thread is inside its own `fork`'s handlers.
    pub fn enter(&self) -> bool {
        if single_threaded() {
            if self.depth.fetch_add(1, Ordering::Relaxed) == 0 {
                self.state.store(NOTHING, Ordering::Relaxed);
            }
            return false;
        }
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        if self.owner.load(Ordering::Acquire) == me {
            self.depth.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // Another thread's fork: it leaves the gate when its fork returns, whatever it holds.
        while self
            .owner
            .compare_exchange_weak(0, me, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
        self.depth.store(1, Ordering::Relaxed);
        self.state.store(GAVE_UP, Ordering::Relaxed);
        // stdio's list lock before any lock of ours, in the order glibc's own `fork` takes its
        // malloc locks: `fork` takes it after the prepare handlers, and a thread that holds a
        // stream's lock may be inside `malloc` (`getline`) while another, in `fflush(NULL)`,
        // holds the list lock and waits for that stream. Taken after ours, that was a cycle
        // (glibc's `tst-malloc-fork-deadlock` hung in process mode). It is recursive: `fork`
        // takes it again; glibc releases its own hold in the parent before the parent handlers
        // run, and resets the lock in the child before the child handlers.
        // SAFETY: glibc's exported lock of the list of streams; released in `leave`.
        unsafe { _IO_list_lock() };
        true
    }

    /// After [`enter`](Gate::enter) returned true: whether the handler holds all its locks
    /// (when not, it released those it had taken).
    pub fn took(&self, all: bool) {
        self.state
            .store(if all { HOLDING } else { GAVE_UP }, Ordering::Relaxed);
    }

    /// Called first by the parent (`child` false) or child handler: what it must do.
    pub fn leave(&self, child: bool) -> Leave {
        if self.depth.fetch_sub(1, Ordering::Relaxed) > 1 {
            return Leave::Nothing;
        }
        let state = self.state.swap(NOTHING, Ordering::Relaxed);
        if state != NOTHING && !child {
            // SAFETY: `enter` took it on this thread (the child's copy was reset by glibc).
            unsafe { _IO_list_unlock() };
        }
        self.owner.store(0, Ordering::Release);
        match state {
            HOLDING => Leave::Release,
            GAVE_UP if child => Leave::Reset,
            _ => Leave::Nothing,
        }
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

extern "C" {
    /// glibc (2.32 and later): nonzero while the process has never had a second thread.
    static __libc_single_threaded: core::ffi::c_char;
    /// glibc: takes the (recursive) lock of the list of stdio streams.
    fn _IO_list_lock();
    /// glibc: releases one hold of it.
    fn _IO_list_unlock();
}

/// True when the process has one thread, as glibc's own fork handling tells it.
#[inline]
fn single_threaded() -> bool {
    // SAFETY: a byte that glibc writes only while the process has one thread (before its first
    // `pthread_create` returns); reading it races with nothing that matters here.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(__libc_single_threaded)) != 0 }
}

/// Calls `try_take` (a lock's `try_lock`, its guard forgotten) until it succeeds, for at most
/// [`FORK_WAIT_MS`]: true when it did.
pub fn wait_for(mut try_take: impl FnMut() -> bool) -> bool {
    if try_take() {
        return true;
    }
    let deadline = crate::os::monotonic_ms().saturating_add(FORK_WAIT_MS);
    // A bound on the tries too, should the clock not be readable (it then reads 0).
    for _ in 0..1_000_000 {
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
        if try_take() {
            return true;
        }
        if crate::os::monotonic_ms() >= deadline {
            break;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{wait_for, Gate, Leave, FORK_WAIT_MS};

    // The test harness runs tests on threads of their own, so the process is never single
    // threaded here: the gate takes the multi-threaded paths, stdio's list lock included. No
    // fork happens, so where a child's handler would find glibc's reset of that lock, the test
    // releases it.
    fn as_if_glibc_reset_the_list_lock() {
        // SAFETY: the gate's `enter` took it on this thread, and the child's `leave` left it.
        unsafe { super::_IO_list_unlock() };
    }

    #[test]
    fn a_fork_nested_in_another_ones_handlers_takes_and_releases_nothing() {
        let g = Gate::new();
        assert!(g.enter(), "the outermost prepare takes the locks");
        g.took(true);
        assert!(
            !g.enter(),
            "a nested prepare on the same thread takes nothing"
        );
        assert_eq!(g.leave(true), Leave::Nothing, "the nested fork's child");
        assert_eq!(g.leave(false), Leave::Release, "the outer fork's parent");
        // The gate is free again: another fork takes the locks anew.
        assert!(g.enter());
        g.took(true);
        assert_eq!(g.leave(true), Leave::Release);
        as_if_glibc_reset_the_list_lock();
    }

    #[test]
    fn a_prepare_that_gave_up_resets_in_the_child_and_leaves_the_parent_alone() {
        let g = Gate::new();
        assert!(g.enter());
        g.took(false);
        assert_eq!(g.leave(false), Leave::Nothing);
        assert!(g.enter());
        g.took(false);
        assert_eq!(g.leave(true), Leave::Reset);
        as_if_glibc_reset_the_list_lock();
    }

    #[test]
    fn another_threads_fork_is_waited_for() {
        let g = std::sync::Arc::new(Gate::new());
        assert!(g.enter());
        g.took(true);
        let g2 = g.clone();
        let other = std::thread::spawn(move || {
            let took = g2.enter(); // waits for the first fork to leave
            g2.took(true);
            (took, g2.leave(false))
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(g.leave(false), Leave::Release);
        assert_eq!(other.join().unwrap(), (true, Leave::Release));
    }

    #[test]
    fn a_lock_that_is_never_free_is_given_up_after_the_wait() {
        let start = std::time::Instant::now();
        assert!(!wait_for(|| false));
        let waited = start.elapsed().as_millis() as u64;
        assert!(
            (FORK_WAIT_MS / 2..FORK_WAIT_MS * 20).contains(&waited),
            "{waited} ms"
        );
        let mut tries = 0;
        assert!(wait_for(|| {
            tries += 1;
            tries == 3
        }));
    }
}
