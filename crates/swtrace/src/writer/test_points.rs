//! Test-only points where a test runs a closure in place of a signal landing there
//! (`signal_tests`).

use std::cell::Cell;

/// Where a test runs a closure in place of a signal landing there (see `signal_tests`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Point {
    /// A probe entry read the slot and has not looked at it yet.
    ProbeSlotRead,
    /// A probe event found the thread observed and is about to take the busy section.
    EnterBefore,
    /// A probe entry holds the busy section and has not read the mode yet.
    EnterInside,
    /// As `EnterBefore`, for a return.
    ExitBefore,
    /// As `EnterInside`, for a return.
    ExitInside,
    /// A control call (pause, resume, set_limit, uninstall) is about to take the busy section.
    ControlBefore,
    /// `publish_slot` decided what the slot holds and has not stored it.
    SlotDecided,
    /// The thread's ThreadTrace is being released: TRACE is cleared, the slot not yet.
    Release,
}

/// A point and the closure to run there.
type Armed = Option<(Point, fn())>;

thread_local! {
    /// The one-shot closure to run at a point.
    static AT_POINT: Cell<Armed> = const { Cell::new(None) };
}

/// Arms `f` to run once when this thread next reaches `point`.
pub(crate) fn arm_point(point: Point, f: fn()) {
    AT_POINT.with(|a| a.set(Some((point, f))));
}

pub(crate) fn at_point(point: Point) {
    if let Some((p, f)) = AT_POINT.with(Cell::get)
        && p == point
    {
        AT_POINT.with(|a| a.set(None));
        f();
    }
}
