//! The program's code made writable for the patches, and read-execute again: executable
//! throughout (the code written may be the C library's, whose `mprotect` puts it back).

const PAGE: u64 = 4096;

/// Makes the pages covering each span of `spans` (loaded addresses of an object's code)
/// read-write-execute (`writable`) or read-execute; whether every change took.
pub(crate) fn set_writable(spans: &[(u64, u64)], writable: bool) -> bool {
    let prot = if writable {
        libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC
    } else {
        libc::PROT_READ | libc::PROT_EXEC
    };
    spans.iter().all(|&(s, e)| {
        let start = s & !(PAGE - 1);
        let len = (e.next_multiple_of(PAGE) - start) as usize;
        // SAFETY: pages of an object's own code: their protection changes, not their
        // contents or mapping.
        unsafe { libc::mprotect(start as *mut libc::c_void, len, prot) == 0 }
    })
}
