//! The command line's errors: each one is a single line that says what went
//! wrong and where (file and offset, event and position).

use std::fmt;
use std::path::Path;

/// An error that ends a subcommand. `main` prints it as `perfaux: error: ...`.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CliError {}

impl CliError {
    pub fn msg(m: impl Into<String>) -> Self {
        CliError(m.into())
    }

    /// An error reading `path`: the underlying error names the offset.
    pub fn file(path: &Path, e: impl fmt::Display) -> Self {
        let s = e.to_string();
        // Keep it to one line whatever the source said.
        CliError(format!("{}: {}", path.display(), s.replace('\n', " ")))
    }

    /// An error writing the output (a closed pipe included).
    pub fn output(e: std::io::Error) -> Self {
        CliError(format!("writing output: {e}"))
    }
}

impl From<String> for CliError {
    fn from(s: String) -> Self {
        CliError(s)
    }
}
