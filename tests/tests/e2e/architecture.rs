//! docs/architecture.md's crate table against the workspace as Cargo sees it: every
//! member is listed once, in its directory, with exactly the workspace crates it depends
//! on (normal dependencies; dev- and build-dependencies are the tests' and build
//! scripts' business). The table is what a new engineer reads first, so a crate added,
//! moved or rewired without updating it fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// One row of the table: package name -> (directory, workspace dependencies).
type Table = BTreeMap<String, (String, BTreeSet<String>)>;

/// Code spans (`...`) of a table cell.
fn spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.to_string())
        .collect()
}

/// The crate table of docs/architecture.md: the table whose header starts with
/// `| crate | dir |` and has a `depends on` column.
fn documented(doc: &str) -> Table {
    let mut lines = doc
        .lines()
        .skip_while(|l| !l.starts_with("| crate | dir |"));
    let header: Vec<&str> = lines
        .next()
        .expect("docs/architecture.md has a table starting `| crate | dir |`")
        .split('|')
        .map(str::trim)
        .collect();
    let deps_col = header
        .iter()
        .position(|h| *h == "depends on")
        .expect("the crate table has a `depends on` column");
    let mut table = Table::new();
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = spans(cells[1]).pop().expect("a crate name in `...`");
        let dir = spans(cells[2])
            .pop()
            .expect("a directory in `...`")
            .trim_end_matches('/')
            .to_string();
        let deps = spans(cells[deps_col]).into_iter().collect();
        assert!(
            table.insert(name.clone(), (dir, deps)).is_none(),
            "{name} is listed twice"
        );
    }
    table
}

/// The workspace as `cargo metadata` has it.
fn actual(root: &Path) -> Table {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let members: BTreeSet<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    let workspace = Path::new(meta["workspace_root"].as_str().unwrap());
    let mut table = Table::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap().to_string();
        let manifest = Path::new(p["manifest_path"].as_str().unwrap());
        let dir = manifest
            .parent()
            .unwrap()
            .strip_prefix(workspace)
            .unwrap()
            .display()
            .to_string();
        let deps = p["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_string())
            .filter(|d| members.contains(d))
            .collect();
        table.insert(name, (dir, deps));
    }
    table
}

#[test]
fn the_crate_table_matches_cargo_metadata() {
    // `cargo metadata` takes a CPU for a while: never beside a test that times the machine.
    let _machine = sonda_tests::shared();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let documented = documented(&doc);
    let actual = actual(root);
    let mut wrong = Vec::new();
    for (name, (dir, deps)) in &actual {
        match documented.get(name) {
            None => wrong.push(format!("{name} ({dir}/) is not in the table")),
            Some((d, _)) if d != dir => {
                wrong.push(format!("{name} lives in {dir}/, the table says {d}/"))
            }
            Some((_, documented_deps)) if documented_deps != deps => wrong.push(format!(
                "{name} depends on {deps:?}, the table says {documented_deps:?}"
            )),
            Some(_) => {}
        }
    }
    for name in documented.keys().filter(|n| !actual.contains_key(*n)) {
        wrong.push(format!("{name} is in the table but not in the workspace"));
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's crate table is out of date:\n{}",
        wrong.join("\n")
    );
}
