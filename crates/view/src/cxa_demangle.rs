//! C++ names that `cpp_demangle` cannot read, read by the C++ runtime's own demangler
//! (`__cxa_demangle` of libstdc++, the code c++filt runs), loaded when first needed.
//!
//! `cpp_demangle` 0.4 refuses some names g++ emits, e.g. a template argument pack inside an
//! expression (`std::swap<std::thread::id>`'s `enable_if<__and_<...>::value>`), which then
//! stayed mangled in reports where perf and c++filt show them demangled. No crate reads them
//! all; the runtime that comes with every g++ program does.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

/// `char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status)`.
type CxaDemangle =
    unsafe extern "C" fn(*const c_char, *mut c_char, *mut usize, *mut c_int) -> *mut c_char;

/// The demangler, or `None` where libstdc++ cannot be loaded (the name then stays as it is).
fn demangler() -> Option<CxaDemangle> {
    static FOUND: OnceLock<Option<usize>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        // SAFETY: dlopen gets a NUL-terminated name; the library stays loaded for the
        // process's life (it is never dlclosed), so addresses in it stay valid.
        let lib = unsafe {
            libc::dlopen(
                c"libstdc++.so.6".as_ptr(),
                libc::RTLD_LAZY | libc::RTLD_LOCAL,
            )
        };
        if lib.is_null() {
            return None;
        }
        // SAFETY: `lib` is a handle dlopen returned; the name is NUL-terminated.
        let f = unsafe { libc::dlsym(lib, c"__cxa_demangle".as_ptr()) };
        (!f.is_null()).then_some(f as usize)
    });
    let addr = (*found)?;
    // SAFETY: `addr` is `__cxa_demangle` of a loaded libstdc++, whose signature is the
    // Itanium C++ ABI's, the type's.
    Some(unsafe { std::mem::transmute::<*mut c_void, CxaDemangle>(addr as *mut c_void) })
}

/// `sym` demangled by the C++ runtime, if it is loaded and reads the name.
pub(crate) fn demangle(sym: &str) -> Option<String> {
    let f = demangler()?;
    let name = CString::new(sym).ok()?;
    let mut status: c_int = -1;
    // SAFETY: `name` is NUL-terminated and lives across the call; a null buffer asks the
    // demangler to allocate the result with malloc, freed below.
    let out = unsafe {
        f(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        )
    };
    if out.is_null() {
        return None;
    }
    // SAFETY: a non-null result is a NUL-terminated string the demangler malloc'ed.
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: `out` was malloc'ed by the demangler, is freed once and not used again.
    unsafe { libc::free(out.cast()) };
    (status == 0).then_some(text)
}
