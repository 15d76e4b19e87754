//! Summary statistics of a sample: count, mean, standard deviation, min, percentiles,
//! max.
//!
//! Percentiles interpolate linearly between the two closest order statistics (the
//! "type 7" rule of R and NumPy's default): `p` of `n` sorted values is the value at
//! rank `p * (n - 1)`. The standard deviation is the sample one (divides by `n - 1`;
//! 0 for one value).

use serde::Serialize;

/// Summary of a sample of durations (ns) or other non-negative values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of values.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation.
    pub sd: f64,
    /// Smallest value.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub max: f64,
    /// Fraction of the values that are exactly 0.
    pub zero_fraction: f64,
}

impl Summary {
    /// Summarises `sorted` (ascending).
    pub fn of_sorted(sorted: &[f64]) -> Summary {
        let n = sorted.len();
        if n == 0 {
            return Summary::default();
        }
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            sorted.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Summary {
            count: n as u64,
            mean,
            sd: var.sqrt(),
            min: sorted[0],
            p50: percentile(sorted, 0.5),
            p90: percentile(sorted, 0.9),
            p99: percentile(sorted, 0.99),
            max: sorted[n - 1],
            zero_fraction: sorted.iter().take_while(|&&x| x == 0.0).count() as f64 / n as f64,
        }
    }

    /// Coefficient of variation (sd / mean), 0 when the mean is 0.
    pub fn cv(&self) -> f64 {
        if self.mean > 0.0 {
            self.sd / self.mean
        } else {
            0.0
        }
    }
}

/// The `p` quantile (0..=1) of `sorted` (ascending, not empty), interpolated.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// `values` sorted ascending (NaNs are not expected; they sort last).
pub fn sorted(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let s = Summary::of_sorted(&sorted([0.0, 1.0, 2.0, 3.0, 4.0]));
        assert_eq!(s.count, 5);
        assert_eq!(s.mean, 2.0);
        assert!((s.sd - 2.5f64.sqrt()).abs() < 1e-12);
        assert_eq!((s.min, s.p50, s.max), (0.0, 2.0, 4.0));
        assert!((s.p90 - 3.6).abs() < 1e-12);
        assert!((s.p99 - 3.96).abs() < 1e-12);
        assert_eq!(s.zero_fraction, 0.2);
        assert_eq!(Summary::of_sorted(&[]).count, 0);
        assert_eq!(Summary::of_sorted(&[7.0]).sd, 0.0);
    }
}
