//! Probes: the statics instrumented code enters, and the guards whose drop marks the return.
//!
//! The hot path when nothing observes the thread or the probe is one thread-local load (the
//! writer slot), one relaxed load (the probe's hook word) and a branch; the guard's drop tests
//! one byte of the guard. A probe's hook word starts non-zero ([`HOOK_UNREGISTERED`]), so the
//! first entry of every probe takes the cold path once: it gets its id and joins the global
//! table there, and picks up hooks that were asked for by name before it ever ran.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::Relaxed};

/// Hook word bit: the probe was never entered (it may have no id yet, and its address is not
/// known): the next entry takes the cold path.
pub const HOOK_UNREGISTERED: u32 = 1;
/// Hook word bit: the core's hook handler is called on entry and exit.
pub const HOOK_ON: u32 = 2;

/// A process-wide probe id (1, 2, ...; never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProbeId(pub u32);

impl std::fmt::Display for ProbeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// What happened at a hooked probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeEvent {
    /// The probe was entered (called before the ENTER packet is written).
    Enter,
    /// The probe's guard was dropped (called after the EXIT packet is written).
    Exit,
}

/// How a probe knows its name: given, or the path of the function it sits in (computed once,
/// on registration, by [`trace_fn!`](crate::trace_fn)).
#[derive(Clone, Copy, Debug)]
pub enum ProbeName {
    /// A name given by the instrumented code.
    Static(&'static str),
    /// A function returning the enclosing function's path.
    FnPath(fn() -> &'static str),
    /// A name that is the probe's under any tracer: a tracer outside this copy of the crate
    /// (the preload runtime, [`crate::forward`]) names it so too, not after the function that
    /// enters it (a `tracing` span's probe, entered from the layer's code).
    Exact(&'static str),
}

/// An instrumentation point. Declare it as a `static` (the macros do), enter it with
/// [`Probe::enter`].
#[derive(Debug)]
pub struct Probe {
    pub(crate) hook: AtomicU32,
    pub(crate) id: AtomicU32,
    pub(crate) addr: AtomicUsize,
    pub(crate) entered: AtomicBool,
    name: ProbeName,
    file: &'static str,
    line: u32,
}

impl Probe {
    /// A probe named `name`, with no source location.
    pub const fn new(name: &'static str) -> Probe {
        Probe::with_location(name, "", 0)
    }

    /// A probe named `name` at `file:line`.
    pub const fn with_location(name: &'static str, file: &'static str, line: u32) -> Probe {
        Probe::build(ProbeName::Static(name), file, line)
    }

    /// A probe named `name` under any tracer ([`ProbeName::Exact`]), at `file:line`.
    pub const fn exact(name: &'static str, file: &'static str, line: u32) -> Probe {
        Probe::build(ProbeName::Exact(name), file, line)
    }

    /// Whether the probe is named [`ProbeName::Exact`]ly.
    pub fn is_exact(&self) -> bool {
        matches!(self.name, ProbeName::Exact(_))
    }

    /// A probe named after the function path `name` returns (see [`trace_fn!`](crate::trace_fn)).
    pub const fn from_fn_path(name: fn() -> &'static str, file: &'static str, line: u32) -> Probe {
        Probe::build(ProbeName::FnPath(name), file, line)
    }

    const fn build(name: ProbeName, file: &'static str, line: u32) -> Probe {
        Probe {
            hook: AtomicU32::new(HOOK_UNREGISTERED),
            id: AtomicU32::new(0),
            addr: AtomicUsize::new(0),
            entered: AtomicBool::new(false),
            name,
            file,
            line,
        }
    }

    /// The probe's name.
    pub fn name(&self) -> &'static str {
        match self.name {
            ProbeName::Static(s) | ProbeName::Exact(s) => s,
            ProbeName::FnPath(f) => f(),
        }
    }

    /// Source file ("" when unknown).
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// Source line (0 when unknown).
    pub fn line(&self) -> u32 {
        self.line
    }

    /// An address inside the instrumented function, captured on the first entry (0 before,
    /// and on targets other than x86_64).
    pub fn addr(&self) -> usize {
        self.addr.load(Relaxed)
    }

    /// Sets the probe's address before its first entry, for a probe made at run time by code
    /// that enters it on the function's behalf (perfaux-preload's hooks): the entering code's
    /// address, captured otherwise, would be the hook's. Kept by the first entry.
    pub fn set_addr(&self, addr: usize) {
        self.addr.store(addr, Relaxed);
    }

    #[inline(always)]
    pub(crate) fn current_id(&self) -> u32 {
        self.id.load(Relaxed)
    }
}

/// Guard flag: the entry was recorded in the thread's shadow stack.
pub(crate) const GUARD_OBSERVED: u8 = 1;
/// Guard flag: the entry called the hook handler, so the exit does too.
pub(crate) const GUARD_HOOKED: u8 = 2;
/// Guard flag: the entry hit a busy writer (a signal handler) and was counted lost; so is the
/// exit.
pub(crate) const GUARD_LOST: u8 = 4;
/// Guard flag: the entry went to the preload runtime ([`crate::forward`]); so does the exit.
pub(crate) const GUARD_FORWARDED: u8 = 8;

/// What an open call's guard keeps: its place on the thread's shadow stack, the stream
/// (epoch) it belongs to, and the `GUARD_*` flags. The writer fills it on entry and reads it
/// on return.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OpenCall {
    pub(crate) depth: u32,
    pub(crate) epoch: u32,
    pub(crate) flags: u8,
}

/// The enclosing function's path from the `type_name` of a function item declared in it
/// (used by [`trace_fn!`](crate::trace_fn)): drops the item's own name and closure segments.
pub fn fn_path_of(item_type_name: &'static str) -> &'static str {
    let mut s = item_type_name;
    if let Some(i) = s.rfind("::") {
        s = &s[..i];
    }
    while let Some(rest) = s.strip_suffix("::{{closure}}") {
        s = rest;
    }
    s
}

/// Enters a probe named by a string literal declared on the spot; evaluates to the guard.
///
/// ```
/// fn work() -> u32 {
///     let _g = perfaux_swtrace::probe!("work");
///     42
/// }
/// assert_eq!(work(), 42);
/// ```
#[macro_export]
macro_rules! probe {
    ($name:expr) => {{
        static PROBE: $crate::Probe = $crate::Probe::with_location($name, file!(), line!());
        PROBE.enter()
    }};
}

/// Enters a probe named after the enclosing function's path; evaluates to the guard.
///
/// ```
/// fn parse() {
///     let _g = perfaux_swtrace::trace_fn!();
/// }
/// parse();
/// ```
#[macro_export]
macro_rules! trace_fn {
    () => {{
        fn __swtrace_here() {}
        fn __swtrace_name() -> &'static str {
            $crate::probe::fn_path_of(::core::any::type_name_of_val(&__swtrace_here))
        }
        static PROBE: $crate::Probe = $crate::Probe::from_fn_path(__swtrace_name, file!(), line!());
        PROBE.enter()
    }};
}

/// Wraps whole functions in a probe named after them, `module::path::name` like
/// [`trace_fn!`](crate::trace_fn) (an attribute-like `macro_rules` wrapper; functions without
/// generics or `where` clauses).
///
/// ```
/// perfaux_swtrace::traced! {
///     /// Adds.
///     pub fn add(a: u32, b: u32) -> u32 { a + b }
/// }
/// assert_eq!(add(1, 2), 3);
/// ```
#[macro_export]
macro_rules! traced {
    ($($(#[$meta:meta])* $vis:vis fn $name:ident ( $($args:tt)* ) $(-> $ret:ty)? $body:block)*) => {
        $(
            $(#[$meta])*
            $vis fn $name($($args)*) $(-> $ret)? {
                let _swtrace_guard =
                    $crate::probe!(concat!(module_path!(), "::", stringify!($name)));
                $body
            }
        )*
    };
}
