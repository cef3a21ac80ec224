//! Human-readable output of control-plane results: a table for a list, aligned
//! `field  value` lines otherwise. `--json` bypasses this.

use serde_json::{Map, Value};

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// A list (`{"keys": [...]}`) prints as a table, anything else as `field: value`.
pub fn print_human(result: &Value) {
    let Some(object) = result.as_object() else {
        println!("{}", scalar(result));
        return;
    };
    let list = object.iter().find(|(_, v)| v.is_array());
    match list {
        Some((name, Value::Array(rows))) if rows.iter().all(Value::is_object) => {
            print_table(name, rows);
            for (key, value) in object.iter().filter(|(k, v)| *k != name && !v.is_null()) {
                println!("{key}: {}", scalar(value));
            }
        }
        _ => print_fields(object),
    }
}

fn print_fields(object: &Map<String, Value>) {
    let width = object.keys().map(String::len).max().unwrap_or(0);
    for (key, value) in object {
        println!("{key:width$}  {}", scalar(value));
    }
}

fn print_table(name: &str, rows: &[Value]) {
    if rows.is_empty() {
        println!("(no {name})");
        return;
    }
    let columns: Vec<&String> = rows[0]
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array())
                .map(|(k, _)| k)
                .collect()
        })
        .unwrap_or_default();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| columns.iter().map(|c| scalar(&row[c.as_str()])).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(c.len())
        })
        .collect();
    let line = |values: Vec<String>| {
        let padded: Vec<String> = values.iter().zip(&widths).map(|(v, w)| format!("{v:w$}")).collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(columns.iter().map(|c| c.to_uppercase()).collect());
    for row in cells {
        line(row);
    }
}
