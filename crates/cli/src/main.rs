//! `perfaux`: record, report -D and script for the perf AUX area.

use std::io::BufWriter;
use std::process::ExitCode;

use clap::Parser;
use perfaux::cli::{Cli, Command, IntelPtCommand, RecordArgs, ReportArgs, ScriptArgs};
use perfaux::error::CliError;
use perfaux::progress::Progress;
use perfaux::record::RecordConfig;

fn report(args: &ReportArgs, verbose: bool) -> Result<(), CliError> {
    let stdout = std::io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    if !args.dump_raw_trace {
        let mut progress = Progress::new("report", verbose, true);
        let r = perfaux::report::report_with(&args.input, &args.view, &mut out, &mut progress);
        progress.done();
        return r;
    }
    let mut progress = Progress::new("report -D", verbose, true);
    let shown = args.input.to_string_lossy();
    perfaux::dump::dump(&args.input, &shown, &mut out, &mut progress)?;
    Ok(())
}

fn script(args: &ScriptArgs, verbose: bool) -> Result<(), CliError> {
    let stdout = std::io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    let mut progress = Progress::new("script", verbose, true);
    let opts = perfaux::script::ScriptOptions {
        call_trace: args.call_trace,
        replay: args.replay,
        show_switch_events: args.show_switch_events,
        symfs: args.symfs.clone(),
    };
    perfaux::script::script_with(&args.input, &opts, &mut out, &mut progress)
}

fn export(args: &perfaux::export::ExportArgs, verbose: bool) -> Result<(), CliError> {
    let mut progress = Progress::new("export", verbose, false);
    let (out, size) = perfaux::export::export(args, &mut progress)?;
    eprintln!(
        "perfaux export: wrote {} ({})",
        out.display(),
        perfaux::progress::human_bytes(size)
    );
    Ok(())
}

fn intel_pt(cmd: &IntelPtCommand) -> Result<(), CliError> {
    match cmd {
        IntelPtCommand::Dump { args } => {
            let (opts, input) = perfaux_intelpt::ptdump::parse_args(args).map_err(|e| {
                CliError::msg(format!(
                    "intel-pt dump: {e} (perfaux intel-pt dump --help lists the options)"
                ))
            })?;
            let buf = input
                .load()
                .map_err(|e| CliError::msg(format!("intel-pt dump: {e}")))?;
            let stdout = std::io::stdout().lock();
            let out = BufWriter::with_capacity(1 << 16, stdout);
            perfaux_intelpt::ptdump::dump(&buf, &opts, out).map_err(CliError::output)
        }
        IntelPtCommand::Decode { args } => {
            let setup = perfaux_intelpt::ptxed::parse_args(args).map_err(|e| {
                CliError::msg(format!(
                    "intel-pt decode: {e} (perfaux intel-pt decode --help lists the options)"
                ))
            })?;
            let stdout = std::io::stdout().lock();
            let out = BufWriter::with_capacity(1 << 16, stdout);
            perfaux_intelpt::ptxed::run(&setup, out).map_err(CliError::output)
        }
    }
}

fn record(args: &RecordArgs, verbose: bool) -> Result<(), CliError> {
    if let Some(line) = perfaux::record::program::refuse_attach(args) {
        return Err(CliError::msg(line));
    }
    if args.pid.is_some() || args.tid.is_some() {
        let code = perfaux::record::attach::record_attached(args, verbose)?;
        std::process::exit(code);
    }
    if !args.command.is_empty() {
        let code = perfaux::record::program::record_program(args, verbose)?;
        std::process::exit(code);
    }
    let cfg = RecordConfig::from_args(args, verbose)?;
    let mut progress = Progress::new("record", verbose, false);
    let summary = perfaux::record::record(&cfg, &mut progress)?;
    progress.done();
    eprint!("{}", summary.lines(&cfg.output));
    match summary.disk_full_line(&cfg.output) {
        Some(line) => Err(CliError::msg(line)),
        None => Ok(()),
    }
}

/// Whether the subcommand is `record` (the first argument that is not an
/// option), before clap has run.
fn is_record() -> bool {
    std::env::args_os()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'))
        .is_some_and(|a| a == "record")
}

fn main() -> ExitCode {
    // Before anything else: an early SIGUSR2 or SIGINT must not kill a
    // recording (its default action would end the process before the file is whole).
    if is_record()
        && let Err(e) = perfaux::record::signals::install()
    {
        eprintln!("perfaux: error: record: {e}");
        return ExitCode::FAILURE;
    }
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Command::Report(a) => report(a, cli.verbose),
        Command::Script(a) => script(a, cli.verbose),
        Command::Record(a) => record(a, cli.verbose),
        Command::Export(a) => export(a, cli.verbose),
        Command::IntelPt(c) => intel_pt(c),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed stdout (perfaux report -D | head) is not an error to
            // report; for record (-o - | ...) it is a recording that failed.
            if !matches!(cli.cmd, Command::Record(_)) && e.is_closed_output() {
                return ExitCode::SUCCESS;
            }
            eprintln!("perfaux: error: {e}");
            ExitCode::FAILURE
        }
    }
}
