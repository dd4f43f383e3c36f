//! The PMU registry: `perf_pmu_register` and the type lookup of
//! `perf_init_event`.
//!
//! Types follow the kernel: `PERF_TYPE_SOFTWARE` (1) is the fixed type of
//! the software events that match the kernel's (`task-clock`, `dummy`);
//! every other PMU gets a dynamic type counted up from
//! [`PMU_TYPE_DYNAMIC_BASE`], the way `/sys/bus/event_source/devices/*/type`
//! hands out numbers above `PERF_TYPE_MAX`. perfaux starts at 0x100 so its
//! in-process PMUs cannot be mistaken for a kernel PMU's small number in a
//! perf.data file that mixes both.

use std::sync::{Arc, OnceLock, RwLock};

use perfaux_abi::consts::PERF_TYPE_SOFTWARE;

use crate::pmu::Pmu;
use crate::pmus;

/// The first dynamic PMU type.
pub const PMU_TYPE_DYNAMIC_BASE: u32 = 0x100;

struct Entry {
    type_: u32,
    pmu: Arc<dyn Pmu>,
}

struct Registry {
    pmus: RwLock<Vec<Entry>>,
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        let r = Registry {
            pmus: RwLock::new(Vec::new()),
        };
        pmus::register_builtin(|type_, pmu| {
            r.pmus
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .push(Entry { type_, pmu })
        });
        r
    })
}

/// Registers `pmu` under a new dynamic type and returns the type
/// (`perf_pmu_register(pmu, name, -1)`).
pub fn perf_pmu_register(pmu: Arc<dyn Pmu>) -> u32 {
    let r = registry();
    let mut v = r.pmus.write().unwrap_or_else(|e| e.into_inner());
    let type_ = v
        .iter()
        .map(|e| e.type_)
        .filter(|&t| t >= PMU_TYPE_DYNAMIC_BASE)
        .max()
        .map_or(PMU_TYPE_DYNAMIC_BASE, |t| t + 1);
    v.push(Entry { type_, pmu });
    type_
}

/// The PMU registered under `type_`.
pub fn pmu_by_type(type_: u32) -> Option<Arc<dyn Pmu>> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    v.iter().find(|e| e.type_ == type_).map(|e| e.pmu.clone())
}

/// The type of the PMU named `name` (what `/sys/bus/event_source/devices/
/// <name>/type` holds); "software" is [`PERF_TYPE_SOFTWARE`].
pub fn pmu_type_by_name(name: &str) -> Option<u32> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    v.iter().find(|e| e.pmu.name() == name).map(|e| e.type_)
}

/// Every registered PMU as (type, name), in type order.
pub fn pmus() -> Vec<(u32, &'static str)> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<_> = v.iter().map(|e| (e.type_, e.pmu.name())).collect();
    out.sort_unstable();
    out
}

/// All PMUs with their types, for the "try every PMU" path of
/// `perf_init_event`.
pub(crate) fn all() -> Vec<(u32, Arc<dyn Pmu>)> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    v.iter().map(|e| (e.type_, e.pmu.clone())).collect()
}

/// `PERF_TYPE_SOFTWARE`, re-exported for the software PMU's registration.
pub(crate) const SOFTWARE_TYPE: u32 = PERF_TYPE_SOFTWARE;
