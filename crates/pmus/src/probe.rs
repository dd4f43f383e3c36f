//! The `probe` PMU: counts entries into (or returns from) a swtrace probe.
//! A sampling probe event is what an uprobe is to the kernel: a sampler, an
//! AUX sampling event, or an `aux_action` trigger at a named place in the
//! code.
//!
//! - `config`: the probe's id ([`perfaux_swtrace::ProbeId`]), or what
//!   [`resolve_probe`] returns for a name, also for a probe that has not
//!   run yet;
//! - `config1` bit 0: count returns (the guard's drop) instead of entries.
//!
//! Counting rides on swtrace's hook words: while an event counts a probe,
//! its hook word is on and every entry calls [`probe_hook`] on the thread
//! that runs it (possibly in a signal handler: the path takes no lock).
//! A sample's IP is the probe's address, its CALLCHAIN the thread's shadow
//! stack (kept up to date while the event is enabled).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use perfaux_abi::consts::PERF_SAMPLE_CALLCHAIN;
use perfaux_swtrace::writer::{self, Frame};
use perfaux_swtrace::{HookTarget, ProbeEvent, ProbeId};

use perfaux_abi::errno;
use perfaux_core::driver::{
    Error, Event, EventState, Pmu, PmuCaps, PmuPrivate, Result, SampleData, current_cpu, ef,
    enoent, for_each_observing, gettid, perf_swevent_event, run_on,
};

/// Config values from [`resolve_probe`] for names not yet registered carry
/// this bit; the low 32 bits index the name table.
pub const PENDING_NAME_BIT: u64 = 1 << 40;

/// `config1` bit: count returns rather than entries.
pub const CONFIG1_ON_EXIT: u64 = 1;

/// Most frames a sample's callchain takes from the shadow stack.
const MAX_FRAMES: usize = 128;

fn names() -> &'static Mutex<Vec<String>> {
    static N: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    N.get_or_init(|| Mutex::new(Vec::new()))
}

/// The `config` for the probe named `name`: its id if it has run, else a
/// pending-name value that matches it once it runs.
pub fn resolve_probe(name: &str) -> u64 {
    if let Some(id) = perfaux_swtrace::lookup(name).first() {
        return u64::from(id.0);
    }
    let mut n = names().lock().unwrap_or_else(|e| e.into_inner());
    let idx = match n.iter().position(|x| x == name) {
        Some(i) => i,
        None => {
            n.push(name.to_owned());
            n.len() - 1
        }
    };
    PENDING_NAME_BIT | idx as u64
}

/// Per-event state: what the event matches.
struct ProbeState {
    /// The probe id, or the name when the config was a pending name.
    target: ProbeMatch,
    on_exit: bool,
    shadow: bool,
    /// The probe's address (a sample's IP) for an id target, looked up
    /// once; a name target may match several probes and looks it up per hit.
    ip: Option<u64>,
}

enum ProbeMatch {
    Id(u32),
    Name(&'static str),
}

/// The probe PMU.
pub struct ProbePmu;

fn hook_target(st: &ProbeState) -> HookTarget<'_> {
    match st.target {
        ProbeMatch::Id(id) => HookTarget::Id(ProbeId(id)),
        ProbeMatch::Name(n) => HookTarget::Name(n),
    }
}

/// Interned names: the hook compares them without allocating.
fn intern(name: String) -> &'static str {
    static I: OnceLock<Mutex<HashMap<String, &'static str>>> = OnceLock::new();
    let mut m = I
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(s) = m.get(&name) {
        return s;
    }
    let s: &'static str = Box::leak(name.clone().into_boxed_str());
    m.insert(name, s);
    s
}

impl Pmu for ProbePmu {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn capabilities(&self) -> PmuCaps {
        PmuCaps::NO_NMI
    }

    fn event_init(&self, event: &Event) -> Result<PmuPrivate> {
        if event.attr().type_ != event.pmu_type() {
            return Err(enoent("not a probe event"));
        }
        install_hook_handler();
        let config = event.attr().config;
        let target = if config & PENDING_NAME_BIT != 0 {
            let n = names().lock().unwrap_or_else(|e| e.into_inner());
            let name = n
                .get((config & 0xffff_ffff) as usize)
                .cloned()
                .ok_or_else(|| enoent("probe: unknown pending probe name"))?;
            ProbeMatch::Name(intern(name))
        } else {
            let id = u32::try_from(config).map_err(|_| enoent("probe: config is no probe id"))?;
            ProbeMatch::Id(id)
        };
        let ip = match target {
            ProbeMatch::Id(id) => {
                perfaux_swtrace::probe_by_id(ProbeId(id)).map(|p| p.addr() as u64)
            }
            ProbeMatch::Name(_) => None,
        };
        let st = ProbeState {
            target,
            on_exit: event.attr().config1 & CONFIG1_ON_EXIT != 0,
            shadow: event.attr().sample_type & PERF_SAMPLE_CALLCHAIN != 0,
            ip,
        };
        if st.shadow {
            // The shadow stack is enabled on the thread by a remote call:
            // make the writer's thread-state key here, in this context.
            writer::prepare();
        }
        perfaux_swtrace::set_hook(hook_target(&st), true)
            .map_err(|e| Error::with_cause(errno::ENOENT, "probe: no probe with this id", e))?;
        Ok(Box::new(st))
    }

    fn destroy(&self, event: &Event) {
        if let Some(st) = event.pmu_private::<ProbeState>() {
            let _ = perfaux_swtrace::set_hook(hook_target(st), false);
        }
    }

    fn add(&self, event: &Event, flags: u32) -> Result<()> {
        if let Some(st) = event.pmu_private::<ProbeState>()
            && st.shadow
            && let Some(tid) = event.target().tid()
        {
            let _ = run_on(tid, &mut writer::enable_shadow_stack);
        }
        if flags & ef::START != 0 {
            self.start(event, ef::RELOAD);
        }
        Ok(())
    }

    fn del(&self, event: &Event, _flags: u32) {
        if let Some(st) = event.pmu_private::<ProbeState>()
            && st.shadow
            && let Some(tid) = event.target().tid()
        {
            let _ = run_on(tid, &mut writer::disable_shadow_stack);
        }
    }

    fn start(&self, _event: &Event, _flags: u32) {}

    fn stop(&self, _event: &Event, _flags: u32) {}
}

fn install_hook_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = perfaux_swtrace::set_hook_handler(probe_hook);
    });
}

/// The hook swtrace calls at every entry and return of a hooked probe.
pub fn probe_hook(id: ProbeId, what: ProbeEvent) {
    let on_exit = what == ProbeEvent::Exit;
    let tid = gettid();
    let mut cpu = -2;
    let probe_type = super::PROBE_TYPE;
    for_each_observing(|ev| {
        if ev.pmu_type() != probe_type || ev.state() != EventState::Active {
            return;
        }
        let Some(st) = ev.pmu_private::<ProbeState>() else {
            return;
        };
        if st.on_exit != on_exit || !matches(st, id) {
            return;
        }
        if ev.cpu() != -1 {
            if cpu == -2 {
                cpu = current_cpu();
            }
            if !ev.observes(tid, cpu) {
                return;
            }
        }
        count(ev, id, st);
    });
}

fn matches(st: &ProbeState, id: ProbeId) -> bool {
    match st.target {
        ProbeMatch::Id(x) => x == id.0,
        ProbeMatch::Name(n) => perfaux_swtrace::probe_by_id(id).is_some_and(|p| p.name() == n),
    }
}

fn count(ev: &Event, id: ProbeId, st: &ProbeState) {
    let ip = st
        .ip
        .unwrap_or_else(|| perfaux_swtrace::probe_by_id(id).map_or(0, |p| p.addr() as u64));
    if st.shadow && ev.is_sampling() {
        count_with_callchain(ev, ip);
        return;
    }
    let mut data = SampleData::default();
    data.ip = ip;
    perf_swevent_event(ev, 1, &mut data);
}

/// The sampling path with a callchain: the frame buffers live only here,
/// so the common path does not clear 3 KiB of stack per hit.
#[inline(never)]
fn count_with_callchain(ev: &Event, ip: u64) {
    let mut frames = [Frame {
        id: ProbeId(0),
        addr: 0,
    }; MAX_FRAMES];
    let mut ips = [0u64; MAX_FRAMES];
    let cc = writer::callchain(&mut frames);
    for (i, f) in frames[..cc.written].iter().enumerate() {
        ips[i] = f.addr;
    }
    let mut data = SampleData::default();
    data.ip = ip;
    data.callchain = &ips[..cc.written];
    perf_swevent_event(ev, 1, &mut data);
}
