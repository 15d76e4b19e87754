//! Fitting distributions to a sample of durations, and choosing the best.
//!
//! Families and estimators (values in seconds, the unit JMT uses):
//!
//! | family | parameters | estimator |
//! |---|---|---|
//! | exponential | `rate` (1/s) | maximum likelihood: `1 / mean` |
//! | lognormal | `mu`, `sigma` of `ln x` | maximum likelihood: mean and (population) standard deviation of `ln x` |
//! | gamma | `shape`, `scale` (s) | maximum likelihood: `ln k - digamma(k) = ln(mean) - mean(ln x)` solved by bisection, `scale = mean / k` |
//! | Erlang | `phases` (integer), `rate` per phase (1/s) | the gamma shape rounded (at least 1, at most [`MAX_ERLANG_PHASES`]), `rate = phases / mean` (the maximum-likelihood rate for that shape) |
//!
//! Every fit is judged by the Kolmogorov–Smirnov statistic `D = sup |F_n(x) - F(x)|`
//! against the sample's empirical distribution function, and its AIC
//! (`2k - 2 ln L`, `k` parameters) is reported beside. The best fit is the one with
//! the lowest `D`: it is the measure that says how far the model's distribution is
//! from the measured one in the same units for every family (a `D` computed with
//! estimated parameters is a distance, not a test's p-value). The special functions
//! (digamma, the gamma and lognormal CDFs) are `statrs`'s.
//!
//! Fits use the strictly positive values only: a part that is often exactly zero (no
//! blocking at all in most calls) is a mixture, reported as its
//! [`Fits::zero_fraction`] plus a fit of the positive values. Fewer than
//! [`MIN_SAMPLES`] positive values, or values that are all equal, get no fit.

use serde::Serialize;
use statrs::distribution::{Continuous, ContinuousCDF, Erlang, Exp, Gamma, LogNormal};
use statrs::function::gamma::digamma;

/// Fewest positive values a fit needs.
pub const MIN_SAMPLES: usize = 5;

/// Most phases of an Erlang fit: beyond this a nearly constant duration is better
/// described by the lognormal fit, and phase-type solvers stay small.
pub const MAX_ERLANG_PHASES: u64 = 1000;

/// `x -> (cdf(x), ln pdf(x))` of a fitted distribution.
type CdfAndLnPdf = Box<dyn Fn(f64) -> (f64, f64)>;

/// A distribution family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Exponential.
    Exponential,
    /// Erlang (gamma with an integer shape).
    Erlang,
    /// Gamma.
    Gamma,
    /// Lognormal.
    Lognormal,
}

impl Family {
    /// Every family, in output order.
    pub const ALL: [Family; 4] = [
        Family::Exponential,
        Family::Erlang,
        Family::Gamma,
        Family::Lognormal,
    ];

    /// The name in outputs.
    pub fn key(self) -> &'static str {
        match self {
            Family::Exponential => "exponential",
            Family::Erlang => "erlang",
            Family::Gamma => "gamma",
            Family::Lognormal => "lognormal",
        }
    }
}

/// A fitted distribution's parameters (seconds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Params {
    /// Exponential.
    Exponential {
        /// Rate (1/s).
        rate: f64,
    },
    /// Erlang.
    Erlang {
        /// Number of phases.
        phases: u64,
        /// Rate of each phase (1/s).
        rate: f64,
    },
    /// Gamma.
    Gamma {
        /// Shape.
        shape: f64,
        /// Scale (s).
        scale: f64,
    },
    /// Lognormal.
    Lognormal {
        /// Mean of `ln x` (x in s).
        mu: f64,
        /// Standard deviation of `ln x`.
        sigma: f64,
    },
}

impl Params {
    /// The family.
    pub fn family(&self) -> Family {
        match self {
            Params::Exponential { .. } => Family::Exponential,
            Params::Erlang { .. } => Family::Erlang,
            Params::Gamma { .. } => Family::Gamma,
            Params::Lognormal { .. } => Family::Lognormal,
        }
    }

    /// The distribution's mean (s).
    pub fn mean(&self) -> f64 {
        match *self {
            Params::Exponential { rate } => 1.0 / rate,
            Params::Erlang { phases, rate } => phases as f64 / rate,
            Params::Gamma { shape, scale } => shape * scale,
            Params::Lognormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
        }
    }

    /// The distribution function at `x` (s); `None` for invalid parameters.
    pub fn cdf(&self, x: f64) -> Option<f64> {
        self.functions().map(|f| f(x).0)
    }

    fn count(&self) -> f64 {
        match self {
            Params::Exponential { .. } => 1.0,
            _ => 2.0,
        }
    }

    /// CDF and log density at `x`, through statrs; `None` for invalid parameters.
    fn functions(&self) -> Option<CdfAndLnPdf> {
        fn boxed<D: ContinuousCDF<f64, f64> + Continuous<f64, f64> + 'static>(d: D) -> CdfAndLnPdf {
            Box::new(move |x| (d.cdf(x), d.ln_pdf(x)))
        }
        Some(match *self {
            Params::Exponential { rate } => boxed(Exp::new(rate).ok()?),
            Params::Erlang { phases, rate } => boxed(Erlang::new(phases, rate).ok()?),
            Params::Gamma { shape, scale } => boxed(Gamma::new(shape, 1.0 / scale).ok()?),
            Params::Lognormal { mu, sigma } => boxed(LogNormal::new(mu, sigma).ok()?),
        })
    }
}

/// One fitted distribution and how well it fits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Fit {
    /// The family.
    pub family: Family,
    /// Its parameters.
    pub params: Params,
    /// Kolmogorov–Smirnov distance to the sample.
    pub ks: f64,
    /// Akaike information criterion.
    pub aic: f64,
}

/// The fits of one sample.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Fits {
    /// Positive values fitted.
    pub samples: u64,
    /// Fraction of all values that were zero (not fitted).
    pub zero_fraction: f64,
    /// Every family that could be fitted, in [`Family::ALL`] order.
    pub candidates: Vec<Fit>,
}

impl Fits {
    /// The fit with the lowest KS distance among `families`.
    pub fn best_of(&self, families: &[Family]) -> Option<&Fit> {
        self.candidates
            .iter()
            .filter(|f| families.contains(&f.family))
            .min_by(|a, b| a.ks.total_cmp(&b.ks))
    }

    /// The fit with the lowest KS distance.
    pub fn best(&self) -> Option<&Fit> {
        self.best_of(&Family::ALL)
    }
}

/// Fits every family to `sorted` (ascending, in seconds, zeros allowed).
pub fn fit(sorted: &[f64]) -> Fits {
    let zeros = sorted.iter().take_while(|&&x| x <= 0.0).count();
    let pos = &sorted[zeros..];
    let mut fits = Fits {
        samples: pos.len() as u64,
        zero_fraction: if sorted.is_empty() {
            0.0
        } else {
            zeros as f64 / sorted.len() as f64
        },
        candidates: Vec::new(),
    };
    if pos.len() < MIN_SAMPLES || pos[0] == pos[pos.len() - 1] {
        return fits;
    }
    let n = pos.len() as f64;
    let mean = pos.iter().sum::<f64>() / n;
    let mean_ln = pos.iter().map(|x| x.ln()).sum::<f64>() / n;
    let sd_ln = (pos.iter().map(|x| (x.ln() - mean_ln).powi(2)).sum::<f64>() / n).sqrt();
    let shape = gamma_shape(mean.ln() - mean_ln);
    let mut params = vec![Params::Exponential { rate: 1.0 / mean }];
    if let Some(k) = shape {
        let phases = (k.round() as u64).clamp(1, MAX_ERLANG_PHASES);
        params.push(Params::Erlang {
            phases,
            rate: phases as f64 / mean,
        });
        params.push(Params::Gamma {
            shape: k,
            scale: mean / k,
        });
    }
    if sd_ln > 0.0 {
        params.push(Params::Lognormal {
            mu: mean_ln,
            sigma: sd_ln,
        });
    }
    for p in params {
        if let Some(f) = judge(pos, p) {
            fits.candidates.push(f);
        }
    }
    fits
}

/// KS distance and AIC of `params` against `pos` (ascending, positive).
fn judge(pos: &[f64], params: Params) -> Option<Fit> {
    let f = params.functions()?;
    let n = pos.len() as f64;
    let mut d: f64 = 0.0;
    let mut ln_l = 0.0;
    for (i, &x) in pos.iter().enumerate() {
        let (cdf, ln_pdf) = f(x);
        d = d.max((i + 1) as f64 / n - cdf).max(cdf - i as f64 / n);
        ln_l += ln_pdf;
    }
    if !d.is_finite() {
        return None;
    }
    Some(Fit {
        family: params.family(),
        params,
        ks: d,
        aic: 2.0 * params.count() - 2.0 * ln_l,
    })
}

/// The gamma shape `k` solving `ln k - digamma(k) = s` (`s > 0`), by bisection on
/// `ln k` (the left side falls from +inf to 0 as `k` grows).
fn gamma_shape(s: f64) -> Option<f64> {
    if !(s > 0.0 && s.is_finite()) {
        return None;
    }
    let g = |k: f64| k.ln() - digamma(k) - s;
    // Minka's closed-form start, then a bracket around it.
    let k0 = (3.0 - s + ((s - 3.0).powi(2) + 24.0 * s).sqrt()) / (12.0 * s);
    let (mut lo, mut hi) = (k0.ln() - 1.0, k0.ln() + 1.0);
    while g(lo.exp()) < 0.0 && lo > -50.0 {
        lo -= 2.0;
    }
    while g(hi.exp()) > 0.0 && hi < 50.0 {
        hi += 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if g(mid.exp()) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let k = ((lo + hi) / 2.0).exp();
    k.is_finite().then_some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic quantiles of a distribution: a sample with no noise.
    fn quantiles(inv: impl Fn(f64) -> f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| inv((i as f64 + 0.5) / n as f64)).collect()
    }

    #[test]
    fn exponential_sample_fits_exponential() {
        let xs = quantiles(|u| -(1.0 - u).ln() / 200.0, 2000);
        let fits = fit(&xs);
        let best = fits.best().unwrap();
        // Gamma with shape ~1 is the same distribution; either may win narrowly.
        assert!(matches!(
            best.family,
            Family::Exponential | Family::Gamma | Family::Erlang
        ));
        let exp = fits.best_of(&[Family::Exponential]).unwrap();
        let Params::Exponential { rate } = exp.params else {
            panic!()
        };
        assert!((rate - 200.0).abs() / 200.0 < 0.01, "{rate}");
        assert!(exp.ks < 0.01);
        let ln = fits.best_of(&[Family::Lognormal]).unwrap();
        assert!(ln.ks > 0.05, "an exponential is not lognormal: {}", ln.ks);
    }

    #[test]
    fn gamma_shape_is_recovered() {
        let d = Gamma::new(4.0, 2000.0).unwrap();
        let xs = quantiles(|u| d.inverse_cdf(u), 3000);
        let fits = fit(&xs);
        let g = fits.best_of(&[Family::Gamma]).unwrap();
        let Params::Gamma { shape, scale } = g.params else {
            panic!()
        };
        assert!((shape - 4.0).abs() < 0.05, "{shape}");
        assert!((shape * scale - 0.002).abs() < 1e-5);
        let e = fits.best_of(&[Family::Erlang]).unwrap();
        assert_eq!(
            e.params,
            Params::Erlang {
                phases: 4,
                rate: 4.0 / (shape * scale)
            }
        );
        assert!(matches!(
            fits.best().unwrap().family,
            Family::Gamma | Family::Erlang
        ));
    }

    #[test]
    fn lognormal_sample_fits_lognormal() {
        let d = LogNormal::new(-6.0, 0.5).unwrap();
        let xs = quantiles(|u| d.inverse_cdf(u), 2000);
        let fits = fit(&xs);
        assert_eq!(fits.best().unwrap().family, Family::Lognormal);
        let Params::Lognormal { mu, sigma } = fits.best().unwrap().params else {
            panic!()
        };
        assert!((mu + 6.0).abs() < 0.01 && (sigma - 0.5).abs() < 0.01);
        // AIC agrees with KS here.
        let aic_best = fits
            .candidates
            .iter()
            .min_by(|a, b| a.aic.total_cmp(&b.aic))
            .unwrap();
        assert_eq!(aic_best.family, Family::Lognormal);
    }

    #[test]
    fn zeros_are_a_mass_apart_and_small_samples_get_no_fit() {
        let mut xs = vec![0.0; 50];
        xs.extend(quantiles(|u| -(1.0 - u).ln() / 100.0, 50));
        let fits = fit(&xs);
        assert_eq!(fits.samples, 50);
        assert_eq!(fits.zero_fraction, 0.5);
        assert!(!fits.candidates.is_empty());
        assert!(fit(&[1.0, 2.0]).candidates.is_empty());
        assert!(fit(&[3.0; 10]).candidates.is_empty());
    }

    #[test]
    fn nearly_constant_durations_cap_the_erlang() {
        let xs: Vec<f64> = (0..100).map(|i| 0.002 + i as f64 * 1e-9).collect();
        let fits = fit(&xs);
        let e = fits.best_of(&[Family::Erlang]).unwrap();
        assert!(matches!(
            e.params,
            Params::Erlang {
                phases: MAX_ERLANG_PHASES,
                ..
            }
        ));
        assert_eq!(
            fits.best_of(&[Family::Erlang, Family::Lognormal])
                .unwrap()
                .family,
            Family::Lognormal
        );
    }
}
