//! Names and source lines of instruction pointers, at exit: the loaded objects from
//! `dl_iterate_phdr`, their DWARF through `addr2line` (demangled, inlined frames folded into
//! the function that holds the frame), their symbol tables where there is no debug info, and
//! `object+offset` where there is neither. An address in no loaded object (its library was
//! `dlclose`d) prints as itself: no frame makes the report fail.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::CStr;
use std::path::PathBuf;

/// What a frame's instruction pointer resolves to.
#[derive(Clone)]
pub(super) struct Symbol {
    /// The function that holds the frame (demangled), or `object+0xoffset`, or `0xaddress`.
    pub(super) function: String,
    /// `file:line` of the address, where debug info has it.
    pub(super) location: Option<String>,
}

struct Object {
    path: PathBuf,
    bias: usize,
    lo: usize,
    hi: usize,
    /// Loaded on first use; None inside when the file could not be read.
    loader: Option<Option<addr2line::Loader>>,
}

pub(super) struct Symbolizer {
    objects: Vec<Object>,
    cache: HashMap<usize, Symbol>,
}

impl Symbolizer {
    pub(super) fn new() -> Self {
        let mut objects: Vec<Object> = Vec::new();
        extern "C" fn visit(
            info: *mut libc::dl_phdr_info,
            _: usize,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: `data` is the Vec passed below; the loader passes a valid info block.
            let (objects, info) = unsafe { (&mut *(data as *mut Vec<Object>), &*info) };
            let (lo, hi) = crate::profile::loaded_range(info);
            let name = if info.dlpi_name.is_null() {
                String::new()
            } else {
                // SAFETY: a NUL-terminated string from the loader.
                unsafe { CStr::from_ptr(info.dlpi_name) }
                    .to_string_lossy()
                    .into_owned()
            };
            let path = if name.is_empty() {
                std::fs::read_link("/proc/self/exe").unwrap_or_default()
            } else {
                PathBuf::from(name)
            };
            if lo < hi {
                objects.push(Object {
                    path,
                    bias: info.dlpi_addr as usize,
                    lo,
                    hi,
                    loader: None,
                });
            }
            0
        }
        // SAFETY: `visit` matches the callback type; `objects` outlives the call.
        unsafe {
            libc::dl_iterate_phdr(
                Some(visit),
                &mut objects as *mut Vec<Object> as *mut libc::c_void,
            )
        };
        Symbolizer {
            objects,
            cache: HashMap::new(),
        }
    }

    /// The symbol of the return address `ip` (the call instruction before it is looked up).
    pub(super) fn lookup(&mut self, ip: usize) -> Symbol {
        if let Some(s) = self.cache.get(&ip) {
            return s.clone();
        }
        let s = self.resolve(ip);
        self.cache.insert(ip, s.clone());
        s
    }

    fn resolve(&mut self, ip: usize) -> Symbol {
        let Some(o) = self.objects.iter_mut().find(|o| ip >= o.lo && ip < o.hi) else {
            return Symbol {
                function: format!("{ip:#x}"),
                location: None,
            };
        };
        let probe = (ip - 1 - o.bias) as u64;
        let loader = o
            .loader
            .get_or_insert_with(|| addr2line::Loader::new(&o.path).ok())
            .as_ref();
        let short = o
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let fallback = Symbol {
            function: format!("{short}+{probe:#x}"),
            location: None,
        };
        let Some(l) = loader else { return fallback };
        let mut function = None;
        let mut location = None;
        if let Ok(mut frames) = l.find_frames(probe) {
            // Innermost inlined function first; the last one holds the frame.
            while let Ok(Some(f)) = frames.next() {
                if let Some(n) = f.function.as_ref().and_then(|n| n.demangle().ok()) {
                    function = Some(n.into_owned());
                }
                if let Some(loc) = f.location {
                    if let (Some(file), Some(line)) = (loc.file, loc.line) {
                        location = Some(format!("{}:{line}", short_path(file)));
                    }
                }
            }
        }
        if function.is_none() {
            // The symbol table has no sizes: a symbol far below the address is likely not the
            // function holding it (an internal function with no symbol of its own).
            function = l
                .find_symbol_info(probe)
                .filter(|s| probe - s.address() < FAR)
                .map(|s| addr2line::demangle_auto(Cow::Borrowed(s.name()), None).into_owned());
        }
        match function {
            Some(f) => Symbol {
                function: strip_hash(f),
                location,
            },
            None => fallback,
        }
    }
}

/// How far past a symbol (with no debug info) an address may lie and still be named after it.
const FAR: u64 = 16 << 10;

/// The last two components of a source path.
fn short_path(file: &str) -> &str {
    let mut cut = file.len();
    for _ in 0..2 {
        match file[..cut].rfind('/') {
            Some(i) => cut = i,
            None => return file,
        }
    }
    &file[cut + 1..]
}

/// A Rust symbol without its `::h0123456789abcdef` hash.
fn strip_hash(mut f: String) -> String {
    if let Some(i) = f.rfind("::h") {
        if f.len() - i == 19 && f[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) {
            f.truncate(i);
        }
    }
    f
}
