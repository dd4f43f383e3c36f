//! The command line's errors: each one is a single line that says what went
//! wrong and where (file and offset, event and position).

use std::fmt;
use std::path::Path;

/// An error that ends a subcommand. `main` prints it as `perfaux: error: ...`.
#[derive(Debug)]
pub struct CliError {
    msg: String,
    /// The reader of our standard output went away (`perfaux script | head`): known from the
    /// I/O error's kind, not from its text.
    closed_output: bool,
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for CliError {}

impl CliError {
    /// An error with this message.
    pub fn msg(m: impl Into<String>) -> Self {
        CliError {
            msg: m.into(),
            closed_output: false,
        }
    }

    /// Whether the output's reader closed it (EPIPE): for a reader's
    /// subcommand, the end of its work rather than a failure.
    pub fn is_closed_output(&self) -> bool {
        self.closed_output
    }

    /// An error reading `path`: the underlying error names the offset.
    pub fn file(path: &Path, e: impl fmt::Display) -> Self {
        let s = e.to_string();
        // Keep it to one line whatever the source said.
        CliError::msg(format!("{}: {}", path.display(), s.replace('\n', " ")))
    }

    /// An error writing the output (a closed pipe included).
    pub fn output(e: std::io::Error) -> Self {
        CliError {
            closed_output: e.kind() == std::io::ErrorKind::BrokenPipe,
            msg: format!("writing output: {e}"),
        }
    }
}

impl From<String> for CliError {
    fn from(s: String) -> Self {
        CliError::msg(s)
    }
}
