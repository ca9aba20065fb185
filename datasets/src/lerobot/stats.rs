//! Per-feature statistics in LeRobot's `stats.json` shape: `min`, `max`, `mean`, `std`
//! (population, as `np.std`), `count`, and the quantiles `q01 q10 q50 q90 q99`.
//!
//! LeRobot estimates quantiles from 5,000-bin histograms; o2o has every value in memory and
//! computes them exactly (linear interpolation between order statistics, numpy's default), so
//! the two agree to the histogram's bin width.

use serde_json::{json, Map, Value};

/// The quantiles LeRobot stores, with their keys.
pub const QUANTILES: [(&str, f64); 5] = [("q01", 0.01), ("q10", 0.10), ("q50", 0.50), ("q90", 0.90), ("q99", 0.99)];

/// Statistics of one feature, one entry per dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureStats {
    /// Minimum per dimension.
    pub min: Vec<f64>,
    /// Maximum per dimension.
    pub max: Vec<f64>,
    /// Mean per dimension.
    pub mean: Vec<f64>,
    /// Population standard deviation per dimension.
    pub std: Vec<f64>,
    /// The [`QUANTILES`], each per dimension.
    pub quantiles: Vec<Vec<f64>>,
    /// Frames counted.
    pub count: usize,
}

/// Statistics of `values`, `width` per row (row-major). Zero rows give zeros.
pub fn feature_stats(values: &[f64], width: usize) -> FeatureStats {
    let n = if width == 0 { 0 } else { values.len() / width };
    let mut s = FeatureStats {
        min: vec![0.0; width],
        max: vec![0.0; width],
        mean: vec![0.0; width],
        std: vec![0.0; width],
        quantiles: vec![vec![0.0; width]; QUANTILES.len()],
        count: n,
    };
    if n == 0 {
        return s;
    }
    let mut column = Vec::with_capacity(n);
    for j in 0..width {
        column.clear();
        column.extend((0..n).map(|i| values[i * width + j]));
        let mean = column.iter().sum::<f64>() / n as f64;
        let var = column.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        column.sort_by(f64::total_cmp);
        s.min[j] = column[0];
        s.max[j] = column[n - 1];
        s.mean[j] = mean;
        s.std[j] = var.sqrt();
        for (k, (_, q)) in QUANTILES.iter().enumerate() {
            let pos = q * (n - 1) as f64;
            let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
            s.quantiles[k][j] = column[lo] + (column[hi] - column[lo]) * (pos - lo as f64);
        }
    }
    s
}

impl FeatureStats {
    /// `(stat name, values)` in LeRobot's order, `count` last as a one-element list.
    pub fn entries(&self) -> Vec<(&'static str, Vec<f64>)> {
        let mut v = vec![
            ("min", self.min.clone()),
            ("max", self.max.clone()),
            ("mean", self.mean.clone()),
            ("std", self.std.clone()),
        ];
        for (k, (name, _)) in QUANTILES.iter().enumerate() {
            v.push((name, self.quantiles[k].clone()));
        }
        v
    }

    /// The `stats.json` object of this feature.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (name, values) in self.entries() {
            m.insert(name.into(), json!(values));
        }
        m.insert("count".into(), json!([self.count]));
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_on_a_small_column() {
        // np.quantile([1, 2, 3, 4, 10], [.01, .1, .5, .9, .99]) = 1.04, 1.4, 3, 7.6, 9.76
        // np.std([1, 2, 3, 4, 10]) = 3.1622776601683795
        let s = feature_stats(&[1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0, 10.0, -10.0], 2);
        assert_eq!(s.count, 5);
        assert_eq!((s.min[0], s.max[0], s.mean[0]), (1.0, 10.0, 4.0));
        assert!((s.std[0] - 3.1622776601683795).abs() < 1e-12);
        let q: Vec<f64> = s.quantiles.iter().map(|q| q[0]).collect();
        for (a, b) in q.iter().zip([1.04, 1.4, 3.0, 7.6, 9.76]) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
        assert_eq!((s.min[1], s.max[1], s.mean[1]), (-10.0, -1.0, -4.0));
        assert_eq!(s.to_json()["count"], json!([5]));
    }
}
