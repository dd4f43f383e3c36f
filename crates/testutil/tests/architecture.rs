//! docs/ARCHITECTURE.md's dependency table is the workspace's: every member is listed, at its
//! path, with exactly the workspace crates it depends on (normal dependencies; dev and build
//! dependencies are the crate's own business). The truth is `cargo metadata`, so the map
//! cannot drift from the Cargo.toml files unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One crate: its path under the workspace root and the workspace crates it depends on.
#[derive(Debug, PartialEq)]
struct Row {
    path: String,
    deps: BTreeSet<String>,
}

fn workspace_root() -> PathBuf {
    // crates/testutil -> the root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testutil has a workspace root two levels up")
        .to_path_buf()
}

/// The table's header row; the table is the first one in the file that starts with it.
const HEADER: &str = "| crate | path | depends on |";

/// Reads the dependency table of `text`: rows `| `name` | path | `dep`, `dep` |`, where the
/// last cell is "nothing" when the crate depends on no workspace crate.
fn parse_table(text: &str) -> Result<BTreeMap<String, Row>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .skip_while(|(_, l)| l.trim() != HEADER);
    if lines.next().is_none() {
        return Err(format!(
            "docs/ARCHITECTURE.md has no table headed `{HEADER}`"
        ));
    }
    let mut rows = BTreeMap::new();
    for (n, line) in lines {
        let line = line.trim();
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue; // the separator row
        }
        let at = n + 1;
        let [name, path, deps] = cells[..] else {
            return Err(format!(
                "docs/ARCHITECTURE.md line {at}: {} cells, the table has 3",
                cells.len()
            ));
        };
        let unquote = |s: &str| s.trim().trim_matches('`').to_owned();
        let deps: BTreeSet<String> = if deps == "nothing" {
            BTreeSet::new()
        } else {
            deps.split(',').map(unquote).collect()
        };
        if deps.iter().any(|d| d.is_empty() || d.contains(' ')) {
            return Err(format!(
                "docs/ARCHITECTURE.md line {at}: depends-on cell `{deps:?}` is not a list of crate names"
            ));
        }
        let row = Row {
            path: path.to_owned(),
            deps,
        };
        if rows.insert(unquote(name), row).is_some() {
            return Err(format!(
                "docs/ARCHITECTURE.md line {at}: {name} is listed twice"
            ));
        }
    }
    if rows.is_empty() {
        return Err("docs/ARCHITECTURE.md's dependency table has no rows".into());
    }
    Ok(rows)
}

/// The workspace as `cargo metadata --no-deps` sees it.
fn cargo_metadata(root: &Path) -> BTreeMap<String, Row> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let names: BTreeSet<&str> = packages
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap_or("")))
        .filter_map(|p| p["name"].as_str())
        .collect();
    let mut rows = BTreeMap::new();
    for p in packages
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap_or("")))
    {
        let name = p["name"].as_str().expect("package name");
        let manifest = Path::new(p["manifest_path"].as_str().expect("manifest_path"));
        let path = manifest
            .parent()
            .and_then(|d| d.strip_prefix(root).ok())
            .expect("a member's manifest is under the workspace root")
            .to_string_lossy()
            .into_owned();
        let deps = p["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            // kind null: a normal dependency ("dev" and "build" are the others).
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str())
            .filter(|d| names.contains(d))
            .map(str::to_owned)
            .collect();
        rows.insert(name.to_owned(), Row { path, deps });
    }
    rows
}

/// Every difference, one line each, as "what the table says / what Cargo says".
fn differences(doc: &BTreeMap<String, Row>, cargo: &BTreeMap<String, Row>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, c) in cargo {
        let Some(d) = doc.get(name) else {
            out.push(format!(
                "{name} ({}): a workspace member the table does not list",
                c.path
            ));
            continue;
        };
        if d.path != c.path {
            out.push(format!(
                "{name}: the table says path {}, Cargo says {}",
                d.path, c.path
            ));
        }
        for dep in d.deps.difference(&c.deps) {
            out.push(format!(
                "{name}: the table says it depends on {dep}, its Cargo.toml does not"
            ));
        }
        for dep in c.deps.difference(&d.deps) {
            out.push(format!(
                "{name}: its Cargo.toml depends on {dep}, the table does not say so"
            ));
        }
    }
    for name in doc.keys().filter(|n| !cargo.contains_key(*n)) {
        out.push(format!(
            "{name}: listed in the table, not a workspace member"
        ));
    }
    out
}

#[test]
fn the_dependency_table_of_architecture_md_is_cargo_metadata() {
    let root = workspace_root();
    let text =
        std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md");
    let doc = parse_table(&text).unwrap_or_else(|e| panic!("{e}"));
    let diff = differences(&doc, &cargo_metadata(&root));
    assert!(
        diff.is_empty(),
        "docs/ARCHITECTURE.md's dependency table differs from `cargo metadata`:\n  {}",
        diff.join("\n  ")
    );
}

#[test]
fn a_table_edge_cargo_lacks_is_reported_by_name() {
    let doc = parse_table(
        "x\n| crate | path | depends on |\n|---|---|---|\n| `a` | crates/a | nothing |\n\
         | `b` | crates/b | `a`, `c` |\n\nafter\n",
    )
    .unwrap();
    let mut cargo = BTreeMap::new();
    cargo.insert(
        "a".to_owned(),
        Row {
            path: "crates/a".into(),
            deps: BTreeSet::new(),
        },
    );
    let b = Row {
        path: "crates/bb".into(),
        deps: ["a", "d"].map(String::from).into(),
    };
    cargo.insert("b".to_owned(), b);
    assert_eq!(
        differences(&doc, &cargo),
        [
            "b: the table says path crates/b, Cargo says crates/bb",
            "b: the table says it depends on c, its Cargo.toml does not",
            "b: its Cargo.toml depends on d, the table does not say so",
        ]
    );
}

#[test]
fn a_table_row_without_three_cells_is_an_error_with_its_line() {
    let err = parse_table("| crate | path | depends on |\n|---|---|---|\n| `a` | crates/a |\n")
        .unwrap_err();
    assert!(err.contains("line 3"), "{err}");
}
