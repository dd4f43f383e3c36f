//! What `record` says of a kernel PMU it does not drive (`-e intel_pt//`, `cs_etm//`,
//! `arm_spe//`): whether this machine has it, which PMUs it has, and what to do instead.
//! perfaux opens the AUX area of its own software trace PMU; the kernel backend for hardware
//! AUX PMUs is not written yet, and on a machine without the PMU no backend could run.

use std::path::Path;

/// Where the kernel lists its PMUs.
pub const PMU_DIR: &str = "/sys/bus/event_source/devices";

/// The PMUs `dir` lists, sorted.
fn pmus(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Why `NAME//` cannot be recorded here, in words a user can act on.
pub fn refusal(name: &str, dir: &Path) -> String {
    let have = pmus(dir);
    let listed = if have.is_empty() {
        format!("{} lists none", dir.display())
    } else {
        format!("{} lists: {}", dir.display(), have.join(", "))
    };
    let aux = matches!(name, "intel_pt" | "intel_bts" | "cs_etm") || name.starts_with("arm_spe");
    if !aux && have.iter().any(|p| p == name) {
        return format!(
            "perfaux opens the kernel's PMUs by their events' names (task-clock, page-faults, \
             context-switches, ...; record --help lists them), not as {name}//"
        );
    }
    let what = match name {
        "intel_pt" => {
            "Intel PT needs an Intel CPU from Broadwell on (in a VM, a hypervisor that passes \
             it through)"
        }
        "intel_bts" => "BTS needs an Intel CPU",
        "cs_etm" => "CoreSight ETM needs an Arm CPU with CoreSight and its kernel driver",
        n if n.starts_with("arm_spe") => "SPE needs an Armv8.2 CPU with SPE and its kernel driver",
        _ => "no PMU of that name",
    };
    if have.iter().any(|p| p == name) {
        format!(
            "this machine has the {name} PMU, but perfaux records only its own trace PMU \
             (swtrace//) so far: record with `perf record -e {name}//` and read the file with \
             `perfaux report -D` (Intel PT payloads as perf's packet lines) or decode a raw \
             stream with `perfaux intel-pt dump`"
        )
    } else {
        format!(
            "this machine has no {name} PMU ({listed}); {what}. perfaux's software trace PMU \
             traces the same way without hardware: -e swtrace//"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_pmu_is_said_with_the_pmus_there_are() {
        let dir = tempfile::tempdir().unwrap();
        for p in ["software", "tracepoint", "uprobe"] {
            std::fs::create_dir(dir.path().join(p)).unwrap();
        }
        let m = refusal("intel_pt", dir.path());
        assert!(m.contains("no intel_pt PMU"), "{m}");
        assert!(m.contains("lists: software, tracepoint, uprobe"), "{m}");
        assert!(m.contains("-e swtrace//"), "{m}");
        let m = refusal("cs_etm", dir.path());
        assert!(m.contains("CoreSight"), "{m}");
        let m = refusal("software", dir.path());
        assert!(m.contains("by their events' names"), "{m}");
    }

    #[test]
    fn a_present_pmu_is_said_to_be_recorded_by_perf_for_now() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("intel_pt")).unwrap();
        let m = refusal("intel_pt", dir.path());
        assert!(m.contains("has the intel_pt PMU"), "{m}");
        assert!(m.contains("perf record -e intel_pt//"), "{m}");
    }
}
