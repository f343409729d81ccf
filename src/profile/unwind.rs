//! A fast walk of the calling thread's stack on x86-64: each frame's rule to find its caller
//! (where the caller's stack pointer, return address and frame pointer are) is read once from
//! the object's `.eh_frame` tables and kept in a fixed cache, so a walk costs a cache look-up
//! and two loads per frame, where the unwinder of libgcc_s interprets the tables again for
//! every frame of every walk (a few microseconds a stack, against a few hundred nanoseconds).
//!
//! It gives the frames `_Unwind_Backtrace` gives (the same instruction pointers and stack
//! addresses, see `stack.rs`), and declines, so that the caller asks the unwinder instead,
//! wherever a frame's rule is not one of the three shapes compiled code has: the caller's stack
//! pointer at a constant offset from the stack pointer or from the frame pointer, the return
//! address just below it, the frame pointer kept or saved at a constant offset. Signal frames,
//! rules that are DWARF expressions and hand-written code with unusual tables take that way.
//!
//! The object of an address is found by glibc's `_dl_find_object` (glibc 2.35 or later, looked
//! up at the profiler's start): it takes no lock and allocates nothing, and is asked for every
//! frame, so a rule cached for a library that was unloaded is never used for another one mapped
//! at the same address (entries are keyed by the address and the object's `.eh_frame_hdr`).
//! Without it the walk always declines.
//!
//! Nothing here allocates: the tables are read in place, the rule interpreter (gimli's) works
//! in storage of fixed size inside the cache.
//!
//! The rules are x86-64's; on other targets the walk does not exist and the unwinder takes
//! every stack (only the cache's type remains, empty of use).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use addr2line::gimli::{
    self, BaseAddresses, CfaRule, EhFrame, EhFrameHdr, LittleEndian, RegisterRule, UnwindContext,
    UnwindContextStorage, UnwindSection, UnwindTableRow, X86_64,
};

/// glibc's `struct dl_find_object`.
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *mut c_void,
    eh_frame: *mut c_void,
    reserved: [u64; 7],
}

type FindObject = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> c_int;

/// `_dl_find_object`, or 0 when this glibc has none.
static FIND_OBJECT: AtomicUsize = AtomicUsize::new(0);

/// Looks up `_dl_find_object`. Called once, at the profiler's start (`dlsym` may allocate).
pub(crate) fn start() {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
    FIND_OBJECT.store(f as usize, Ordering::Relaxed);
}

/// What a cached rule says about a frame.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    /// An empty slot.
    Empty,
    /// The caller's stack pointer is the frame's stack pointer plus `cfa_off`.
    FromSp,
    /// The caller's stack pointer is the frame pointer plus `cfa_off`.
    FromBp,
    /// The walk ends at this frame (no caller: the return address is undefined, or the address
    /// lies in no object or in none of its tables), as the unwinder's does.
    Last,
    /// A rule the walk does not follow: the caller asks the unwinder.
    Decline,
}

/// One cached rule. Invariant: `kind` is `FromSp` or `FromBp` only for a rule whose return
/// address lies at the caller's stack pointer less 8.
#[derive(Clone, Copy)]
struct Rule {
    /// The address looked up (0: empty).
    ip: usize,
    /// The `.eh_frame_hdr` of the object it lies in.
    hdr: usize,
    cfa_off: i32,
    /// Where the caller's frame pointer was saved, from the caller's stack pointer; 0: the
    /// frame pointer is unchanged.
    bp_off: i16,
    kind: Kind,
}

const EMPTY: Rule = Rule {
    ip: 0,
    hdr: 0,
    cfa_off: 0,
    bp_off: 0,
    kind: Kind::Empty,
};

/// Slots of the rule cache (a power of two).
const SLOTS: usize = 8192;

/// gimli's storage for the rules of one row, of fixed size (x86-64 code describes at most the
/// 16 general registers and the return address; `DW_CFA_remember_state` nests a few deep).
struct Fixed;
impl UnwindContextStorage<usize> for Fixed {
    type Rules = [(gimli::Register, RegisterRule<usize>); 24];
    type Stack = [UnwindTableRow<usize, Self>; 4];
}

/// The rule cache and the interpreter's working storage. Guarded by the profiler's lock.
pub(crate) struct Cache {
    rules: [Rule; SLOTS],
    ctx: Option<UnwindContext<usize, Fixed>>,
}

impl Cache {
    pub(crate) const fn new() -> Self {
        Cache {
            rules: [EMPTY; SLOTS],
            ctx: None,
        }
    }
}

/// The cache's size, for the profile's memory bound.
pub(crate) const CACHE_BYTES: usize = core::mem::size_of::<Cache>();

/// A walk's outcome.
#[derive(PartialEq, Eq, Debug)]
pub(crate) enum Walked {
    /// Every frame was given (or `emit` stopped the walk).
    Done,
    /// A frame's rule is not one this walk follows: what was given is to be thrown away and the
    /// stack taken by the unwinder.
    Declined,
}

#[cfg(target_arch = "x86_64")]
/// The registers a walk starts from: this function's own instruction and stack pointers and
/// the frame pointer. `#[inline(always)]` into [`walk`], so they are the walk's own frame's.
#[inline(always)]
fn registers() -> (usize, usize, usize) {
    let (ip, sp, bp): (usize, usize, usize);
    // SAFETY: reads three registers into outputs; touches no memory and no flags.
    unsafe {
        core::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        );
    }
    (ip, sp, bp)
}

/// Walks the calling thread's stack, innermost frame first, giving each frame's instruction
/// pointer (a return address, but for the walk's own frame) and its stack pointer at its call
/// into the frame inside it, as `_Unwind_GetIP` and `_Unwind_GetCFA` give them; `emit` returns
/// false to stop. At most `max` frames are followed.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub(crate) fn walk(
    cache: &mut Cache,
    max: usize,
    mut emit: impl FnMut(usize, usize) -> bool,
) -> Walked {
    if FIND_OBJECT.load(Ordering::Relaxed) == 0 {
        return Walked::Declined;
    }
    let (mut ip, mut sp, mut bp) = registers();
    if !emit(ip, sp) {
        return Walked::Done;
    }
    for n in 0..max {
        // A return address may follow a call that never returns, at the very end of its
        // function: the call's own address is the one inside it.
        let look = if n == 0 { ip } else { ip - 1 };
        let r = rule(cache, look);
        let base = match r.kind {
            Kind::FromSp => sp,
            Kind::FromBp => bp,
            Kind::Last => return Walked::Done,
            Kind::Decline | Kind::Empty => return Walked::Declined,
        };
        let cfa = base.wrapping_add(r.cfa_off as isize as usize);
        // A caller's frame lies above its callee's, on the same stack.
        if cfa <= sp || cfa & 7 != 0 || cfa - sp > 1 << 30 {
            return Walked::Declined;
        }
        // SAFETY: by the frame's rule (its object's own tables), the return address is the
        // word below the caller's stack pointer, and a saved frame pointer lies between the
        // two frames: both on this thread's stack, above `sp`, so mapped.
        unsafe {
            if r.bp_off != 0 {
                bp = *((cfa as isize + r.bp_off as isize) as *const usize);
            }
            ip = *((cfa - 8) as *const usize);
        }
        sp = cfa;
        if ip == 0 || !emit(ip, sp) {
            return Walked::Done;
        }
    }
    Walked::Done
}

/// The rule of the frame whose instruction is at `ip`: from the cache, else read from the
/// tables of the object `ip` lies in.
fn rule(cache: &mut Cache, ip: usize) -> Rule {
    let mut obj = DlFindObject {
        flags: 0,
        map_start: core::ptr::null_mut(),
        map_end: core::ptr::null_mut(),
        link_map: core::ptr::null_mut(),
        eh_frame: core::ptr::null_mut(),
        reserved: [0; 7],
    };
    // SAFETY: `walk` checked that the function exists; it is `_dl_find_object`, whose
    // signature this is. It writes `obj` and takes no lock.
    let found = unsafe {
        let f: FindObject = core::mem::transmute(FIND_OBJECT.load(Ordering::Relaxed));
        f(ip as *mut c_void, &mut obj)
    };
    if found != 0 || obj.eh_frame.is_null() {
        return Rule {
            kind: Kind::Last,
            ..EMPTY
        };
    }
    let hdr = obj.eh_frame as usize;
    let slot = ip.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros());
    let cached = cache.rules[slot];
    if cached.ip == ip && cached.hdr == hdr {
        return cached;
    }
    let r = read_rule(cache, ip, hdr, obj.map_end as usize);
    cache.rules[slot] = r;
    r
}

/// `DW_EH_PE_pcrel | DW_EH_PE_sdata4`, `DW_EH_PE_udata4`, `DW_EH_PE_datarel | DW_EH_PE_sdata4`:
/// the encodings of `.eh_frame_hdr` that the linkers write.
const EH_FRAME_PTR_ENC: u8 = 0x1b;
const FDE_COUNT_ENC: u8 = 0x03;
const TABLE_ENC: u8 = 0x3b;

#[cold]
#[inline(never)]
fn read_rule(cache: &mut Cache, ip: usize, hdr: usize, map_end: usize) -> Rule {
    let decline = Rule {
        ip,
        hdr,
        kind: Kind::Decline,
        ..EMPTY
    };
    // The header's own length: 4 bytes of encodings, the `.eh_frame` pointer, the count, and a
    // sorted table of (start, FDE) pairs.
    // SAFETY: `hdr` is the loaded `.eh_frame_hdr` segment of a loaded object; its first 12
    // bytes are the fixed part of the header.
    let head = unsafe { core::slice::from_raw_parts(hdr as *const u8, 12) };
    if head[0] != 1
        || head[1] != EH_FRAME_PTR_ENC
        || head[2] != FDE_COUNT_ENC
        || head[3] != TABLE_ENC
    {
        return decline;
    }
    let eh_frame = (hdr + 4)
        .wrapping_add(i32::from_le_bytes([head[4], head[5], head[6], head[7]]) as isize as usize);
    let count = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
    if eh_frame >= map_end {
        return decline;
    }
    // SAFETY: the table follows the header in the same segment: `count` entries of 8 bytes.
    let hdr_bytes = unsafe { core::slice::from_raw_parts(hdr as *const u8, 12 + count * 8) };
    // SAFETY: `.eh_frame` lies in the object's mapping, which ends at `map_end`; the reader
    // reads only the entries the header's table points to, inside the section.
    let frame_bytes =
        unsafe { core::slice::from_raw_parts(eh_frame as *const u8, map_end - eh_frame) };
    let bases = BaseAddresses::default()
        .set_eh_frame_hdr(hdr as u64)
        .set_eh_frame(eh_frame as u64);
    let Ok(parsed) = EhFrameHdr::new(hdr_bytes, LittleEndian).parse(&bases, 8) else {
        return decline;
    };
    let Some(table) = parsed.table() else {
        return decline;
    };
    let mut frame = EhFrame::new(frame_bytes, LittleEndian);
    frame.set_address_size(8);
    let fde = match table.fde_for_address(&frame, &bases, ip as u64, EhFrame::cie_from_offset) {
        Ok(fde) => fde,
        Err(gimli::Error::NoUnwindInfoForAddress) => {
            return Rule {
                kind: Kind::Last,
                ..decline
            }
        }
        Err(_) => return decline,
    };
    if fde.cie().return_address_register() != X86_64::RA || fde.cie().is_signal_trampoline() {
        return decline;
    }
    let ctx = cache.ctx.get_or_insert_with(UnwindContext::new_in);
    let Ok(row) = fde.unwind_info_for_address(&frame, &bases, ctx, ip as u64) else {
        return decline;
    };
    to_rule(row, decline)
}

/// The walk's form of one row of the tables, or `decline` as it is.
fn to_rule(row: &UnwindTableRow<usize, Fixed>, decline: Rule) -> Rule {
    let (kind, cfa_off) = match *row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RSP => {
            (Kind::FromSp, offset)
        }
        CfaRule::RegisterAndOffset { register, offset } if register == X86_64::RBP => {
            (Kind::FromBp, offset)
        }
        _ => return decline,
    };
    let Ok(cfa_off) = i32::try_from(cfa_off) else {
        return decline;
    };
    match row.register(X86_64::RA) {
        RegisterRule::Offset(-8) => {}
        RegisterRule::Undefined => {
            return Rule {
                kind: Kind::Last,
                ..decline
            }
        }
        _ => return decline,
    }
    let bp_off = match row.register(X86_64::RBP) {
        RegisterRule::Undefined | RegisterRule::SameValue => 0,
        RegisterRule::Offset(n) if n != 0 => match i16::try_from(n) {
            Ok(n) => n,
            Err(_) => return decline,
        },
        _ => return decline,
    };
    Rule {
        kind,
        cfa_off,
        bp_off,
        ..decline
    }
}
