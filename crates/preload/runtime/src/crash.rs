//! Crash survival for the thread that crashes: a fatal signal's handler ends that thread's
//! trace transaction, so that everything it wrote up to the crash is published in the
//! recorder's memory (the trace writer publishes aux_head only at a transaction's end), then
//! lets the signal take its default course (SA_RESETHAND: the faulting instruction faults
//! again, abort raises again), so the program ends as it would have.

const FATAL: [i32; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
    libc::SIGTRAP,
];

extern "C" fn on_fatal(sig: i32) {
    crate::thread::end_transaction_here();
    if sig == libc::SIGTRAP {
        // A trap does not repeat by itself: raise it again under the default action.
        // SAFETY: raise has no memory preconditions.
        unsafe { libc::raise(sig) };
    }
}

/// Installs the handler for the fatal signals the program has not claimed.
pub(crate) fn install() {
    for sig in FATAL {
        // SAFETY: sigaction reads and writes only the struct given; all-zero is a valid
        // sigaction.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above (a query: no new action).
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            continue;
        }
        // SAFETY: all-zero is a valid sigaction.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_fatal as extern "C" fn(i32) as usize;
        sa.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_ONSTACK;
        // SAFETY: sigemptyset writes the mask it is given.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: the handler is a plain extern "C" fn that only ends this thread's
        // transaction (and re-raises a trap).
        unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
    }
}
