//! Evaluating a progress model on held-out demonstrations: its progress curves against the
//! label pipeline's ground truth, and value–order correlation (VOC) per reconstruction mode.

use crate::labels::{checked_subtasks, sample_frames};
use crate::progress::{voc, Demo, ProgressModel};
use crate::reconstruct::Fusion;
use crate::RewardModelError;
use serde::Serialize;

/// Every reconstruction mode, in report order.
pub const MODES: [Fusion; 5] = [Fusion::Incremental, Fusion::Forward, Fusion::Backward, Fusion::Mean, Fusion::Weighted];

/// Ground-truth progress at every frame of an episode of `len` frames: i/M at the sample
/// frames, linear in between, 0 before the first and 1 after the last.
pub fn ground_truth(demo: &Demo, sample_factor: usize) -> Result<Vec<f64>, RewardModelError> {
    let subtasks = checked_subtasks(demo.keyframes.as_deref(), demo.len, &demo.name)?;
    let frames = sample_frames(&subtasks, sample_factor);
    let m = (frames.len() - 1).max(1) as f64;
    Ok((0..demo.len)
        .map(|t| match frames.binary_search(&t) {
            Ok(i) => i as f64 / m,
            Err(0) => 0.0,
            Err(i) if i == frames.len() => 1.0,
            Err(i) => {
                let (a, b) = (frames[i - 1] as f64, frames[i] as f64);
                ((i - 1) as f64 + (t as f64 - a) / (b - a)) / m
            }
        })
        .collect())
}

/// One demo's evaluation, over its frames up to the end of its last sub-task.
#[derive(Debug, Clone, Serialize)]
pub struct DemoEval {
    /// Demo name.
    pub name: String,
    /// Frames evaluated.
    pub frames: usize,
    /// VOC per mode, in [`MODES`] order.
    pub voc: [f64; 5],
    /// Mean |Φ − ground truth| per mode.
    pub mae: [f64; 5],
    /// Ground-truth progress per frame.
    pub truth: Vec<f64>,
    /// Predicted Φ per frame and mode, `[frame][mode]`.
    pub predicted: Vec<[f64; 5]>,
}

/// The whole evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// Mode names, in order.
    pub modes: Vec<String>,
    /// Mean VOC per mode over demos.
    pub mean_voc: [f64; 5],
    /// Mean |Φ − ground truth| per mode over demos.
    pub mean_mae: [f64; 5],
    /// Per demo.
    pub demos: Vec<DemoEval>,
}

/// Evaluate `model` on `demos`.
pub fn evaluate(model: &ProgressModel, demos: &[Demo]) -> Result<EvalReport, RewardModelError> {
    if demos.is_empty() {
        return Err(RewardModelError::Demo { demo: "all".into(), message: "no demonstrations to evaluate on".into() });
    }
    let d = model.input_dim();
    let k = model.config().labels.sample_factor;
    let mut out = Vec::new();
    for demo in demos {
        let subtasks = checked_subtasks(demo.keyframes.as_deref(), demo.len, &demo.name)?;
        let end = subtasks.last().map(|t| t.end_frame_id + 1).unwrap_or(demo.len);
        let truth: Vec<f64> = ground_truth(demo, k)?[..end].to_vec();
        let curve = model.progress_curve(&demo.features[..end * d], None)?;
        let predicted: Vec<[f64; 5]> = curve.iter().map(|e| MODES.map(|m| e.get(m))).collect();
        let mut v = [0.0; 5];
        let mut mae = [0.0; 5];
        for m in 0..5 {
            let series: Vec<f64> = predicted.iter().map(|p| p[m]).collect();
            v[m] = voc(&series);
            mae[m] = series.iter().zip(&truth).map(|(a, b)| (a - b).abs()).sum::<f64>() / end as f64;
        }
        out.push(DemoEval { name: demo.name.clone(), frames: end, voc: v, mae, truth, predicted });
    }
    let n = out.len() as f64;
    let mean = |f: &dyn Fn(&DemoEval) -> [f64; 5]| {
        let mut acc = [0.0; 5];
        for e in &out {
            for (a, x) in acc.iter_mut().zip(f(e)) {
                *a += x / n;
            }
        }
        acc
    };
    let (mean_voc, mean_mae) = (mean(&|e| e.voc), mean(&|e| e.mae));
    Ok(EvalReport {
        modes: MODES.iter().map(|m| format!("{m:?}").to_lowercase()).collect(),
        mean_voc,
        mean_mae,
        demos: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::SubTask;

    #[test]
    fn ground_truth_interpolates_between_sample_frames() {
        // Keyframes (0,100),(100,400), k = 20: samples every 10 frames, then every 30.
        let demo = Demo {
            name: "x".into(),
            features: vec![0.0; 420],
            len: 420,
            keyframes: Some(vec![SubTask::new(0, 100), SubTask::new(100, 400)]),
        };
        let g = ground_truth(&demo, 20).unwrap();
        assert_eq!(g[100], 0.5);
        assert!((g[5] - 0.5 / 20.0).abs() < 1e-12);
        assert!((g[115] - 10.5 / 20.0).abs() < 1e-12);
        assert_eq!(g[400], 1.0);
        assert_eq!(g[419], 1.0);
    }
}
