//! `perfaux`: record, report -D and script for the perf AUX area.

use std::io::BufWriter;
use std::process::ExitCode;

use clap::Parser;
use perfaux::cli::{Cli, Command, RecordArgs, ReportArgs, ScriptArgs};
use perfaux::error::CliError;
use perfaux::progress::Progress;
use perfaux::record::RecordConfig;

fn report(args: &ReportArgs, verbose: bool) -> Result<(), CliError> {
    let stdout = std::io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    if !args.dump_raw_trace {
        return perfaux::report::report(&args.input, &args.view, &mut out);
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
    perfaux::script::script(&args.input, args.call_trace, &mut out, &mut progress)
}

fn record(args: &RecordArgs, verbose: bool) -> Result<(), CliError> {
    if let Some(line) = perfaux::record::program::refuse_attach(args) {
        return Err(CliError::msg(line));
    }
    if !args.command.is_empty() {
        if perfaux::record::sampler_options(args)?.any() {
            // The program's events are resolved where the program is started; until the
            // options reach them there, saying so beats recording without them.
            return Err(CliError::msg(
                "record: -g, --call-graph, -F and -c are not yet applied to a program's \
                 events: write them as the sampler's terms, e.g. \
                 -e 'task-clock/call-graph=fp,freq=999/' or -e 'probe:FUNC/call-graph=fp/'",
            ));
        }
        let (summary, end) = perfaux::record::program::record_program(args, verbose)?;
        eprint!("{}", summary.lines(&args.output));
        if let Some(line) = end.signal_line(&args.command[0]) {
            eprintln!("{line}");
        }
        let mut code = i32::from(end.exit_code());
        if let Some(line) = summary.disk_full_line(&args.output) {
            eprintln!("perfaux: error: {line}");
            code = code.max(1);
        }
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
    // recording (issue 11).
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
        Command::Export(a) => perfaux::export::export(a).map(|_| ()),
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
