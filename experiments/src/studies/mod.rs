//! Multi-run studies (`o2o experiment …`): each answers one question about an algorithm by
//! running its variants over seeds, as separate `o2o` processes, into one output folder:
//! `runs/<variant>/seed-<s>/`, `logs/`, `table.md`, `curves.png` and `results.json`. A finished
//! run found in its folder is reused and a stopped one resumed, so a study that was interrupted
//! continues where it stopped when it is started again.
//!
//! - [`wsrl_ablation`]: WSRL's warm-up and data retention against no warm-up, CQL kept online,
//!   Cal-QL keeping the data and RLPD from scratch (`o2o experiment wsrl-ablation`);
//! - [`sera_ablation`]: Cal-QL fine-tuning with and without SERA's bonus, with maze coverage on
//!   AntMaze (`sera-ablation`);
//! - [`famo2o_ablation`]: FamO2O-CQL against one fixed β = 1 (`famo2o-ablation`);
//! - [`famo2o_claim`]: FamO2O-CQL's state-adaptive balance against fixed β = 0.5, 1.0, 1.5 on
//!   data whose quality differs by region, and β(s) per region (`famo2o-claim`);
//! - [`dopamine`]: shaping with a learned progress model: sparse vs naive vs PBRS, and the
//!   semantic trap (`dopamine`);
//! - [`unio4_claim`]: Uni-O4's offline-to-online hand-over against IQL → IQL and PPO from
//!   scratch (`unio4-claim`).
//!
//! One file per study: an options struct (what to run), `run(&options)`, which runs (or reuses)
//! the runs and writes the folder, and the [`StudyReport`] it returns, whose `table` and
//! [`summary`](StudyReport::summary) are what the command prints. [`jobs`] is what they share:
//! the job runner (parents before children, `--jobs` at a time, reuse and resume), the score
//! tables at fixed env steps, the paired per-seed comparisons and the curves plot.
//!
//! The module is `studies` rather than `experiments` (the crate's own name) or `claims` (half of
//! them are ablations of a mechanism, not tests of a paper's claim); `bench` and `benchmarks`
//! are the speed benchmarks and the benchmark datasets.

pub mod dopamine;
pub mod famo2o_ablation;
pub mod famo2o_claim;
pub mod jobs;
pub mod sera_ablation;
pub mod unio4_claim;
pub mod wsrl_ablation;

use std::path::PathBuf;

/// What a study wrote into its output folder, and what `o2o experiment` prints of it.
#[derive(Debug, Clone)]
pub struct StudyReport {
    /// The output folder.
    pub out: PathBuf,
    /// The text of `table.md`.
    pub table: String,
    /// The value written to `results.json`.
    pub results: serde_json::Value,
    /// The files the summary line names, relative to `out` (none: it names the folder alone).
    pub listed: Vec<&'static str>,
}

impl StudyReport {
    /// The report of a study that wrote the usual three files (`table.md`, `curves.png`,
    /// `results.json`), the ones its summary names.
    pub(crate) fn written(out: PathBuf, table: String, results: serde_json::Value) -> Self {
        Self { out, table, results, listed: vec!["table.md", "curves.png", "results.json"] }
    }

    /// The line printed after the table: `written: <out>/table.md, …` (or `wrote <out>`).
    pub fn summary(&self) -> String {
        let out = self.out.display();
        if self.listed.is_empty() {
            return format!("wrote {out}");
        }
        let files: Vec<String> = self.listed.iter().map(|name| format!("{out}/{name}")).collect();
        format!("written: {}", files.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary names the listed files under the folder as given, or the folder alone.
    #[test]
    fn the_summary_names_the_files_written() {
        let mut r = StudyReport::written("out/x".into(), String::new(), serde_json::Value::Null);
        assert_eq!(r.summary(), "written: out/x/table.md, out/x/curves.png, out/x/results.json");
        r.listed.push("coverage.png");
        assert!(r.summary().ends_with(", out/x/results.json, out/x/coverage.png"));
        r.listed.clear();
        assert_eq!(r.summary(), "wrote out/x");
    }
}
