//! A thread's writer held by code that enters probes on the thread's behalf at a high rate
//! (perfaux-preload's compiler hooks, two a traced call): [`Lane::enter`] and [`Lane::end`]
//! are [`Probe::enter`] and the guard's drop without their thread-local reads (the writer
//! slot on entry, the thread's state on return), which the runtime already did for its own
//! state. Same result in every case: a probe with a hook, or a thread whose slot is clear
//! (paused, not observed), takes the probe's own path.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;

use crate::ProbeGuard;
use crate::probe::{GUARD_OBSERVED, OpenCall, Probe};
use crate::writer::{self, ThreadTrace};

/// The calling thread's writer state. Not `Send`: only its thread may use it.
#[derive(Clone, Copy, Debug)]
pub struct Lane {
    trace: NonNull<ThreadTrace>,
    _not_send: PhantomData<*const ()>,
}

impl Lane {
    /// The calling thread's writer state, if one was ever made (the core made it when it
    /// installed a writer or a shadow stack user asked for one).
    ///
    /// # Safety
    /// The lane is used on this thread only, and not after the thread's thread-local
    /// destructors ran (the state is freed by a pthread key's destructor, after them) nor, in
    /// a forked child, after [`crate::writer::forget_after_fork`] (the state is the parent's).
    pub unsafe fn current() -> Option<Lane> {
        NonNull::new(writer::thread_trace_ptr().cast_mut()).map(|trace| Lane {
            trace,
            _not_send: PhantomData,
        })
    }

    #[inline(always)]
    fn trace(&self) -> &ThreadTrace {
        // SAFETY: `current`'s contract: the state lives while the lane is used.
        unsafe { self.trace.as_ref() }
    }

    /// Enters `probe` on the lane's thread: as `probe.enter()`.
    #[inline(always)]
    #[must_use = "the probe's call ends when the guard drops or goes to `end`"]
    pub fn enter(&self, probe: &'static Probe) -> ProbeGuard {
        let t = self.trace();
        // A published slot is always this state (`publish_slot`), so `live` is the slot's
        // test; anything else goes the probe's way.
        if probe.hook.load(Relaxed) != 0 || !t.live.load(Relaxed) {
            return probe.enter();
        }
        ProbeGuard::new(probe, t.enter_with::<true>(probe, 0))
    }

    /// Marks the return of `guard`'s call on the lane's thread, as its drop would; the guard
    /// is left inert.
    #[inline(always)]
    pub fn end(&self, guard: &mut ProbeGuard) {
        if guard.flags == GUARD_OBSERVED {
            guard.flags = 0;
            self.trace().exit_with::<true>(OpenCall {
                depth: guard.depth,
                epoch: guard.epoch,
                flags: GUARD_OBSERVED,
            });
        } else {
            guard.drop_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{Event, decode};
    use crate::writer::{AuxRegion, MIN_REGION, Timing, WriterConfig, install, uninstall};

    static OUTER: Probe = Probe::new("lane_outer");
    static INNER: Probe = Probe::new("lane_inner");

    /// How one way of entering and ending calls drives the writer.
    trait Calls {
        fn enter(&self, p: &'static Probe) -> ProbeGuard;
        fn end(&self, g: ProbeGuard);
    }
    struct Direct;
    impl Calls for Direct {
        fn enter(&self, p: &'static Probe) -> ProbeGuard {
            p.enter()
        }
        fn end(&self, g: ProbeGuard) {
            drop(g);
        }
    }
    impl Calls for Lane {
        fn enter(&self, p: &'static Probe) -> ProbeGuard {
            Lane::enter(self, p)
        }
        fn end(&self, mut g: ProbeGuard) {
            Lane::end(self, &mut g);
            assert_eq!(g.flags, 0, "an ended guard is inert");
        }
    }

    /// Calls across a pause: one open before it and ended while paused, one made while paused,
    /// one open across the resume; `track` keeps the paused calls on the shadow stack.
    fn script(c: &dyn Calls, track: bool) -> Vec<String> {
        let mut aux = vec![0u8; MIN_REGION];
        // SAFETY: `aux` outlives the writer, uninstalled below.
        let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), aux.len()) }.unwrap();
        let mut cfg = WriterConfig::overwrite(region);
        cfg.timing = Timing::Periodic { every: 1000 };
        cfg.track_paused = track;
        install(cfg).unwrap();
        let a = c.enter(&OUTER);
        c.end(c.enter(&INNER));
        assert!(writer::pause());
        c.end(a);
        let b = c.enter(&OUTER);
        let d = c.enter(&INNER);
        assert!(writer::resume());
        c.end(c.enter(&INNER));
        c.end(d);
        c.end(b);
        let end = uninstall().unwrap().aux_head;
        let ids = [
            (OUTER.id().unwrap().0, "outer"),
            (INNER.id().unwrap().0, "inner"),
        ];
        let name = |id: u32| ids.iter().find(|x| x.0 == id).map_or("?", |x| x.1);
        decode(&aux[..end as usize])
            .iter()
            .map(|e| match e {
                Event::Enter { id, depth, .. } => format!("enter {} {depth}", name(*id)),
                Event::Exit { id, depth, .. } => format!("exit {:?} {depth}", id.map(name)),
                Event::Sync { depth, .. } => format!("sync {depth}"),
                other => format!("{other:?}")
                    .split([' ', '{'])
                    .next()
                    .unwrap()
                    .to_owned(),
            })
            .collect()
    }

    /// Entering and ending through the lane writes exactly what the probes' own path writes,
    /// also across a pause (the slot cleared: the lane's `live` test) with and without
    /// `track_paused`.
    #[test]
    fn the_lane_writes_what_the_probes_path_writes() {
        for track in [false, true] {
            let direct = script(&Direct, track);
            // SAFETY: this thread's state, used on this thread within the test.
            let lane = unsafe { Lane::current() }.expect("the installs above made the state");
            let laned = script(&lane, track);
            assert_eq!(laned, direct, "track_paused {track}");
            assert!(direct.iter().any(|e| e.starts_with("Paused")), "{direct:?}");
        }
    }
}
