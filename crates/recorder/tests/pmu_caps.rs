//! The recorder learns what an event's PMU has from the PMU registered
//! under its type (`PmuCaps`), as the kernel asks `pmu->setup_aux`: a PMU
//! registered at run time is known by what it says of itself, not by its
//! number.

use std::sync::Arc;

use perfaux_abi::attr::PerfEventAttr;
use perfaux_abi::consts::{PERF_COUNT_SW_DUMMY, PERF_TYPE_SOFTWARE};
use perfaux_core::PmuCaps;
use perfaux_core::driver::{AuxArea, Event, Pmu, PmuPrivate, Result, enoent, perf_pmu_register};
use perfaux_recorder::EventSpec;
use perfaux_recorder::pmus::{
    PROBE_TYPE, SWTRACE_TYPE, UEVENT_AUX_TYPE, UEVENT_TYPE, has_aux, is_uevent_log,
};

/// A PMU that says `caps` of itself and accepts nothing.
struct CapsPmu {
    name: &'static str,
    caps: PmuCaps,
}

impl Pmu for CapsPmu {
    fn name(&self) -> &'static str {
        self.name
    }
    fn capabilities(&self) -> PmuCaps {
        self.caps
    }
    fn event_init(&self, _: &Event) -> Result<PmuPrivate> {
        Err(enoent("the test PMU opens no event"))
    }
    fn start(&self, _: &Event, _: u32) {}
    fn stop(&self, _: &Event, _: u32) {}
    fn setup_aux(&self, _: &Event, _: &AuxArea, _: bool) -> Result<PmuPrivate> {
        Ok(Box::new(()))
    }
}

/// Registers a [`CapsPmu`] under a dynamic type, after the drivers' fixed
/// types are taken.
fn register(name: &'static str, caps: PmuCaps) -> u32 {
    perfaux_recorder::pmus::register();
    perf_pmu_register(Arc::new(CapsPmu { name, caps }))
}

#[test]
fn a_registered_pmu_has_an_aux_area_and_a_uevent_log_when_its_capabilities_say_so() {
    let plain = register("caps_plain", PmuCaps::NO_NMI);
    let aux = register("caps_aux", PmuCaps::AUX | PmuCaps::ITRACE);
    let log = register("caps_log", PmuCaps::AUX | PmuCaps::AUX_UEVENT_LOG);
    // A uevent log without an AUX area is no AUX area at all.
    let log_only = register("caps_log_only", PmuCaps::AUX_UEVENT_LOG);

    assert!(!has_aux(plain) && !is_uevent_log(plain));
    assert!(has_aux(aux) && !is_uevent_log(aux));
    assert!(has_aux(log) && is_uevent_log(log));
    assert!(!has_aux(log_only) && !is_uevent_log(log_only));

    // An EventSpec takes the same answers from its attr's type.
    let attr = |type_| PerfEventAttr {
        type_,
        ..Default::default()
    };
    let spec = EventSpec::new("caps_log//", attr(log), 0);
    assert!(spec.has_aux && spec.uevent_log);
    let spec = EventSpec::new("caps_aux//", attr(aux), 0);
    assert!(spec.has_aux && !spec.uevent_log);
    let spec = EventSpec::new("caps_plain//", attr(plain), 0);
    assert!(!spec.has_aux && !spec.uevent_log);
}

#[test]
fn the_drivers_answer_as_they_are_registered() {
    // The trace PMU and uevent_aux have AUX areas; only uevent_aux's holds
    // uevents.
    assert!(has_aux(SWTRACE_TYPE) && !is_uevent_log(SWTRACE_TYPE));
    assert!(has_aux(UEVENT_AUX_TYPE) && is_uevent_log(UEVENT_AUX_TYPE));
    for type_ in [PROBE_TYPE, UEVENT_TYPE, PERF_TYPE_SOFTWARE] {
        assert!(!has_aux(type_) && !is_uevent_log(type_), "type {type_:#x}");
    }
    // A type no PMU is registered under has nothing.
    assert!(!has_aux(0x7fff_0000) && !is_uevent_log(0x7fff_0000));
    let spec = EventSpec::new(
        "dummy",
        PerfEventAttr {
            type_: PERF_TYPE_SOFTWARE,
            config: PERF_COUNT_SW_DUMMY,
            ..Default::default()
        },
        0,
    );
    assert!(!spec.has_aux);
}
