//! The runtime a traced program preloads is a file perf can open: its PERF_RECORD_MMAP2 names
//! the copy kept in the user's cache directory (not /proc/PID/fd/N of a recorder that is gone
//! when the file is read), so samples in the runtime's own code are named.

mod calls;

use calls::*;

#[test]
fn the_runtimes_mmap2_names_a_file_that_holds_the_runtime() {
    perfaux_testutil::require_oracle!("gcc");
    perfaux_testutil::require_oracle!("perf");
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let prog = build_calls(dir.path(), &["-finstrument-functions"], "calls_rt");
    let (out, data) = record_with(
        dir.path(),
        &prog,
        &["0", "2", "nojmp"],
        &[],
        &[("XDG_CACHE_HOME", cache.as_path())],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let maps = std::process::Command::new("perf")
        .args(["script", "--show-mmap-events", "-i"])
        .arg(&data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&maps.stdout);
    let runtime = text
        .lines()
        .filter(|l| l.contains("PERF_RECORD_MMAP2"))
        .filter_map(|l| l.rsplit(' ').next())
        .find(|p| p.contains("libperfaux_runtime"))
        .unwrap_or_else(|| panic!("no MMAP2 of the runtime:\n{text}"));
    let kept = cache.join("perfaux");
    assert!(
        runtime.starts_with(kept.to_str().unwrap()),
        "the runtime's MMAP2 names {runtime}, not a file of {}",
        kept.display()
    );
    let bytes = std::fs::read(runtime).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "{runtime}");
}
