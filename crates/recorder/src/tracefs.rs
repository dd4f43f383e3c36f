//! The kernel's tracepoints by name (`sched:sched_switch`), as tracefs lists them: each one's
//! id (the `config` of a PERF_TYPE_TRACEPOINT event) and the HEADER_TRACING_DATA feature that
//! lets perf print their fields (the formats of the events recorded).
//!
//! The feature's layout is perf's `tracing_data_get` (tools/perf/util/trace-event-info.c),
//! version 0.6: the magic `\x17\x08Dtracing`, the version, the byte order and long size,
//! the page size, `header_page` and `header_event` (each a name, a u64 size and the tracefs
//! file), the ftrace formats (a u32 count, none here as in perf's files), the event formats
//! grouped by system (a u32 count of systems; each a name, a u32 count and each format as a
//! u64 size and the file), then kallsyms (a u32 size, empty), `printk_formats` (a u32 size
//! and the file) and saved_cmdlines (a u64 size, empty). Written by hand: no crate writes it.

use std::path::{Path, PathBuf};

/// Where tracefs is mounted, the kernel's own mount point first.
const MOUNTS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs directory that lists the events, or what is wrong and what to do.
pub fn tracefs_dir() -> Result<PathBuf, String> {
    for m in MOUNTS {
        let p = Path::new(m);
        if p.join("events").is_dir() {
            return Ok(p.to_path_buf());
        }
        if let Err(e) = std::fs::read_dir(p)
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            return Err(format!(
                "{m}: {e}: tracefs is readable by root only here (tracepoints need root, or \
                 CAP_PERFMON with tracefs made readable)"
            ));
        }
    }
    Err(format!(
        "no tracefs at {}: mount it (mount -t tracefs nodev /sys/kernel/tracing)",
        MOUNTS.join(" or ")
    ))
}

/// The id of tracepoint `system:name` (the `config` of its PERF_TYPE_TRACEPOINT event).
pub fn tracepoint_id(system: &str, name: &str) -> Result<u64, String> {
    // A name with a path in it names no tracepoint (and must not reach outside tracefs).
    let plain = |s: &str| !s.is_empty() && !s.contains(['/', '\0']) && s != "." && s != "..";
    if !plain(system) || !plain(name) {
        return Err(format!("'{system}:{name}' is not a tracepoint name"));
    }
    let dir = tracefs_dir()?;
    let path = dir.join("events").join(system).join(name).join("id");
    match std::fs::read_to_string(&path) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{}: not a tracepoint id: {s:?}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "no tracepoint '{system}:{name}' in {} (its events/SYSTEM/NAME; perf list \
             tracepoint lists them)",
            dir.display()
        )),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Appends a u64 size and `bytes`.
fn sized64(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_ne_bytes());
    out.extend_from_slice(bytes);
}

/// Appends a u32 size and `bytes`.
fn sized32(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), String> {
    let n = u32::try_from(bytes.len()).map_err(|_| "a tracefs file over 4 GiB".to_string())?;
    out.extend_from_slice(&n.to_ne_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// A tracefs file's contents. Read in large pieces: `header_page` and `header_event` give
/// their text to the first read alone (the kernel's `show_header_page_file` answers 0 at
/// any offset past 0), so a first read smaller than the text would cut it.
fn read_tracefs(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut f = std::fs::File::open(path).map_err(err)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(err(e)),
        }
    }
}

/// HEADER_TRACING_DATA for `tracepoints` (`(system, name)`, in any order, repeats allowed),
/// from the running kernel's tracefs.
pub fn tracing_data(tracepoints: &[(String, String)]) -> Result<Vec<u8>, String> {
    let dir = tracefs_dir()?;
    let read = |p: PathBuf| read_tracefs(&p);
    let mut out = Vec::new();
    out.extend_from_slice(b"\x17\x08Dtracing");
    out.extend_from_slice(b"0.6\0");
    out.push(u8::from(cfg!(target_endian = "big")));
    out.push(std::mem::size_of::<std::ffi::c_long>() as u8);
    let page = rustix::param::page_size() as u32;
    out.extend_from_slice(&page.to_ne_bytes());
    for h in ["header_page", "header_event"] {
        out.extend_from_slice(h.as_bytes());
        out.push(0);
        sized64(&mut out, &read(dir.join("events").join(h))?);
    }
    // The ftrace formats (perf's `record_ftrace_files`): none recorded.
    out.extend_from_slice(&0u32.to_ne_bytes());
    // The events by system, each system once, in the order first named.
    let mut systems: Vec<(&str, Vec<&str>)> = Vec::new();
    for (sys, name) in tracepoints {
        match systems.iter_mut().find(|(s, _)| s == sys) {
            Some((_, names)) if !names.contains(&name.as_str()) => names.push(name),
            Some(_) => {}
            None => systems.push((sys, vec![name])),
        }
    }
    out.extend_from_slice(&(systems.len() as u32).to_ne_bytes());
    for (sys, names) in &systems {
        out.extend_from_slice(sys.as_bytes());
        out.push(0);
        out.extend_from_slice(&(names.len() as u32).to_ne_bytes());
        for name in names {
            sized64(
                &mut out,
                &read(dir.join("events").join(sys).join(name).join("format"))?,
            );
        }
    }
    // kallsyms: none (perf reads the kernel's symbols from /proc/kallsyms or vmlinux).
    out.extend_from_slice(&0u32.to_ne_bytes());
    // The formats of trace_printk's strings, which some events print through.
    sized32(
        &mut out,
        &read_tracefs(&dir.join("printk_formats")).unwrap_or_default(),
    )?;
    // saved_cmdlines: none (the recording's COMM records name the tasks).
    out.extend_from_slice(&0u64.to_ne_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_paths_are_no_tracepoints() {
        for (s, n) in [("..", "x"), ("sched", "../../id"), ("", "x"), ("a/b", "c")] {
            let e = tracepoint_id(s, n).unwrap_err();
            assert!(e.contains("not a tracepoint name"), "{s}:{n}: {e}");
        }
    }

    /// The feature's layout as perf reads it: walked back field by field from the bytes.
    #[test]
    fn the_tracing_data_has_perfs_layout() {
        if tracefs_dir().is_err() || tracepoint_id("sched", "sched_switch").is_err() {
            eprintln!("skipped: no readable tracefs with sched:sched_switch");
            return;
        }
        let tps = [
            ("sched".to_string(), "sched_switch".to_string()),
            ("sched".to_string(), "sched_switch".to_string()),
        ];
        let t = tracing_data(&tps).unwrap();
        assert_eq!(&t[..10], b"\x17\x08Dtracing");
        assert_eq!(&t[10..14], b"0.6\0");
        let mut p = 14 + 2 + 4;
        let u64_at = |p: usize| u64::from_ne_bytes(t[p..p + 8].try_into().unwrap()) as usize;
        let u32_at = |p: usize| u32::from_ne_bytes(t[p..p + 4].try_into().unwrap()) as usize;
        for h in ["header_page", "header_event"] {
            assert_eq!(&t[p..p + h.len() + 1], format!("{h}\0").as_bytes());
            p += h.len() + 1;
            // Whole: the kernel gives it to the first read alone.
            let file = std::fs::read_to_string(tracefs_dir().unwrap().join("events").join(h));
            let text = &t[p + 8..p + 8 + u64_at(p)];
            assert!(text.ends_with(b"\n") && text.len() > 100, "{h}: {text:?}");
            assert!(file.is_ok());
            p += 8 + u64_at(p);
        }
        assert_eq!(u32_at(p), 0);
        p += 4;
        assert_eq!(u32_at(p), 1, "one system");
        p += 4;
        assert_eq!(&t[p..p + 6], b"sched\0");
        p += 6;
        assert_eq!(u32_at(p), 1, "sched_switch once");
        p += 4;
        let len = u64_at(p);
        assert!(t[p + 8..p + 8 + len].starts_with(b"name: sched_switch\n"));
        p += 8 + len;
        assert_eq!(u32_at(p), 0, "kallsyms");
        p += 4;
        p += 4 + u32_at(p);
        assert_eq!(u64_at(p), 0, "saved_cmdlines");
        assert_eq!(p + 8, t.len());
    }
}
