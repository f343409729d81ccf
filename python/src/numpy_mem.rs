//! NumPy array data from the arena: a NEP 49 memory handler.
//!
//! NumPy allocates array data through the *current handler*, a `mem_handler` capsule held in a
//! context variable (`PyDataMem_SetHandler` / `PyDataMem_GetHandler` in NumPy's C-API table),
//! and every array keeps the capsule of the handler that allocated it, to free or resize its
//! data through it later, whenever and on whichever thread that happens.
//!
//! For each handler it replaces ("previous"), this module makes one wrapper handler: inside a
//! region on the calling thread it serves from the thread's arena, otherwise from the previous
//! handler; free and realloc go to the arena for its blocks (one range check) and to the
//! previous handler for the rest. A wrapper holds a reference to its previous handler and is
//! never freed (arrays that escaped may free through it at any time), so there is one per
//! distinct previous handler, made once.
//!
//! A region installs the wrapper for its block and restores the previous handler after it. The
//! handlers to restore form a per-thread stack that follows the thread's region nesting, so a
//! generator that suspends inside a block and ends after its caller's block still leaves every
//! context with the handler it had. If the block installed another handler itself, the exit
//! leaves that one in place.
//!
//! NumPy is never imported from here: the C-API table is looked up in `sys.modules` at each
//! region start until NumPy is there (NumPy 2: `numpy._core._multiarray_umath`, 1.x:
//! `numpy.core._multiarray_umath`); NumPy before 1.22 has no handlers and is left alone.

use core::ffi::{c_char, c_void, CStr};
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use std::cell::RefCell;
use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyString;
use resizealloc::router;

/// `PyDataMemAllocator` (numpy/ndarraytypes.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct PyDataMemAllocator {
    ctx: *mut c_void,
    malloc: Option<unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void>,
    calloc: Option<unsafe extern "C" fn(*mut c_void, usize, usize) -> *mut c_void>,
    realloc: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void>,
    free: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize)>,
}

/// `PyDataMem_Handler` (numpy/ndarraytypes.h): `name[127]`, `version` (1), the allocator.
#[repr(C)]
struct PyDataMemHandler {
    name: [c_char; 127],
    version: u8,
    allocator: PyDataMemAllocator,
}

const CAPSULE_NAME: &CStr = c"mem_handler";
pub const HANDLER_NAME: &str = "resizealloc_allocator";
const ALIGN: usize = resizealloc::arena::MIN_ALIGN;

/// Indices in NumPy's C-API table (`__multiarray_api.h`, the same in NumPy 1.22+ and 2.x).
const API_GET_FEATURE_VERSION: usize = 211;
const API_SET_HANDLER: usize = 304;
const API_GET_HANDLER: usize = 305;
/// `NPY_1_22_API_VERSION`: the first with memory handlers.
const FEATURE_HANDLERS: u32 = 0x0f;

type SetHandler = unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject;
type GetHandler = unsafe extern "C" fn() -> *mut ffi::PyObject;

/// NumPy's C-API table once found; null while NumPy is not loaded; `UNSUPPORTED` for a NumPy
/// without handlers.
static API: AtomicPtr<*const c_void> = AtomicPtr::new(ptr::null_mut());
const UNSUPPORTED: *mut *const c_void = 1 as *mut *const c_void;

/// The previous handler a wrapper chains to, and the wrapper capsule itself. Never freed.
struct Chain {
    prev: PyDataMemAllocator,
}

/// (previous capsule, wrapper capsule): both strong references, kept for the process's life.
struct Wrappers(Vec<(usize, usize)>);
static WRAPPERS: Mutex<Wrappers> = Mutex::new(Wrappers(Vec::new()));

thread_local! {
    /// Per region level of this thread: the handler its exit restores (a strong reference),
    /// or 0 when its start installed nothing.
    static SAVED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

fn api(py: Python<'_>) -> Option<*const *const c_void> {
    let t = API.load(Ordering::Acquire);
    if t == UNSUPPORTED {
        return None;
    }
    if !t.is_null() {
        return Some(t as *const *const c_void);
    }
    find_api(py)
}

/// The module names to look for, interned once (their hashes are cached, so the lookup at
/// each region start while NumPy is absent costs two dict probes, not two string builds).
static MODULE_KEYS: GILOnceCell<[Py<PyString>; 2]> = GILOnceCell::new();

#[cold]
#[inline(never)]
fn find_api(py: Python<'_>) -> Option<*const *const c_void> {
    // SAFETY: we hold the GIL (`py`); PyImport_GetModuleDict returns a borrowed dict.
    let modules = unsafe { ffi::PyImport_GetModuleDict() };
    if modules.is_null() {
        return None;
    }
    let keys = MODULE_KEYS.get_or_init(py, || {
        [
            PyString::intern(py, "numpy._core._multiarray_umath").unbind(),
            PyString::intern(py, "numpy.core._multiarray_umath").unbind(),
        ]
    });
    for key in keys {
        // SAFETY: GIL held; `modules` is a dict and `key` a live str; the result is borrowed
        // (PyDict_GetItem sets no error).
        let m = unsafe { ffi::PyDict_GetItem(modules, key.as_ptr()) };
        if m.is_null() {
            continue;
        }
        // SAFETY: GIL held; `m` is a live module; the result is a new reference or null.
        let cap = unsafe { ffi::PyObject_GetAttrString(m, c"_ARRAY_API".as_ptr()) };
        if cap.is_null() {
            // SAFETY: GIL held; clears the AttributeError (NumPy still importing).
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        // SAFETY: GIL held; NumPy's table capsule is unnamed (name NULL), as import_array reads it.
        let table = unsafe { ffi::PyCapsule_GetPointer(cap, ptr::null()) } as *mut *const c_void;
        // SAFETY: `cap` is the new reference taken above. The module keeps the capsule and its
        // table alive for the process (NumPy is never unloaded).
        unsafe { ffi::Py_DECREF(cap) };
        if table.is_null() {
            // SAFETY: GIL held.
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        // SAFETY: index 211 of NumPy's table is PyArray_GetNDArrayCFeatureVersion in every
        // NumPy with this module name (1.x and 2.x), `unsigned int (void)`.
        let version = unsafe {
            let f = *table.add(API_GET_FEATURE_VERSION);
            if f.is_null() {
                0
            } else {
                core::mem::transmute::<*const c_void, unsafe extern "C" fn() -> u32>(f)()
            }
        };
        if version < FEATURE_HANDLERS {
            API.store(UNSUPPORTED, Ordering::Release);
            return None;
        }
        API.store(table, Ordering::Release);
        return Some(table);
    }
    None
}

/// The table's handler functions.
fn handler_fns(table: *const *const c_void) -> (SetHandler, GetHandler) {
    // SAFETY: `table` passed the feature-version check, so slots 304 and 305 hold
    // PyDataMem_SetHandler and PyDataMem_GetHandler with these signatures.
    unsafe {
        (
            core::mem::transmute::<*const c_void, SetHandler>(*table.add(API_SET_HANDLER)),
            core::mem::transmute::<*const c_void, GetHandler>(*table.add(API_GET_HANDLER)),
        )
    }
}

/// The handler struct inside a `mem_handler` capsule, or null (error cleared).
fn handler_of(capsule: *mut ffi::PyObject) -> *const PyDataMemHandler {
    // SAFETY: GIL held by every caller; `capsule` is a live object.
    let h = unsafe { ffi::PyCapsule_GetPointer(capsule, CAPSULE_NAME.as_ptr()) };
    if h.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
    }
    h as *const PyDataMemHandler
}

fn is_ours(capsule: *mut ffi::PyObject) -> bool {
    let h = handler_of(capsule);
    // SAFETY: a live capsule's handler struct (capsules outlive their use here). Our wrappers
    // are the only handlers whose malloc is this function (compared by address).
    !h.is_null() && unsafe { (*h).allocator.malloc }.map(|f| f as usize) == Some(handler_malloc as *const () as usize)
}

/// The wrapper of the handler in `prev` (made once per previous handler). Borrowed: the cache
/// keeps it alive forever. Null when `prev` is not a usable handler.
fn wrapper_for(prev: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let mut cache = match WRAPPERS.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if let Some(&(_, w)) = cache.0.iter().find(|&&(p, _)| p == prev as usize) {
        return w as *mut ffi::PyObject;
    }
    let h = handler_of(prev);
    if h.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: a live handler struct; the copy stays valid because we keep `prev` alive.
    let prev_alloc = unsafe { (*h).allocator };
    if prev_alloc.malloc.is_none()
        || prev_alloc.calloc.is_none()
        || prev_alloc.realloc.is_none()
        || prev_alloc.free.is_none()
    {
        return ptr::null_mut();
    }
    let chain: &'static Chain = Box::leak(Box::new(Chain { prev: prev_alloc }));
    let mut name = [0 as c_char; 127];
    for (d, s) in name.iter_mut().zip(HANDLER_NAME.bytes()) {
        *d = s as c_char;
    }
    let handler: &'static PyDataMemHandler = Box::leak(Box::new(PyDataMemHandler {
        name,
        version: 1,
        allocator: PyDataMemAllocator {
            ctx: chain as *const Chain as *mut c_void,
            malloc: Some(handler_malloc),
            calloc: Some(handler_calloc),
            realloc: Some(handler_realloc),
            free: Some(handler_free),
        },
    }));
    // SAFETY: GIL held; the pointer is a leaked, never-freed handler; no destructor.
    let w = unsafe {
        ffi::PyCapsule_New(handler as *const PyDataMemHandler as *mut c_void, CAPSULE_NAME.as_ptr(), None)
    };
    if w.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return ptr::null_mut();
    }
    // SAFETY: GIL held; the cache's strong reference to `prev` (never released).
    unsafe { ffi::Py_INCREF(prev) };
    cache.0.push((prev as usize, w as usize));
    w
}

/// Region start (own arenas): installs the wrapper of the current handler, and remembers what
/// to restore.
pub fn enter(py: Python<'_>) {
    let saved = match api(py) {
        Some(table) => install(table),
        None => 0,
    };
    let _ = SAVED.try_with(|s| s.borrow_mut().push(saved));
}

fn install(table: *const *const c_void) -> usize {
    let (set, get) = handler_fns(table);
    // SAFETY: GIL held (callers hold `py`); a new reference or null with an error set.
    let cur = unsafe { get() };
    if cur.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return 0;
    }
    if is_ours(cur) {
        // SAFETY: the reference `get` returned.
        unsafe { ffi::Py_DECREF(cur) };
        return 0;
    }
    let w = wrapper_for(cur);
    // SAFETY: the reference `get` returned (the cache holds its own).
    unsafe { ffi::Py_DECREF(cur) };
    if w.is_null() {
        return 0;
    }
    // SAFETY: GIL held; `w` is a live `mem_handler` capsule; returns the old handler (a new
    // reference) or null with an error set.
    let old = unsafe { set(w) };
    if old.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
    }
    old as usize
}

/// Installs the wrapper of the current handler in the calling context for good (own arenas):
/// regions then find it in place and neither set nor restore a handler. True when the current
/// handler is a wrapper afterwards; false when NumPy is not imported or has no handlers.
///
/// Outside regions the wrapper is the handler it wraps (every allocation and free goes to it),
/// so arrays behave as before; `get_handler_name()` reports the wrapper. What it saves:
/// `PyDataMem_SetHandler` sets a context variable, which copies a node of the context's map
/// and makes a token, about 2,000 instructions; a region sets one at its start and one at its
/// end, a quarter of a 1 KiB NumPy step (scripts/bench_numpy.py).
pub fn keep(py: Python<'_>) -> bool {
    let Some(table) = api(py) else {
        return false;
    };
    let old = install(table);
    if old != 0 {
        // SAFETY: the reference `install` returned; nothing will restore it.
        unsafe { ffi::Py_DECREF(old as *mut ffi::PyObject) };
    }
    let (_, get) = handler_fns(table);
    // SAFETY: GIL held (`py`); a new reference or null with an error set.
    let cur = unsafe { get() };
    if cur.is_null() {
        // SAFETY: GIL held.
        unsafe { ffi::PyErr_Clear() };
        return false;
    }
    let ours = is_ours(cur);
    // SAFETY: the reference `get` returned.
    unsafe { ffi::Py_DECREF(cur) };
    ours
}

/// Region end (own arenas): restores the handler its start replaced, unless the block
/// installed a handler of its own.
pub fn exit(py: Python<'_>) {
    let saved = SAVED.try_with(|s| s.borrow_mut().pop()).ok().flatten().unwrap_or(0);
    if saved == 0 {
        return;
    }
    let old = saved as *mut ffi::PyObject;
    if let Some(table) = api(py) {
        let (set, get) = handler_fns(table);
        // SAFETY: GIL held; a new reference or null with an error set.
        let cur = unsafe { get() };
        if cur.is_null() {
            // SAFETY: GIL held.
            unsafe { ffi::PyErr_Clear() };
        } else {
            let ours = is_ours(cur);
            // SAFETY: the reference `get` returned.
            unsafe { ffi::Py_DECREF(cur) };
            if ours {
                // SAFETY: GIL held; `old` is a live handler capsule (we hold a reference).
                let replaced = unsafe { set(old) };
                if replaced.is_null() {
                    // SAFETY: GIL held.
                    unsafe { ffi::PyErr_Clear() };
                } else {
                    // SAFETY: the new reference `set` returned.
                    unsafe { ffi::Py_DECREF(replaced) };
                }
            }
        }
    }
    // SAFETY: the reference `install` saved.
    unsafe { ffi::Py_DECREF(old) };
}

// ------------------------------------------------------------------ the handler's functions
// Called by NumPy with the GIL held, but written as if it were not: they use the core crate's
// thread state and atomics only. They never panic.

#[inline(always)]
fn chain(ctx: *mut c_void) -> &'static PyDataMemAllocator {
    // SAFETY: `ctx` is the leaked `Chain` of the wrapper NumPy called (set in `wrapper_for`).
    unsafe { &(*(ctx as *const Chain)).prev }
}

unsafe extern "C" fn handler_malloc(ctx: *mut c_void, size: usize) -> *mut c_void {
    if !matches!(router::route(), router::Route::Next) {
        // SAFETY: size >= 1 after max; ALIGN is a power of two.
        let p = unsafe { router::alloc(size.max(1), ALIGN) };
        if !p.is_null() {
            return p.cast();
        }
    }
    let prev = chain(ctx);
    // SAFETY: the previous handler, with its own context; checked non-null when wrapped.
    unsafe { prev.malloc.map_or(ptr::null_mut(), |f| f(prev.ctx, size)) }
}

unsafe extern "C" fn handler_calloc(ctx: *mut c_void, nelem: usize, elsize: usize) -> *mut c_void {
    if let Some(total) = nelem.checked_mul(elsize) {
        if !matches!(router::route(), router::Route::Next) {
            // SAFETY: size >= 1 after max; ALIGN is a power of two.
            let p = unsafe { router::alloc_zeroed(total.max(1), ALIGN, 0) };
            if !p.is_null() {
                return p.cast();
            }
        }
    }
    let prev = chain(ctx);
    // SAFETY: as in handler_malloc.
    unsafe { prev.calloc.map_or(ptr::null_mut(), |f| f(prev.ctx, nelem, elsize)) }
}

unsafe extern "C" fn handler_realloc(ctx: *mut c_void, p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: realloc(NULL, n) is malloc(n).
        return unsafe { handler_malloc(ctx, size) };
    }
    let prev = chain(ctx);
    if router::owns(p.cast()) {
        // SAFETY: an arena block this handler served (NumPy passes the array's own data);
        // size >= 1 after max; the fallback is the previous handler, which then owns the block
        // and gets its free through this same wrapper.
        return unsafe {
            router::realloc_owned(p.cast(), size.max(1), ALIGN, 0, |n, _| {
                prev.malloc.map_or(ptr::null_mut(), |f| f(prev.ctx, n).cast())
            })
        }
        .cast();
    }
    // SAFETY: the previous handler's block.
    unsafe { prev.realloc.map_or(ptr::null_mut(), |f| f(prev.ctx, p, size)) }
}

unsafe extern "C" fn handler_free(ctx: *mut c_void, p: *mut c_void, size: usize) {
    // SAFETY: `p` is null, a live arena block, or a block of the previous handler.
    if unsafe { router::free_fast(p.cast()) } {
        return;
    }
    if router::owns(p.cast()) {
        // SAFETY: a live arena block.
        unsafe { router::free_owned(p.cast()) };
        return;
    }
    let prev = chain(ctx);
    // SAFETY: the previous handler's block (or null, which handlers accept), with its size.
    unsafe {
        if let Some(f) = prev.free {
            f(prev.ctx, p, size)
        }
    }
}
