//! `perfaux report` as text: uftrace's report and graph for traces, perf
//! report's histogram for samples, then uevents, pause/resume, snapshots
//! and losses.

use std::collections::HashMap;
use std::io::Write;

use crate::ViewError;
use crate::event::{FuncId, Names};
use crate::stats::{CallTree, Collector, FuncStat};
use crate::walk::Summary;

/// uftrace report's sort keys (`-s`).
pub const TRACE_KEYS: &[&str] = &["total", "self", "call", "avg", "min", "max", "func"];
/// perf report's sort keys (`--sort`) that perfaux has.
pub const SAMPLE_KEYS: &[&str] = &["comm", "pid", "tid", "dso", "sym"];

/// How to print.
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// `--sort`: keys of either table, comma-separated (empty: the defaults,
    /// `total` and `comm,dso,sym`).
    pub sort: Vec<String>,
    /// `--call-graph`: the call tree instead of the function table.
    pub call_graph: bool,
}

impl ReportOptions {
    /// Checks the sort keys: each must be one of either table's.
    pub fn check(&self) -> Result<(), ViewError> {
        for k in &self.sort {
            if !TRACE_KEYS.contains(&k.as_str()) && !SAMPLE_KEYS.contains(&k.as_str()) {
                return Err(ViewError(format!(
                    "--sort: unknown key '{k}' (trace keys: {}; sample keys: {})",
                    TRACE_KEYS.join(","),
                    SAMPLE_KEYS.join(",")
                )));
            }
        }
        Ok(())
    }

    /// Checks that each sort key sorts a table the report has: a key of
    /// perf's sample histogram means nothing to a recording without
    /// samples (and a trace key nothing without traced calls), and is an
    /// error rather than ignored.
    pub fn check_tables(&self, c: &Collector) -> Result<(), ViewError> {
        let trace = !c.funcs.is_empty();
        let samples = !c.samples.is_empty();
        let mut known: Vec<&str> = Vec::new();
        if trace {
            known.extend(TRACE_KEYS);
        }
        if samples {
            known.extend(SAMPLE_KEYS);
        }
        for k in &self.sort {
            if known.contains(&k.as_str()) {
                continue;
            }
            let what = if TRACE_KEYS.contains(&k.as_str()) {
                "the traced calls' table, and the recording has no traced calls"
            } else {
                "perf's sample histogram, and the recording has no samples"
            };
            let here = if known.is_empty() {
                String::from("this report has no table to sort")
            } else {
                format!("the keys of this report: {}", known.join(","))
            };
            return Err(ViewError(format!("--sort: key '{k}' sorts {what}; {here}")));
        }
        Ok(())
    }

    fn keys(&self, of: &[&str], default: &[&str]) -> Vec<String> {
        let k: Vec<String> = self
            .sort
            .iter()
            .filter(|k| of.contains(&k.as_str()))
            .cloned()
            .collect();
        if k.is_empty() {
            default.iter().map(|s| s.to_string()).collect()
        } else {
            k
        }
    }
}

/// A duration as uftrace prints it: three decimals and a unit.
pub fn fmt_time(ns: u64) -> String {
    let (div, unit) = match ns {
        0..1_000 => return format!("{ns:>7} ns"),
        1_000..1_000_000 => (1e3, "us"),
        1_000_000..1_000_000_000 => (1e6, "ms"),
        _ => (1e9, " s"),
    };
    format!("{:>7.3} {unit}", ns as f64 / div)
}

fn w(out: &mut impl Write, s: std::fmt::Arguments<'_>) -> Result<(), ViewError> {
    out.write_fmt(s)
        .map_err(|e| ViewError(format!("output: {e}")))
}

fn avg(s: &FuncStat) -> u64 {
    s.total.checked_div(s.timed).unwrap_or(0)
}

/// Prints the report.
pub fn write_report(
    c: &Collector,
    names: &Names,
    sum: &Summary,
    opts: &ReportOptions,
    out: &mut impl Write,
) -> Result<(), ViewError> {
    opts.check()?;
    opts.check_tables(c)?;
    if let Some(cmd) = &sum.cmdline {
        w(out, format_args!("# cmdline : {cmd}\n"))?;
    }
    if let Some(f) = sum.first_time {
        w(
            out,
            format_args!(
                "# time range: {} .. {} ({})\n#\n",
                crate::fmt_timestamp(f),
                crate::fmt_timestamp(sum.last_time),
                fmt_time(sum.last_time - f).trim()
            ),
        )?;
    }
    if !c.funcs.is_empty() {
        if opts.call_graph {
            call_graph(&c.tree, names, out)?;
        } else {
            functions(c, names, &opts.keys(TRACE_KEYS, &["total"]), out)?;
            if c.switches.0 > 0 {
                off_cpu(c, names, out)?;
            }
        }
    }
    if opts.call_graph && c.sample_tree.nodes.len() > 1 {
        sampled_call_graph(&c.sample_tree, names, out)?;
    }
    if !c.samples.is_empty() {
        histogram(
            c,
            names,
            &opts.keys(SAMPLE_KEYS, &["comm", "dso", "sym"]),
            out,
        )?;
    }
    if !c.uevents.is_empty() {
        w(out, format_args!("\n# uevents\n#\n#      Count  Type\n"))?;
        for (ty, (name, n)) in &c.uevents {
            let name = name.as_deref().map_or(String::new(), |n| format!(" {n}"));
            w(out, format_args!("  {n:>10}  {ty}{name}\n"))?;
        }
    }
    let p = &c.pauses;
    if p.windows + p.dropped > 0 {
        w(
            out,
            format_args!(
                "\n# pause/resume\n#\n  windows: {}\n  time paused: {}\n",
                p.windows,
                fmt_time(p.paused_time).trim(),
            ),
        )?;
        // The requests the perf core dropped are counted by `perfaux record` alone (its
        // "dropped pause/resume"); the trace shows only a marker that repeats its state.
        if p.dropped > 0 {
            w(
                out,
                format_args!(
                    "  pause/resume markers repeating the state: {}\n",
                    p.dropped
                ),
            )?;
        }
    }
    if c.snapshots.0 > 0 {
        w(
            out,
            format_args!(
                "\n# snapshots: {} ({} bytes of trace)\n",
                c.snapshots.0, c.snapshots.1
            ),
        )?;
        // What each holds (a flight recording's window), the newest ones.
        let first = c.snapshots.0.saturating_sub(c.snapshot_spans.len() as u64);
        for (k, &(b, e)) in c.snapshot_spans.iter().enumerate() {
            w(
                out,
                format_args!(
                    "  snapshot {}: holds {} .. {} ({})\n",
                    first + k as u64 + 1,
                    crate::fmt_timestamp(b),
                    crate::fmt_timestamp(e),
                    fmt_time(e.saturating_sub(b)).trim()
                ),
            )?;
        }
    }
    if !c.lost.is_empty() {
        w(out, format_args!("\n# lost data\n#\n"))?;
        for (k, (markers, n)) in &c.lost {
            let (what, why) =
                crate::event::LostKind::by_name(k).map_or((*k, ""), |kind| kind.explanation());
            w(out, format_args!("  {n} {what}, {markers} times: {why}\n"))?;
        }
    }
    Ok(())
}

/// Each function's time split by the kernel's context switches into the time its thread ran
/// and the time it was switched out (waiting: a sleep, a lock, I/O; or preempted), most
/// switched-out first.
fn off_cpu(c: &Collector, names: &Names, out: &mut impl Write) -> Result<(), ViewError> {
    let mut rows: Vec<(FuncId, FuncStat)> = c
        .funcs
        .iter()
        .filter(|(_, s)| s.timed > 0)
        .map(|(f, s)| (f, *s))
        .collect();
    rows.sort_by(|a, b| {
        b.1.off_cpu
            .cmp(&a.1.off_cpu)
            .then(b.1.total.cmp(&a.1.total))
            .then_with(|| names.name(a.0).cmp(names.name(b.0)))
    });
    w(
        out,
        format_args!(
            "\n# on and off the CPU: of each function's total time, the time its thread ran and \
             the time the kernel had it switched out ({} context switches)\n#\n\
             \x20 Total time      On-CPU     Off-CPU   Off  Function\n  \
             ==========  ==========  ==========  ====  ====================\n",
            c.switches.0
        ),
    )?;
    for (f, s) in &rows {
        let off = s.off_cpu.min(s.total);
        w(
            out,
            format_args!(
                "  {}  {}  {}  {:>3}%  {}\n",
                fmt_time(s.total),
                fmt_time(s.total - off),
                fmt_time(off),
                (off * 100).checked_div(s.total).unwrap_or(0),
                names.name(*f)
            ),
        )?;
    }
    if c.switches.1 > 0 {
        w(
            out,
            format_args!(
                "# {} context switches past the first {} are not in these times (the report's \
                 bound on memory)\n",
                c.switches.1,
                crate::offcpu::MAX_SWITCHES
            ),
        )?;
    }
    Ok(())
}

/// uftrace report: one row per function.
fn functions(
    c: &Collector,
    names: &Names,
    keys: &[String],
    out: &mut impl Write,
) -> Result<(), ViewError> {
    let mut rows: Vec<(FuncId, FuncStat)> = c.funcs.iter().map(|(f, s)| (f, *s)).collect();
    rows.sort_by(|a, b| {
        for k in keys {
            let o = match k.as_str() {
                "total" => b.1.total.cmp(&a.1.total),
                "self" => b.1.self_time.cmp(&a.1.self_time),
                "call" => b.1.calls.cmp(&a.1.calls),
                "avg" => avg(&b.1).cmp(&avg(&a.1)),
                "min" => b.1.min.cmp(&a.1.min),
                "max" => b.1.max.cmp(&a.1.max),
                _ => names.name(a.0).cmp(names.name(b.0)),
            };
            if o.is_ne() {
                return o;
            }
        }
        names.name(a.0).cmp(names.name(b.0))
    });
    w(
        out,
        format_args!(
            "  Total time   Self time       Calls   Avg total   Min total   Max total  Function\n  \
             ==========  ==========  ==========  ==========  ==========  ==========  ====================\n"
        ),
    )?;
    for (f, s) in &rows {
        // A function none of whose calls returned in the trace has no
        // known time: said so, not shown as a zero.
        let time = |ns: u64| {
            if s.timed == 0 {
                format!("{NO_RETURN:>10}")
            } else {
                fmt_time(ns)
            }
        };
        w(
            out,
            format_args!(
                "  {}  {}  {:>10}  {}  {}  {}  {}\n",
                time(s.total),
                time(s.self_time),
                s.calls,
                time(avg(s)),
                time(s.min),
                time(s.max),
                names.name(*f)
            ),
        )?;
    }
    let unfinished: Vec<_> = rows.iter().filter(|(_, s)| s.calls > s.timed).collect();
    if !unfinished.is_empty() {
        w(
            out,
            format_args!(
                "\n# unfinished calls: entered, with no return in the trace (a pause, a \
                 snapshot's or the recording's end, a crash) or deeper than the view follows \
                 (said under lost data); not in the times above\n#\n\
                 #      Calls  Function\n"
            ),
        )?;
        for (f, s) in unfinished {
            w(
                out,
                format_args!("  {:>10}  {}\n", s.calls - s.timed, names.name(*f)),
            )?;
        }
    }
    Ok(())
}

/// What a time cell of a function with no finished call says (two words,
/// as a time's number and unit are, for whoever splits the rows).
pub const NO_RETURN: &str = "no return";

/// uftrace graph: the call tree with calls and total time per path.
fn call_graph(tree: &CallTree, names: &Names, out: &mut impl Write) -> Result<(), ViewError> {
    w(
        out,
        format_args!("========== FUNCTION CALL GRAPH ==========\n# TOTAL TIME   FUNCTION\n"),
    )?;
    tree_lines(tree, names, &|n| fmt_time(n.total), out)
}

/// The sampled call chains merged into one tree, outermost caller first, as perf report's
/// caller graph: each path's samples (those whose chain passes through it) in the left
/// column and in parentheses, in uftrace graph's layout.
fn sampled_call_graph(
    tree: &CallTree,
    names: &Names,
    out: &mut impl Write,
) -> Result<(), ViewError> {
    w(
        out,
        format_args!("\n========== SAMPLED CALL GRAPH ==========\n#    SAMPLES   FUNCTION\n"),
    )?;
    tree_lines(tree, names, &|n| format!("{:>10}", n.calls), out)
}

/// `tree`'s nodes, one line each, depth first: `value : prefix(calls) name`.
fn tree_lines(
    tree: &CallTree,
    names: &Names,
    value: &dyn Fn(&crate::stats::Node) -> String,
    out: &mut impl Write,
) -> Result<(), ViewError> {
    // Iterative depth-first walk: a deep tree must not overflow the stack.
    // (node, prefix length, is last child)
    let mut todo: Vec<(u32, usize, bool)> = tree.nodes[0]
        .children
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &n)| (n, 0, i == 0))
        .collect();
    let mut prefix = String::new();
    while let Some((n, plen, last)) = todo.pop() {
        prefix.truncate(plen);
        let node = &tree.nodes[n as usize];
        let (branch, below) = if plen == 0 {
            ("", "")
        } else if last {
            ("+-", "  ")
        } else {
            ("+-", "| ")
        };
        w(
            out,
            format_args!(
                "  {} : {prefix}{branch}({}) {}\n",
                value(node),
                node.calls,
                names.name(node.func)
            ),
        )?;
        let plen2 = if plen == 0 {
            prefix.push(' ');
            prefix.len()
        } else {
            prefix.push_str(below);
            prefix.len()
        };
        for (i, &ch) in node.children.iter().rev().enumerate() {
            todo.push((ch, plen2, i == 0));
        }
    }
    Ok(())
}

/// perf report's histogram, per sampling event.
fn histogram(
    c: &Collector,
    names: &Names,
    keys: &[String],
    out: &mut impl Write,
) -> Result<(), ViewError> {
    let mut per_event: HashMap<&str, HashMap<Vec<String>, (u64, u64)>> = HashMap::new();
    for (k, (n, p)) in &c.samples {
        let row: Vec<String> = keys
            .iter()
            .map(|key| match key.as_str() {
                "comm" => k.comm.clone(),
                "pid" => format!("{:>7}:{}", k.pid, k.comm),
                "tid" => format!("{:>7}:{}", k.tid, k.comm),
                "dso" => names.dso(k.func).to_owned(),
                _ => {
                    let kernel = names.dso(k.func).starts_with("[kernel");
                    format!(
                        "[{}] {}",
                        if kernel { 'k' } else { '.' },
                        names.name(k.func)
                    )
                }
            })
            .collect();
        let e = per_event
            .entry(k.event.as_str())
            .or_default()
            .entry(row)
            .or_default();
        e.0 += n;
        e.1 += p;
    }
    let mut events: Vec<_> = per_event.into_iter().collect();
    events.sort_by(|a, b| a.0.cmp(b.0));
    let titles: Vec<&str> = keys
        .iter()
        .map(|k| match k.as_str() {
            "comm" => "Command",
            "pid" => "Pid:Command",
            "tid" => "Pid:Command",
            "dso" => "Shared Object",
            _ => "Symbol",
        })
        .collect();
    for (ev, rows) in events {
        let samples: u64 = rows.values().map(|r| r.0).sum();
        let period: u64 = rows.values().map(|r| r.1).sum();
        let mut rows: Vec<_> = rows.into_iter().collect();
        rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then_with(|| a.0.cmp(&b.0)));
        let widths: Vec<usize> = titles
            .iter()
            .enumerate()
            .map(|(i, t)| {
                rows.iter()
                    .map(|r| r.0[i].len())
                    .max()
                    .unwrap_or(0)
                    .max(t.len())
            })
            .collect();
        w(
            out,
            format_args!(
                "\n# Samples: {samples}  of event '{ev}'\n# Event count (approx.): {period}\n#\n# Overhead"
            ),
        )?;
        columns(out, &titles, &widths)?;
        w(out, format_args!("\n# ........"))?;
        for wd in &widths {
            w(out, format_args!("  {}", ".".repeat(*wd)))?;
        }
        w(out, format_args!("\n#\n"))?;
        for (row, (_, p)) in rows {
            let pct = 100.0 * p as f64 / period.max(1) as f64;
            w(out, format_args!("  {pct:>7.2}%"))?;
            columns(out, &row, &widths)?;
            w(out, format_args!("\n"))?;
        }
    }
    Ok(())
}

/// Cells padded to their column's width, the last one not padded (no
/// trailing blanks).
fn columns(
    out: &mut impl Write,
    cells: &[impl AsRef<str>],
    widths: &[usize],
) -> Result<(), ViewError> {
    for (i, (cell, wd)) in cells.iter().zip(widths).enumerate() {
        let wd = if i + 1 == cells.len() { 0 } else { *wd };
        w(out, format_args!("  {:<wd$}", cell.as_ref()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Call, Sink};

    fn call(time: u64, func: u32) -> Call {
        Call {
            pid: 1,
            tid: 1,
            time,
            func: FuncId(func),
            depth: 0,
        }
    }

    #[test]
    fn calls_with_no_return_show_as_unfinished_never_as_zero() {
        let mut names = Names::default();
        let (f0, f1) = (
            names.intern("handle_request", "x"),
            names.intern("work", "x"),
        );
        let mut c = Collector::default();
        // handle_request [0, 50) closed by the view (its return not in the
        // trace) three times; work [10, 20] returns inside each.
        for k in 0..3u64 {
            let t = 100 * k;
            c.enter(&names, call(t, f0.0)).unwrap();
            c.enter(&names, call(t + 10, f1.0)).unwrap();
            c.exit(&names, call(t + 20, f1.0), false).unwrap();
            c.exit(&names, call(t + 50, f0.0), true).unwrap();
        }
        // One more work call still open at the end.
        c.enter(&names, call(400, f1.0)).unwrap();
        c.finish();
        let mut out = Vec::new();
        write_report(
            &c,
            &names,
            &Summary::default(),
            &ReportOptions::default(),
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let row = |name: &str| {
            text.lines()
                .find(|l| l.split_whitespace().count() == 12 && l.ends_with(&format!("  {name}")))
                .unwrap_or_else(|| panic!("no row of {name}:\n{text}"))
                .to_owned()
        };
        let h = row("handle_request");
        assert!(!h.contains(" 0 ns"), "a zero time: {h}");
        assert_eq!(h.matches(NO_RETURN).count(), 5, "{h}");
        assert_eq!(h.split_whitespace().count(), 12, "{h}");
        // work's times are its finished calls'.
        assert!(row("work").starts_with("       30 ns"), "{text}");
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("# unfinished calls"))
            .skip(3)
            .collect();
        assert_eq!(
            section,
            ["           1  work", "           3  handle_request"],
            "{text}"
        );
    }
}
