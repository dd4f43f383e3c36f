//! `-P` / `-U` patterns, in uftrace's syntax: `FUNC[@MODULE]`, where FUNC is a regular
//! expression searched in the demangled name (`--match=glob`: a glob over the whole name), and a
//! FUNC with none of regex's special characters is the exact name; MODULE names the object
//! (its file name, or that name up to a `.` or `-`: `@libz` is `libz.so.1`), and without it the
//! program's executable is meant. `-P .` patches every function of the executable. A function
//! is patched if some `-P` names it and no `-U` does.
//!
//! The spec travels to the traced program's runtime in one environment variable
//! ([`PatchSpec::encode`]), one rule a line.

use regex_lite::Regex;

/// How FUNC is read (uftrace's `--match`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatchKind {
    #[default]
    Regex,
    Glob,
}

/// A pattern that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    pub pattern: String,
    pub why: String,
}

impl std::fmt::Display for PatternError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pattern {:?}: {}", self.pattern, self.why)
    }
}

impl std::error::Error for PatternError {}

/// The characters that make a FUNC a regular expression (uftrace's REGEX_CHARS).
const REGEX_CHARS: &[char] = &[
    '.', '?', '*', '+', '-', '^', '$', '|', '(', ')', '[', ']', '{', '}',
];

#[derive(Debug, Clone)]
enum Matcher {
    /// `.` or `.*`: every name (no demangling needed to decide).
    All,
    Exact(String),
    Regex(Regex),
}

#[derive(Debug, Clone)]
struct Rule {
    patch: bool,
    kind: MatchKind,
    source: String,
    matcher: Matcher,
    module: Option<String>,
}

/// The `-P` and `-U` rules of a recording.
#[derive(Debug, Clone, Default)]
pub struct PatchSpec {
    rules: Vec<Rule>,
}

impl PatchSpec {
    /// The rules of `patch` (`-P`) and `unpatch` (`-U`) patterns.
    pub fn parse(
        patch: &[String],
        unpatch: &[String],
        kind: MatchKind,
    ) -> Result<Self, PatternError> {
        let mut rules = Vec::new();
        for (list, is_patch) in [(patch, true), (unpatch, false)] {
            for p in list {
                rules.push(Rule::parse(p, is_patch, kind)?);
            }
        }
        Ok(PatchSpec { rules })
    }

    /// Whether any function is to be patched.
    pub fn is_empty(&self) -> bool {
        !self.rules.iter().any(|r| r.patch)
    }

    /// Whether any `-P` rule names the object `module` (its path; `is_main`: the executable).
    pub fn wants_object(&self, module: &str, is_main: bool) -> bool {
        self.rules
            .iter()
            .any(|r| r.patch && r.names_object(module, is_main))
    }

    /// Whether a `-P` rule names a library (`FUNC@LIB`): only then can an object loaded later
    /// (never the executable) have functions to patch.
    pub fn names_libraries(&self) -> bool {
        self.rules.iter().any(|r| r.patch && r.module.is_some())
    }

    /// Whether every function of `module` is patched whatever its name (`-P .` and no `-U`):
    /// then no name needs demangling.
    pub fn takes_every_function(&self, module: &str, is_main: bool) -> bool {
        let rules = || {
            self.rules
                .iter()
                .filter(|r| r.names_object(module, is_main))
        };
        rules().any(|r| r.patch && matches!(r.matcher, Matcher::All)) && rules().all(|r| r.patch)
    }

    /// Whether the function of `module` whose demangled names are `names` is patched.
    pub fn matches<S: AsRef<str>>(&self, names: &[S], module: &str, is_main: bool) -> bool {
        let hit = |r: &Rule| {
            r.names_object(module, is_main) && names.iter().any(|n| r.matches(n.as_ref()))
        };
        let mut patch = false;
        for r in &self.rules {
            if hit(r) {
                if !r.patch {
                    return false;
                }
                patch = true;
            }
        }
        patch
    }

    /// The spec as one environment variable's value: a rule a line, `P` or `U`, `r` or `g`, a
    /// tab, the pattern as given.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for r in &self.rules {
            out.push(if r.patch { 'P' } else { 'U' });
            out.push(if r.kind == MatchKind::Glob { 'g' } else { 'r' });
            out.push('\t');
            out.push_str(&r.source);
            out.push('\n');
        }
        out
    }

    /// The spec [`PatchSpec::encode`] wrote.
    pub fn decode(s: &str) -> Result<Self, PatternError> {
        let mut rules = Vec::new();
        for line in s.lines().filter(|l| !l.is_empty()) {
            let bad = || PatternError {
                pattern: line.to_string(),
                why: "not a rule of PatchSpec::encode".into(),
            };
            let (head, pattern) = line.split_once('\t').ok_or_else(bad)?;
            let (patch, kind) = match head {
                "Pr" => (true, MatchKind::Regex),
                "Pg" => (true, MatchKind::Glob),
                "Ur" => (false, MatchKind::Regex),
                "Ug" => (false, MatchKind::Glob),
                _ => return Err(bad()),
            };
            rules.push(Rule::parse(pattern, patch, kind)?);
        }
        Ok(PatchSpec { rules })
    }
}

impl Rule {
    fn parse(source: &str, patch: bool, kind: MatchKind) -> Result<Self, PatternError> {
        let err = |why: String| PatternError {
            pattern: source.to_string(),
            why,
        };
        let (func, module) = match source.rsplit_once('@') {
            Some((f, m)) if !m.is_empty() => (f, Some(m.to_string())),
            _ => (source, None),
        };
        if func.is_empty() {
            return Err(err("no function pattern before '@'".into()));
        }
        let matcher = match kind {
            MatchKind::Regex if func == "." || func == ".*" => Matcher::All,
            MatchKind::Glob if func == "*" => Matcher::All,
            MatchKind::Regex if !func.contains(REGEX_CHARS) => Matcher::Exact(func.to_string()),
            MatchKind::Regex => Matcher::Regex(Regex::new(func).map_err(|e| err(e.to_string()))?),
            MatchKind::Glob => {
                Matcher::Regex(Regex::new(&glob_to_regex(func)).map_err(|e| err(e.to_string()))?)
            }
        };
        Ok(Rule {
            patch,
            kind,
            source: source.to_string(),
            matcher,
            module,
        })
    }

    fn matches(&self, name: &str) -> bool {
        match &self.matcher {
            Matcher::All => true,
            Matcher::Exact(s) => s == name,
            Matcher::Regex(r) => r.is_match(name),
        }
    }

    fn names_object(&self, path: &str, is_main: bool) -> bool {
        let Some(m) = &self.module else {
            return is_main;
        };
        let base = path.rsplit('/').next().unwrap_or(path);
        base == m
            || base
                .strip_prefix(m.as_str())
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
    }
}

/// A glob (`*`, `?`, `[...]`) as an anchored regular expression.
fn glob_to_regex(glob: &str) -> String {
    let mut out = String::from("^");
    let mut in_class = false;
    for c in glob.chars() {
        match c {
            '[' if !in_class => {
                in_class = true;
                out.push('[');
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            _ if in_class => out.push(c),
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            _ => out.push_str(&regex_lite::escape(&c.to_string())),
        }
    }
    out.push('$');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(p: &[&str], u: &[&str], kind: MatchKind) -> PatchSpec {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        PatchSpec::parse(&s(p), &s(u), kind).unwrap()
    }

    #[test]
    fn a_plain_name_is_that_name_and_a_regex_searches() {
        let s = spec(&["leaf", "^fi"], &[], MatchKind::Regex);
        assert!(s.matches(&["leaf"], "/bin/p", true));
        assert!(!s.matches(&["leaf2"], "/bin/p", true), "exact, as uftrace");
        assert!(s.matches(&["fib"], "/bin/p", true));
        assert!(!s.matches(&["xfib"], "/bin/p", true));
    }

    #[test]
    fn dot_patches_every_function_of_the_executable_only() {
        let s = spec(&["."], &[], MatchKind::Regex);
        assert!(s.matches(&["anything"], "/bin/p", true));
        assert!(!s.matches(&["malloc"], "/lib/libc.so.6", false));
        assert!(s.wants_object("/bin/p", true));
        assert!(!s.wants_object("/lib/libc.so.6", false));
    }

    #[test]
    fn a_module_names_a_library_by_its_file_name() {
        let s = spec(&["compress.*@libz"], &[], MatchKind::Regex);
        assert!(s.matches(&["compress2"], "/usr/lib/libz.so.1", false));
        assert!(!s.matches(&["compress2"], "/usr/lib/libzstd.so.1", false));
        assert!(!s.matches(&["compress2"], "/bin/p", true));
        assert!(s.wants_object("/usr/lib/libz.so.1", false));
    }

    #[test]
    fn only_dot_without_unpatch_takes_every_function() {
        let all = spec(&["."], &[], MatchKind::Regex);
        assert!(all.takes_every_function("/bin/p", true));
        assert!(!all.takes_every_function("/lib/libc.so.6", false));
        assert!(!spec(&["."], &["x"], MatchKind::Regex).takes_every_function("/bin/p", true));
        assert!(!spec(&["^m"], &[], MatchKind::Regex).takes_every_function("/bin/p", true));
        assert!(spec(&["*"], &[], MatchKind::Glob).takes_every_function("/bin/p", true));
    }

    #[test]
    fn only_a_rule_with_a_library_names_libraries() {
        assert!(!spec(&["."], &["x@liby"], MatchKind::Regex).names_libraries());
        assert!(spec(&["f", "g@libz"], &[], MatchKind::Regex).names_libraries());
    }

    #[test]
    fn unpatch_wins_over_patch() {
        let s = spec(&["."], &["^std::"], MatchKind::Regex);
        assert!(s.matches(&["main"], "/bin/p", true));
        assert!(!s.matches(&["std::rt::lang_start"], "/bin/p", true));
    }

    #[test]
    fn a_glob_matches_the_whole_name() {
        let s = spec(&["fi?", "w*er"], &[], MatchKind::Glob);
        assert!(s.matches(&["fib"], "/bin/p", true));
        assert!(!s.matches(&["fibs"], "/bin/p", true));
        assert!(s.matches(&["worker"], "/bin/p", true));
        assert!(!s.matches(&["a.b"], "/bin/p", true));
    }

    #[test]
    fn the_encoded_spec_decodes_to_the_same_rules() {
        let s = spec(&["^f", "leaf@libx"], &["fib"], MatchKind::Glob);
        let d = PatchSpec::decode(&s.encode()).unwrap();
        assert_eq!(d.encode(), s.encode());
        assert!(PatchSpec::decode("Xr\tfoo\n").is_err());
    }

    #[test]
    fn a_bad_regex_says_which_pattern() {
        let e = PatchSpec::parse(&["(".into()], &[], MatchKind::Regex).unwrap_err();
        assert_eq!(e.pattern, "(");
        assert!(e.to_string().starts_with("pattern \"(\": "));
    }
}
