//! Feature values describing the machine, as `perf record` fills them
//! (tools/perf/util/header.c `write_hostname` ... `write_cmdline`), read
//! from /proc and /sys; every field is public so that a caller can replace
//! any of them (reproducible tests, files describing another machine).

use std::fs;

/// The machine facts a perf.data header carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// `HEADER_HOSTNAME` (uname nodename).
    pub hostname: String,
    /// `HEADER_OSRELEASE` (uname release).
    pub osrelease: String,
    /// `HEADER_VERSION`: the version of the tool that wrote the file.
    pub version: String,
    /// `HEADER_ARCH` (uname machine).
    pub arch: String,
    /// `HEADER_NRCPUS`: CPUs present, then online.
    pub nr_cpus_available: u32,
    /// CPUs online (`HEADER_NRCPUS`'s second word).
    pub nr_cpus_online: u32,
    /// `HEADER_CPUDESC`: /proc/cpuinfo's model name.
    pub cpudesc: String,
    /// `HEADER_CPUID`: x86 "vendor,family,model,stepping", as perf writes it.
    pub cpuid: String,
    /// `HEADER_TOTAL_MEM` in kB (MemTotal).
    pub total_mem_kb: u64,
    /// `HEADER_CMDLINE`: the tool's argv, one string a word (the words keep their spaces and
    /// quotes; `perf report --header-only` prints them joined by spaces), the first the
    /// tool's executable as /proc/self/exe names it (perf's `perf_exe`), not argv[0].
    pub cmdline: Vec<String>,
}

/// The running tool's command line as perf's `write_cmdline` stores its own: the executable's
/// path from /proc/self/exe (argv[0] where that cannot be read), then the other words as given.
fn tool_cmdline() -> Vec<String> {
    let mut args = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    let argv0 = args.next();
    let exe = std::env::current_exe()
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
        .or(argv0);
    exe.into_iter().chain(args).collect()
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Counts the CPUs of a /sys cpu list such as "0-3,5".
fn count_cpu_list(list: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                n += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<u32>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

/// The value of the first `key : value` line of /proc/cpuinfo.
fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

impl HostInfo {
    /// Reads this machine's values. Whatever cannot be read is left empty
    /// or zero rather than failing: a header field is informational.
    pub fn from_machine() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let total_mem_kb = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let online = read_trimmed("/sys/devices/system/cpu/online")
            .and_then(|s| count_cpu_list(&s))
            .or_else(|| {
                std::thread::available_parallelism()
                    .ok()
                    .map(|n| n.get() as u32)
            })
            .unwrap_or(1);
        let present = read_trimmed("/sys/devices/system/cpu/present")
            .and_then(|s| count_cpu_list(&s))
            .unwrap_or(online);
        // perf squeezes runs of blanks in the model name.
        let cpudesc = cpuinfo_field(&cpuinfo, "model name")
            .or_else(|| cpuinfo_field(&cpuinfo, "Processor"))
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let cpuid = match (
            cpuinfo_field(&cpuinfo, "vendor_id"),
            cpuinfo_field(&cpuinfo, "cpu family"),
            cpuinfo_field(&cpuinfo, "model"),
            cpuinfo_field(&cpuinfo, "stepping"),
        ) {
            (Some(v), Some(f), Some(m), Some(s)) => format!("{v},{f},{m},{s}"),
            _ => cpuinfo_field(&cpuinfo, "CPU implementer")
                .unwrap_or("")
                .to_string(),
        };
        Self {
            hostname: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_default(),
            osrelease: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
            version: format!("perfaux {}", env!("CARGO_PKG_VERSION")),
            arch: std::env::consts::ARCH.to_string(),
            nr_cpus_available: present,
            nr_cpus_online: online,
            cpudesc,
            cpuid,
            total_mem_kb,
            cmdline: tool_cmdline(),
        }
    }

    /// Fixed values, for output that must not depend on the machine.
    pub fn fixed() -> Self {
        Self {
            hostname: "perfaux-test".into(),
            osrelease: "6.1.0".into(),
            version: "perfaux".into(),
            arch: "x86_64".into(),
            nr_cpus_available: 2,
            nr_cpus_online: 2,
            cpudesc: "perfaux test CPU".into(),
            cpuid: "GenuineIntel,6,85,4".into(),
            total_mem_kb: 1 << 20,
            cmdline: vec!["perfaux".into(), "record".into()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_as_the_kernel_writes_them() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0-3,5,7-8"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn machine_values_are_read() {
        let h = HostInfo::from_machine();
        // Linux always has these; the test machine is Linux.
        assert!(!h.osrelease.is_empty());
        assert!(h.nr_cpus_online >= 1 && h.nr_cpus_available >= h.nr_cpus_online);
        assert!(h.total_mem_kb > 0);
    }
}
