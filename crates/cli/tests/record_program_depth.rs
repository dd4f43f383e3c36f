//! A recursion deeper than the runtime's return stack (crates/preload/tests/c/deep.c), in all
//! three hook flavours: `record` says how many calls it left untraced past the depth, and the
//! call trace and the report count the same traced calls and say what they could not follow.

mod calls;

use calls::*;

const FLAVOURS: [(&[&str], &str); 3] = [
    (&["-finstrument-functions"], "fi"),
    (&["-pg"], "pg"),
    (&["-pg", "-mfentry"], "fentry"),
];

/// How deep the program recurses: past the runtime's 8,192 open calls and the views' 4,096.
const DEPTH: u64 = 10_000;

/// The number before `what` on the line of `text` that has it (`None`: no such line).
fn count_before(text: &str, what: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains(what))?;
    let head = &line[..line.find(what)?];
    head.split_whitespace().last()?.parse().ok()
}

/// The number after `what` on the line of `text` that has it (`None`: no such line).
fn count_after(text: &str, what: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.contains(what))?;
    let tail = &line[line.find(what)? + what.len()..];
    tail.split(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())?
        .parse()
        .ok()
}

fn perfaux_out(args: &[&str], data: &std::path::Path) -> String {
    let out = std::process::Command::new(PERFAUX)
        .args(args)
        .arg("-i")
        .arg(data)
        .output()
        .expect("perfaux");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn recursion_past_the_depth_limit_is_said_by_record_and_counted_alike_by_script_and_report() {
    perfaux_testutil::require_oracle!("gcc");
    let dir = tempfile::tempdir().unwrap();
    for (flags, name) in FLAVOURS {
        let prog = build_c(dir.path(), "deep.c", flags, &format!("deep_{name}"));
        let (out, data) = record(dir.path(), &prog, &[&DEPTH.to_string()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {:?}: {stderr}", out.status);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("depth {DEPTH}"),
            "{name}: the program ran otherwise under perfaux"
        );
        let cut = count_before(&stderr, "call(s) made deeper than")
            .unwrap_or_else(|| panic!("{name}: record said nothing of the depth: {stderr}"));
        assert!(cut > 0 && cut < DEPTH, "{name}: {cut} cut: {stderr}");

        let traced = DEPTH - cut;
        let script = call_trace(&data);
        let script_calls = script.iter().filter(|f| *f == "recurse").count() as u64;
        let report = report_counts(&data);
        assert_eq!(
            script_calls, traced,
            "{name}: script's recurse calls against the depth less record's {cut}"
        );
        assert_eq!(
            report.get("recurse"),
            Some(&traced),
            "{name}: report's recurse calls against script's {script_calls}"
        );

        // Each reader says what it could not follow of the traced calls.
        let script_text = perfaux_out(&["script", "--call-trace"], &data);
        let ids_lost = count_after(&script_text, "lost the ids of")
            .unwrap_or_else(|| panic!("{name}: script said nothing of the depth"));
        assert!(ids_lost > 0 && ids_lost < traced, "{name}: {ids_lost}");
        let report_text = perfaux_out(&["report", "--stdio"], &data);
        let untimed = report_text
            .lines()
            .find(|l| l.contains("untimed calls past the view's depth"))
            .and_then(|l| count_before(l, "untimed calls past the view's depth"))
            .unwrap_or_else(|| panic!("{name}: report said nothing of the depth:\n{report_text}"));
        assert!(
            untimed > 0 && untimed < traced,
            "{name}: {untimed} untimed of {traced}:\n{report_text}"
        );
    }
}
