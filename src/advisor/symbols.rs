//! Names and source lines of instruction pointers, at exit: the loaded objects from
//! `dl_iterate_phdr`, their symbol tables for the name of the function that holds a frame,
//! their DWARF through `addr2line` for its source line (inlined frames folded into the function
//! that holds the frame) and for a name where the symbol table has none, and `object+offset`
//! where there is neither. An address in no loaded object (its library was `dlclose`d) prints
//! as itself: no frame makes the report fail.
//!
//! Names come from the symbol table because the report names every frame it has sampled (it
//! sums by function, and the folded stacks print them all) but prints lines for a few dozen:
//! DWARF's function entries are parsed a compilation unit at a time, which for a Rust program
//! with its dependencies cost more than the rest of the report together.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::CStr;
use std::path::{Path, PathBuf};

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
    /// Whether the file has a full symbol table (see [`has_full_symbol_table`]); read on first
    /// use.
    full_symbols: Option<bool>,
}

pub(super) struct Symbolizer {
    objects: Vec<Object>,
    /// [`Symbolizer::function`]'s answers by address.
    names: HashMap<usize, String>,
    /// [`Symbolizer::lookup`]'s answers by address.
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
                    full_symbols: None,
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
            names: HashMap::new(),
            cache: HashMap::new(),
        }
    }

    /// The name of the function that holds the frame of return address `ip`: the symbol table's
    /// (demangled, without a Rust hash or a compiler's clone suffix), else DWARF's, else
    /// `object+0xoffset` or the address.
    pub(super) fn function(&mut self, ip: usize) -> String {
        if let Some(n) = self.names.get(&ip) {
            return n.clone();
        }
        let n = match self.symbol_table_name(ip) {
            Some(n) => n,
            None => self.lookup(ip).function,
        };
        self.names.insert(ip, n.clone());
        n
    }

    /// The source line of return address `ip` in the function that holds its frame (DWARF's).
    pub(super) fn location(&mut self, ip: usize) -> Option<String> {
        self.lookup(ip).location
    }

    /// The symbol table's name, where the object has a full table: with the dynamic one alone,
    /// a function of its own (not exported) would take the name of an exported one below it, so
    /// DWARF (a separate debug file's, say) names those.
    fn symbol_table_name(&mut self, ip: usize) -> Option<String> {
        let o = self.objects.iter_mut().find(|o| ip >= o.lo && ip < o.hi)?;
        if !*o
            .full_symbols
            .get_or_insert_with(|| has_full_symbol_table(&o.path))
        {
            return None;
        }
        let probe = (ip - 1 - o.bias) as u64;
        table_name(o.loader()?, probe)
    }

    /// The symbol of the return address `ip` (the call instruction before it is looked up),
    /// from DWARF where there is debug info.
    fn lookup(&mut self, ip: usize) -> Symbol {
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
        let short = o
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let fallback = Symbol {
            function: format!("{short}+{probe:#x}"),
            location: None,
        };
        let Some(l) = o.loader() else { return fallback };
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
        match function.map(strip_hash).or_else(|| table_name(l, probe)) {
            Some(function) => Symbol { function, location },
            None => fallback,
        }
    }
}

impl Object {
    /// The object's symbol table and DWARF, read on first use; None when the file cannot be.
    fn loader(&mut self) -> Option<&addr2line::Loader> {
        self.loader
            .get_or_insert_with(|| addr2line::Loader::new(&self.path).ok())
            .as_ref()
    }
}

/// True when the ELF file at `path` (64-bit, little-endian) has a `SHT_SYMTAB` section: the
/// full symbol table, local functions included, not only the dynamic one. False for anything
/// else, and for a file that cannot be read.
fn has_full_symbol_table(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    const SHT_SYMTAB: u64 = 2;
    const ELF64_SECTION_HEADER: usize = 64;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut h = [0u8; 64];
    if f.read_exact_at(&mut h, 0).is_err() || h[..4] != *b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return false;
    }
    // Little-endian fields: e_shoff (8 bytes at 0x28), e_shentsize and e_shnum (2 at 0x3a,
    // 0x3c); a section header's sh_type (4 at 4).
    let le = |b: &[u8]| b.iter().rev().fold(0u64, |v, &x| v << 8 | x as u64);
    let shoff = le(&h[0x28..0x30]);
    let (entry, count) = (le(&h[0x3a..0x3c]) as usize, le(&h[0x3c..0x3e]) as usize);
    if entry != ELF64_SECTION_HEADER || count == 0 {
        return false; // not ELF64's headers, or none (or more than 0xff00: not worth reading)
    }
    let mut table = vec![0u8; entry * count];
    if f.read_exact_at(&mut table, shoff).is_err() {
        return false;
    }
    table
        .chunks_exact(entry)
        .any(|sh| le(&sh[4..8]) == SHT_SYMTAB)
}

/// The symbol-table name of the function holding object offset `probe`, demangled, without a
/// Rust hash or a clone suffix. The table has no sizes: a symbol far below the address is
/// likely not the function holding it (an internal function with no symbol of its own).
fn table_name(l: &addr2line::Loader, probe: u64) -> Option<String> {
    let s = l
        .find_symbol_info(probe)
        .filter(|s| probe - s.address() < FAR)?;
    let name = without_clone_suffix(s.name());
    Some(strip_hash(
        addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned(),
    ))
}

/// A C compiler's name for a part or a clone of a function (`f.cold`, `f.part.0`,
/// `f.isra.0`, `f.constprop.0`, `f.lto_priv.0`) as the function's own: DWARF names those after
/// the function.
fn without_clone_suffix(name: &str) -> &str {
    if name.starts_with("_Z") || name.starts_with("_R") {
        return name; // mangled: the demangler reads any suffix
    }
    let cut = [".cold", ".part.", ".isra.", ".constprop.", ".lto_priv."]
        .iter()
        .filter_map(|s| name.find(s))
        .min();
    match cut {
        Some(i) if i > 0 => &name[..i],
        _ => name,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_suffixes_are_cut_and_mangled_names_kept() {
        assert_eq!(without_clone_suffix("parse.cold"), "parse");
        assert_eq!(without_clone_suffix("parse.part.0"), "parse");
        assert_eq!(without_clone_suffix("parse.constprop.0.isra.0"), "parse");
        assert_eq!(without_clone_suffix("parse.lto_priv.3"), "parse");
        assert_eq!(without_clone_suffix("parse"), "parse");
        assert_eq!(without_clone_suffix(".cold"), ".cold");
        assert_eq!(
            without_clone_suffix("_ZN4core3fmt5write17h0123456789abcdefE.llvm.42"),
            "_ZN4core3fmt5write17h0123456789abcdefE.llvm.42"
        );
    }

    #[test]
    fn the_test_binary_has_a_full_symbol_table_and_other_files_do_not_count() {
        let exe = std::env::current_exe().unwrap();
        // Test binaries are not stripped: their .symtab is there.
        assert!(has_full_symbol_table(&exe));
        assert!(!has_full_symbol_table(Path::new("/nonexistent/file")));
        assert!(!has_full_symbol_table(Path::new("/proc/self/status")));
        let short = std::env::temp_dir().join(format!("resizealloc-elf-{}", std::process::id()));
        std::fs::write(&short, b"\x7fELF\x02\x01").unwrap();
        assert!(!has_full_symbol_table(&short), "a truncated header");
        let _ = std::fs::remove_file(&short);
    }
}
