//! libipt, Intel's reference decoder, as a peer in the benches: Debian's libipt2 (2.0.5),
//! loaded at run time with `dlopen`, so that the benches build and run without it (they say
//! so and time perfaux alone). Bound by hand: only the calls the benches make, with the
//! structures' prefixes they read (libipt copies a shorter structure than its own partially,
//! and takes a configuration shorter than its own with the rest zero:
//! `pt_config_from_user`); a longer one than its own it would clear past its end, so none
//! given here is.

// Each bench uses a part of it.
#![allow(dead_code)]

use std::ffi::c_void;

/// The prefix of `struct pt_config` the benches set: its size, and the trace's bounds.
#[repr(C)]
pub struct Config {
    size: usize,
    begin: *const u8,
    end: *const u8,
}

impl Config {
    /// A configuration for `trace` (which must outlive the decoders made from it).
    pub fn new(trace: &[u8]) -> Config {
        Config {
            size: std::mem::size_of::<Config>(),
            begin: trace.as_ptr(),
            end: trace.as_ptr_range().end,
        }
    }
}

/// `struct pt_packet`'s prefix: its type, size and the first 16 bytes of its payload (an IP
/// packet's compression and IP, a TNT's bit count and bits).
#[repr(C)]
#[derive(Default)]
pub struct Packet {
    pub kind: u32,
    pub size: u8,
    pad: [u8; 3],
    pub payload: [u64; 2],
}

/// Packet types (`enum pt_packet_type`).
pub const PPT_FUP: u32 = 5;
pub const PPT_TIP: u32 = 6;
pub const PPT_TIP_PGE: u32 = 7;
pub const PPT_TIP_PGD: u32 = 8;
pub const PPT_TNT_8: u32 = 9;
pub const PPT_TNT_64: u32 = 10;

/// `-pte_eos`: the end of the trace.
pub const PTE_EOS: i32 = -7;
/// `pts_event_pending`.
pub const PTS_EVENT_PENDING: i32 = 1;
/// `pts_eos`.
pub const PTS_EOS: i32 = 4;

type Alloc = unsafe extern "C" fn(*const Config) -> *mut c_void;
type Free = unsafe extern "C" fn(*mut c_void);
type Step = unsafe extern "C" fn(*mut c_void) -> i32;
type Next = unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> i32;
type GetImage = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type AddFile = unsafe extern "C" fn(*mut c_void, *const i8, u64, u64, *const c_void, u64) -> i32;

/// The decoder functions of one kind (packet, instruction, block).
#[derive(Clone, Copy)]
pub struct Decoder {
    alloc: Alloc,
    free: Free,
    sync_forward: Step,
    next: Next,
    /// The event query (instruction and block decoders).
    event: Option<Next>,
    get_image: Option<GetImage>,
}

/// The loaded library's functions.
pub struct Libipt {
    pub packets: Decoder,
    pub insns: Decoder,
    pub blocks: Decoder,
    image_add_file: AddFile,
}

/// A symbol of libipt as the function type `F`.
///
/// # Safety
/// `F` is the C signature of the symbol `p` is (intel-pt.h), and the library stays loaded.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the caller's contract; `F` is a function pointer of a pointer's size.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

impl Libipt {
    /// libipt, or why not (said by the caller).
    pub fn load() -> Result<Libipt, String> {
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed, so the
        // functions taken from it stay valid for the process's life.
        let h = unsafe { libc::dlopen(c"libipt.so.2".as_ptr(), libc::RTLD_NOW) };
        if h.is_null() {
            return Err("libipt.so.2 not found (Debian: apt-get install libipt2)".into());
        }
        let sym = |name: &str| -> Result<*mut c_void, String> {
            let c = std::ffi::CString::new(name).unwrap();
            // SAFETY: a live handle and a NUL-terminated name.
            let p = unsafe { libc::dlsym(h, c.as_ptr()) };
            if p.is_null() {
                Err(format!("libipt.so.2 has no {name}"))
            } else {
                Ok(p)
            }
        };
        let kind = |p: &str| -> Result<Decoder, String> {
            let get = |s: &str| sym(&format!("pt_{p}_{s}"));
            // Each symbol named is libipt 2's function of the field's type (intel-pt.h), and
            // the library is never unloaded: `as_fn`'s contract.
            Ok(Decoder {
                // SAFETY: see above.
                alloc: unsafe { as_fn(get("alloc_decoder")?) },
                // SAFETY: see above.
                free: unsafe { as_fn(get("free_decoder")?) },
                // SAFETY: see above.
                sync_forward: unsafe { as_fn(get("sync_forward")?) },
                // SAFETY: see above.
                next: unsafe { as_fn(get("next")?) },
                // SAFETY: see above.
                event: get("event").ok().map(|e| unsafe { as_fn(e) }),
                // SAFETY: see above.
                get_image: get("get_image").ok().map(|e| unsafe { as_fn(e) }),
            })
        };
        Ok(Libipt {
            packets: kind("pkt")?,
            insns: kind("insn")?,
            blocks: kind("blk")?,
            // SAFETY: as above.
            image_add_file: unsafe { as_fn(sym("pt_image_add_file")?) },
        })
    }
}

/// A libipt decoder of `trace`, freed when dropped.
pub struct Session<'t> {
    d: Decoder,
    raw: *mut c_void,
    _trace: std::marker::PhantomData<&'t [u8]>,
}

impl<'t> Session<'t> {
    /// A decoder of kind `d` over `trace` (libipt copies the configuration; it reads the
    /// trace while the session lives).
    pub fn new(d: Decoder, trace: &'t [u8]) -> Session<'t> {
        let cfg = Config::new(trace);
        // SAFETY: `cfg` is a valid prefix of pt_config (module doc) whose bounds are `trace`'s,
        // which outlives the session.
        let raw = unsafe { (d.alloc)(&cfg) };
        assert!(!raw.is_null(), "libipt's decoder allocation");
        Session {
            d,
            raw,
            _trace: std::marker::PhantomData,
        }
    }

    pub fn sync_forward(&mut self) -> i32 {
        // SAFETY: a live decoder.
        unsafe { (self.d.sync_forward)(self.raw) }
    }

    /// The next packet, instruction or block into `out`, a prefix of libipt's structure.
    pub fn next<T>(&mut self, out: &mut T) -> i32 {
        // SAFETY: a live decoder; libipt writes at most size_of::<T>() bytes into `out`.
        unsafe { (self.d.next)(self.raw, (out as *mut T).cast(), std::mem::size_of::<T>()) }
    }

    /// The pending event into `out`, a prefix of `struct pt_event`.
    pub fn event<T>(&mut self, out: &mut T) -> i32 {
        let f = self.d.event.expect("an instruction or block decoder");
        // SAFETY: as for `next`.
        unsafe { f(self.raw, (out as *mut T).cast(), std::mem::size_of::<T>()) }
    }

    /// Maps `size` bytes of the file at `path` at `vaddr` in the decoder's image.
    pub fn add_file(&mut self, lib: &Libipt, path: &std::path::Path, size: u64, vaddr: u64) -> i32 {
        let get = self.d.get_image.expect("an instruction or block decoder");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a live decoder; its image lives as long as it does.
        let image = unsafe { get(self.raw) };
        // SAFETY: a live image, a NUL-terminated path (libipt copies it), no address space.
        unsafe { (lib.image_add_file)(image, c.as_ptr(), 0, size, std::ptr::null(), vaddr) }
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // SAFETY: the decoder this session allocated, freed once.
        unsafe { (self.d.free)(self.raw) }
    }
}
