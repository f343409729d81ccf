//! `resizealloc._native`: the native half of the Python package.
//!
//! * `backend.rs`: preloaded `libresizealloc.so` (its markers, through dlsym'd pointers) or this
//!   extension's own copy of the core crate;
//! * `rawmem.rs`: Python's raw allocator wrapped, so that objects over 512 bytes come from the
//!   arena inside regions (own copy only);
//! * `numpy_mem.rs`: NumPy's memory handler (NEP 49), so that array data comes from the arena
//!   inside regions (own copy only);
//! * this file: the Python-facing functions and the `Region` context manager. `region()` is
//!   native end to end, so a region costs a few native calls, not ctypes.

#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

mod backend;
mod numpy_mem;
mod rawmem;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyDict;
use resizealloc::options::{self, RegionMode};

const UNBALANCED: &str = "resizealloc.region_end() without a matching region_begin() on this thread \
(regions are per thread; this thread is not inside one)";

fn unbalanced() -> PyErr {
    PyRuntimeError::new_err(UNBALANCED)
}

#[inline]
fn begin(py: Python<'_>) {
    if let Some(p) = backend::preloaded() {
        // SAFETY: the preloaded library's `void resize_region_begin(void)`.
        unsafe { (p.begin)() };
        return;
    }
    resizealloc::region_begin();
    rawmem::ensure_installed(py);
    numpy_mem::enter(py);
}

#[inline]
fn end(py: Python<'_>) -> PyResult<()> {
    if let Some(p) = backend::preloaded() {
        // SAFETY: the preloaded library's `int resize_region_end(void)`: 0, or -1 when
        // unbalanced (never a crash).
        return if unsafe { (p.end)() } == 0 {
            Ok(())
        } else {
            Err(unbalanced())
        };
    }
    if resizealloc::region_depth() == 0 {
        return Err(unbalanced());
    }
    numpy_mem::exit(py);
    resizealloc::region_end().map_err(|_| unbalanced())
}

/// `with resizealloc.region():` / `@resizealloc.region()`. Stateless: the region state is the
/// calling thread's, so one object serves every block, nested or not.
#[pyclass(module = "resizealloc._native", name = "Region", frozen)]
struct Region;

#[pymethods]
impl Region {
    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        begin(slf.py());
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        end(py)?;
        Ok(false)
    }

    /// Decorator form: `@resizealloc.region()`.
    fn __call__(&self, py: Python<'_>, func: PyObject) -> PyResult<PyObject> {
        decorate(py, func)
    }

    fn __repr__(&self) -> &'static str {
        "resizealloc.region()"
    }
}

static REGION: GILOnceCell<Py<Region>> = GILOnceCell::new();
static DECORATE: GILOnceCell<PyObject> = GILOnceCell::new();

fn decorate(py: Python<'_>, func: PyObject) -> PyResult<PyObject> {
    match DECORATE.get(py) {
        Some(d) => d.call1(py, (func,)),
        None => Err(PyRuntimeError::new_err("resizealloc: the package did not finish importing")),
    }
}

/// `region()` returns the context manager; `region(func)` decorates `func`.
#[pyfunction]
#[pyo3(signature = (func=None))]
fn region(py: Python<'_>, func: Option<PyObject>) -> PyResult<PyObject> {
    match func {
        None => Ok(REGION.get_or_try_init(py, || Py::new(py, Region))?.clone_ref(py).into_any()),
        Some(f) => decorate(py, f),
    }
}

/// Sets the Python helper that wraps functions, generators and coroutines (package import).
#[pyfunction]
fn _set_decorator(py: Python<'_>, f: PyObject) {
    let _ = DECORATE.set(py, f);
}

/// Enters a region on the calling thread (regions nest).
#[pyfunction]
fn region_begin(py: Python<'_>) {
    begin(py);
}

/// Leaves the innermost region; RuntimeError when the thread is not in one.
#[pyfunction]
fn region_end(py: Python<'_>) -> PyResult<()> {
    end(py)
}

/// The calling thread's nesting depth.
#[pyfunction]
fn region_depth() -> u32 {
    match backend::preloaded() {
        // SAFETY: the preloaded library's `int resize_region_depth(void)`.
        Some(p) => unsafe { (p.depth)() }.max(0) as u32,
        None => resizealloc::region_depth(),
    }
}

/// Gives memory the calling thread's arena does not need back to the kernel, and the warm
/// memory kept by arenas of exited threads.
#[pyfunction]
fn trim() {
    match backend::preloaded() {
        // SAFETY: the preloaded library's `void resize_trim(void)`.
        Some(p) => unsafe { (p.trim)() },
        None => resizealloc::trim(),
    }
}

macro_rules! dict_of {
    ($py:expr, $s:expr, [$($f:ident),* $(,)?]) => {{
        let d = PyDict::new($py);
        $( d.set_item(stringify!($f), $s.$f)?; )*
        d
    }};
}

/// (thread, process, memory) figures as three dicts; the package turns them into dataclasses.
#[pyfunction]
#[allow(clippy::type_complexity)] // the four sections of `resizealloc.Stats`
fn _stats(
    py: Python<'_>,
) -> PyResult<(Bound<'_, PyDict>, Bound<'_, PyDict>, Bound<'_, PyDict>, Bound<'_, PyDict>)> {
    let s = match backend::preloaded() {
        Some(p) => {
            let mut s = resizealloc::Stats::default();
            // SAFETY: `s` is a writable `struct resize_stats` of the size we pass (the core
            // crate's `Stats` is that struct, repr(C)).
            unsafe { (p.stats_get)(&mut s, core::mem::size_of::<resizealloc::Stats>()) };
            s
        }
        None => resizealloc::stats(),
    };
    let t = s.thread;
    let p = s.process;
    let m = s.memory;
    let k = s.small;
    Ok((
        dict_of!(py, t, [arena_capacity, arena_committed, high_water, region_allocs,
            overflow_allocs, spilled_allocs, resizes, region_depth]),
        dict_of!(py, p, [arena_capacity, arena_committed, high_water, region_allocs,
            overflow_allocs, spilled_allocs, resizes, arenas_live, arenas_orphaned,
            arenas_denied, reserved_bytes]),
        dict_of!(py, m, [thread_resident, thread_live, process_resident, process_live,
            efficiency_permille, granules_given_back, bound_closures, bytes_turned_away,
            bytes_routed_away, sites_learned_long, sites_learned_short, sites_long_now]),
        dict_of!(py, k, [pages_in_use, bytes_in_pages, pages_given_back, pages_adopted]),
    ))
}

/// True when libresizealloc.so was preloaded and serves this process's malloc.
#[pyfunction]
fn preloaded() -> bool {
    backend::preloaded().is_some()
}

/// The preloaded library's path, or None.
#[pyfunction]
fn preloaded_path() -> Option<String> {
    backend::preloaded().map(|p| p.path.clone())
}

/// Keeps the NumPy handler of regions installed in the calling context (thread, task or copied
/// context), so that each region starts and ends without setting NumPy's handler. Outside
/// regions the kept handler forwards everything to the one it wraps. False where there is
/// nothing to keep: the library is preloaded (its `malloc` serves NumPy already), or NumPy is
/// not imported yet or has no memory handlers (before 1.22).
#[pyfunction]
fn keep_numpy_handler(py: Python<'_>) -> bool {
    backend::preloaded().is_none() && numpy_mem::keep(py)
}

/// True once Python's raw allocator is wrapped (own arenas only).
#[pyfunction]
fn raw_wrapper_installed() -> bool {
    rawmem::installed()
}

/// True when `address` lies in this extension's arenas (own arenas; always False when preloaded,
/// whose arenas are the library's).
#[pyfunction]
fn _owns(address: usize) -> bool {
    backend::preloaded().is_none() && resizealloc::router::owns(address as *mut u8)
}

extern "C" fn fork_prepare() {
    resizealloc::reservation::fork_prepare();
}

extern "C" fn fork_done() {
    // SAFETY: pthread_atfork runs this after `fork_prepare`, in the thread that forked (parent)
    // or its copy (child).
    unsafe { resizealloc::reservation::fork_finish() };
}

/// Own arenas: reads `RESIZEALLOC_*` once (process mode is the preloaded library's business:
/// here regions are only ever explicit) and resets the reservation's lock across fork.
fn configure_own() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut o = options::init_from_env();
        if o.region == RegionMode::Process {
            o.region = RegionMode::Markers;
            options::set(o);
        }
        // SAFETY: registers handlers with the right signature; they never unwind.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_done), Some(fork_done)) };
    });
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    if backend::preloaded().is_none() {
        configure_own();
    }
    m.add_class::<Region>()?;
    m.add_function(wrap_pyfunction!(region, m)?)?;
    m.add_function(wrap_pyfunction!(_set_decorator, m)?)?;
    m.add_function(wrap_pyfunction!(region_begin, m)?)?;
    m.add_function(wrap_pyfunction!(region_end, m)?)?;
    m.add_function(wrap_pyfunction!(region_depth, m)?)?;
    m.add_function(wrap_pyfunction!(trim, m)?)?;
    m.add_function(wrap_pyfunction!(_stats, m)?)?;
    m.add_function(wrap_pyfunction!(preloaded, m)?)?;
    m.add_function(wrap_pyfunction!(preloaded_path, m)?)?;
    m.add_function(wrap_pyfunction!(raw_wrapper_installed, m)?)?;
    m.add_function(wrap_pyfunction!(keep_numpy_handler, m)?)?;
    m.add_function(wrap_pyfunction!(_owns, m)?)?;
    m.add("NUMPY_HANDLER_NAME", numpy_mem::HANDLER_NAME)?;
    Ok(())
}
