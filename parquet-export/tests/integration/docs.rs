//! docs/parquet.md against the schema: every table's section lists its columns, in
//! file order, with their types, units, nullability and meaning, as module `schema`
//! defines them (on a difference the test prints the section as it should read).

use sonda_parquet::Table;

/// The markdown table of `table`'s columns.
fn expected(table: Table) -> String {
    let mut s = String::from("| column | type | unit | null | what |\n|---|---|---|---|---|\n");
    for c in table.columns() {
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            c.name,
            c.kind.parquet_name(),
            c.unit,
            if c.nullable { "yes" } else { "" },
            c.doc
        ));
    }
    s
}

#[test]
fn the_docs_list_every_column_of_every_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/parquet.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let mut wrong = Vec::new();
    for table in Table::ALL {
        let heading = format!("### `{}`", table.name());
        let Some(at) = docs.find(&format!("{heading}\n")) else {
            wrong.push(format!("no section {heading}"));
            continue;
        };
        let section = &docs[at..];
        let start = section.find("| column |").unwrap_or(0);
        let rest = &section[start..];
        let end = rest.find("\n\n").map_or(rest.len(), |e| e + 1);
        let want = expected(table);
        if rest[..end] != want {
            wrong.push(format!("{heading} should list:\n\n{want}"));
        }
    }
    assert!(wrong.is_empty(), "{path}:\n{}", wrong.join("\n"));
}
