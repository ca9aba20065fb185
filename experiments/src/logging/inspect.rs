//! Reading a recording back: `rerun rrd print|stats` from the set-up's virtualenv, the chunks
//! (entity, rows, timelines) its output lists, and their cells (`rerun rrd print -vvv`) — what
//! the tests check recordings with.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The set-up's `rerun` command (the viewer and rrd tools matching the SDK).
pub fn rerun_cli() -> PathBuf {
    crate::paths::venv_dir().join("bin/rerun")
}

/// The output (stdout, then stderr) of `rerun rrd <what> <file>`: `print` (with `-vv`), `stats`.
pub fn rrd(what: &str, file: &Path) -> Result<String> {
    rrd_with(what, if what == "print" { &["-vv"] } else { &[] }, file)
}

/// `rerun rrd print -vvv <file>`: every chunk with its cells, for [`tables`].
pub fn rrd_cells(file: &Path) -> Result<String> {
    rrd_with("print", &["-vvv"], file)
}

fn rrd_with(what: &str, flags: &[&str], file: &Path) -> Result<String> {
    let out = Command::new(rerun_cli())
        .args(["rrd", what])
        .args(flags)
        .arg(file)
        .output()
        .with_context(|| format!("cannot run {} (run scripts/setup.sh)", rerun_cli().display()))?;
    if !out.status.success() {
        bail!("rerun rrd {what} {} failed: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// One chunk of `rerun rrd print -vv` output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Its entity path, e.g. `/train/critic_loss`.
    pub entity: String,
    /// Rows in the chunk.
    pub rows: usize,
    /// The timelines it is indexed by.
    pub timelines: Vec<String>,
}

/// Parse `rerun rrd print -vv`: a header line `Chunk(id) with N rows (size) - /entity - …`
/// followed by a table whose column headers say `index_name: <timeline>`.
pub fn chunks(printed: &str) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = Vec::new();
    for line in printed.lines() {
        if let Some(rest) = line.strip_prefix("Chunk(") {
            let rows =
                rest.split(" with ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
            let entity = rest.split(" - ").nth(1).unwrap_or("").trim().to_string();
            out.push(Chunk { entity, rows, timelines: Vec::new() });
        } else if let Some(c) = out.last_mut() {
            for part in line.split("index_name: ").skip(1) {
                let name: String = part.chars().take_while(|ch| ch.is_alphanumeric() || *ch == '_').collect();
                c.timelines.push(name);
            }
        }
    }
    out
}

/// One chunk of `rerun rrd print -vvv` output with its cells, as printed.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Its entity path.
    pub entity: String,
    /// The column names: `RowId`, the timelines, then `Archetype:component`.
    pub columns: Vec<String>,
    /// One row of cells per row of the chunk.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The cell of `column` in `row`.
    pub fn cell(&self, row: usize, column: &str) -> Option<&str> {
        let c = self.columns.iter().position(|n| n == column)?;
        self.rows.get(row)?.get(c).map(String::as_str)
    }
}

/// The cells of a table line `│ │ a ┆ b ┆ c │ │`.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('│').trim().trim_start_matches('│');
    let inner = inner.trim_end().trim_end_matches('│').trim_end().trim_end_matches('│');
    inner.split('┆').map(|c| c.trim().to_string()).collect()
}

/// Parse `rerun rrd print -vvv`: per chunk, the header line that starts with `RowId` names the
/// columns, and every line that starts with a row id (`row_…`) is a row.
pub fn tables(printed: &str) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    for line in printed.lines() {
        if line.starts_with("Chunk(") {
            let entity = line.split(" - ").nth(1).unwrap_or("").trim().to_string();
            out.push(Table { entity, columns: Vec::new(), rows: Vec::new() });
            continue;
        }
        let Some(t) = out.last_mut() else { continue };
        let row = cells(line);
        match row.first().map(String::as_str) {
            Some("RowId") if t.columns.is_empty() => t.columns = row,
            Some(id) if id.starts_with("row_") && row.len() == t.columns.len() => t.rows.push(row),
            _ => {}
        }
    }
    out
}

/// The cell of `entity`'s `column` in effect at `at` on `timeline`: from the row with the
/// greatest time at or before `at` (the viewer's "latest at"), or, without one, a static row.
pub fn latest_at<'a>(tables: &'a [Table], entity: &str, column: &str, timeline: &str, at: i64) -> Option<&'a str> {
    let mut best: Option<(i64, &str)> = None;
    let mut fixed = None;
    for t in tables.iter().filter(|t| t.entity == entity) {
        for r in 0..t.rows.len() {
            let Some(cell) = t.cell(r, column).filter(|c| *c != "null" && !c.is_empty()) else { continue };
            match t.cell(r, timeline) {
                Some(time) => {
                    let Ok(time) = time.parse::<i64>() else { continue };
                    if time <= at && best.is_none_or(|(b, _)| time >= b) {
                        best = Some((time, cell));
                    }
                }
                // A row without the timeline: static when the chunk has no timeline at all.
                None if t.columns.iter().all(|c| c == "RowId" || c.contains(':')) => fixed = Some(cell),
                None => {}
            }
        }
    }
    best.map(|(_, c)| c).or(fixed)
}

/// The greatest time on `timeline` in the recording (where a viewer that follows the data puts
/// its cursor).
pub fn last_time(tables: &[Table], timeline: &str) -> Option<i64> {
    tables.iter().flat_map(|t| (0..t.rows.len()).filter_map(move |r| t.cell(r, timeline)?.parse::<i64>().ok())).max()
}

/// The numbers in a printed cell, in order: `[[0.5, -1.0, 2e-3]]` gives `[0.5, -1.0, 0.002]`.
pub fn numbers(cell: &str) -> Vec<f64> {
    cell.split(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .filter_map(|s| s.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_of_printed_chunks_are_read_back() {
        let printed = "\
Chunk(chunk_1) with 2 rows (1.4 KiB) - /episode/world/cart - \n\
│ │ RowId           ┆ run_step             ┆ Transform3D:translation │ │\n\
│ │ ---             ┆ ---                  ┆ ---                     │ │\n\
│ │ type: x         ┆ index_name: run_step ┆ archetype: Transform3D  │ │\n\
│ │ row_18EE        ┆ 100                  ┆ [[-0.25, 0.0, 1e-2]]    │ │\n\
│ │ row_18EF        ┆ 300                  ┆ [[4.5, 0.0, 0.0]]       │ │\n\
Chunk(chunk_2) with 1 rows (1 KiB) - /episode/world/cart - \n\
│ │ RowId           ┆ eval_step            ┆ Transform3D:translation │ │\n\
│ │ row_18F0        ┆ 7                    ┆ [[9.0, 0.0, 0.0]]       │ │\n";
        let t = tables(printed);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].rows.len(), 2);
        assert_eq!(last_time(&t, "run_step"), Some(300));
        let at = |step| latest_at(&t, "/episode/world/cart", "Transform3D:translation", "run_step", step);
        assert_eq!(at(299), Some("[[-0.25, 0.0, 1e-2]]"));
        assert_eq!(at(300).map(numbers), Some(vec![4.5, 0.0, 0.0]));
        assert_eq!(at(99), None);
        assert_eq!(numbers("[[-0.25, 0.0, 1e-2]]"), [-0.25, 0.0, 0.01]);
    }
}
