/*!
Statistics for rates of rare events: how often an overflow's interrupt is
dropped, with an exact binomial confidence interval.

Clopper & Pearson (1934), "The use of confidence or fiducial limits
illustrated in the case of the binomial", Biometrika 26(4): the interval is
given by quantiles of Beta distributions, exact (conservative) for any n,
which matters here because the counts are tiny (0 to a few hundred drops in
millions of overflows) where the normal approximation is useless.
*/

use serde::Serialize;
use statrs::function::beta::beta_reg;

/// A rate with its two-sided exact confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Rate {
    pub events: u64,
    pub trials: u64,
    /// events / trials x 1e6 (None without trials).
    pub per_million: Option<f64>,
    pub ci_low_per_million: Option<f64>,
    pub ci_high_per_million: Option<f64>,
    pub confidence: f64,
    pub method: &'static str,
}

/// The p-quantile of Beta(a, b): solves I_x(a, b) = p by bisection on
/// statrs's regularized incomplete beta. statrs's own `inverse_cdf` is off by
/// ~0.4% for shapes like Beta(1, 3e6), exactly the ones a clean run
/// produces; bisection on the CDF is exact to double precision.
fn beta_quantile(a: f64, b: f64, p: f64) -> f64 {
    // With a = 1 the CDF is 1 - (1 - x)^b: closed form, no iteration.
    if a == 1.0 {
        return -(f64::ln_1p(-p) / b).exp_m1();
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if beta_reg(a, b, mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// Two-sided Clopper-Pearson interval for `events` out of `trials`.
pub fn clopper_pearson(events: u64, trials: u64, confidence: f64) -> Option<(f64, f64)> {
    if trials == 0 || events > trials {
        return None;
    }
    let alpha = 1.0 - confidence;
    let (x, n) = (events as f64, trials as f64);
    let low = if events == 0 {
        0.0
    } else {
        beta_quantile(x, n - x + 1.0, alpha / 2.0)
    };
    let high = if events == trials {
        1.0
    } else {
        beta_quantile(x + 1.0, n - x, 1.0 - alpha / 2.0)
    };
    Some((low, high))
}

/// One-sided upper bound on the rate when `events` were seen: with zero
/// events it is 1 - alpha^(1/n), the "rule of three" for large n at 95%.
pub fn upper_bound(events: u64, trials: u64, confidence: f64) -> Option<f64> {
    if trials == 0 || events > trials {
        return None;
    }
    if events == trials {
        return Some(1.0);
    }
    let (x, n) = (events as f64, trials as f64);
    Some(beta_quantile(x + 1.0, n - x, confidence))
}

/// How many trials with zero events prove the rate is below `rate` at
/// `confidence` (one-sided): the smallest n with (1 - rate)^n <= 1 - confidence.
pub fn trials_to_bound(rate: f64, confidence: f64) -> Option<u64> {
    if !(rate > 0.0 && rate < 1.0 && confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let n = ((1.0 - confidence).ln() / (-rate).ln_1p()).ceil();
    // Beyond u64 no run can count that far: no plan (never a saturated one).
    (n < u64::MAX as f64).then_some(n as u64)
}

impl Rate {
    pub fn new(events: u64, trials: u64, confidence: f64) -> Rate {
        let ci = clopper_pearson(events, trials, confidence);
        Rate {
            events,
            trials,
            per_million: (trials > 0).then(|| events as f64 / trials as f64 * 1e6),
            ci_low_per_million: ci.map(|(l, _)| l * 1e6),
            ci_high_per_million: ci.map(|(_, h)| h * 1e6),
            confidence,
            method: "Clopper-Pearson exact, two-sided",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn zero_of_three_million_bounds_the_rate_near_one_per_million() {
        // 1 - 0.05^(1/3e6) = 9.9857e-7 (one-sided 95%).
        let ub = upper_bound(0, 3_000_000, 0.95).unwrap();
        assert!(close(ub, 9.9857e-7, 1e-3), "{ub}");
        // Two-sided 95% upper: 1 - 0.025^(1/n) = 1.2296e-6.
        let (lo, hi) = clopper_pearson(0, 3_000_000, 0.95).unwrap();
        assert_eq!(lo, 0.0);
        assert!(close(hi, 1.2296e-6, 1e-3), "{hi}");
    }

    #[test]
    fn ninety_nine_of_17418_matches_the_exact_interval() {
        // Reference computed independently, by bisection on exact binomial
        // tail sums (P(X >= 99) = 0.025 and P(X <= 99) = 0.025), as R's
        // binom.test does: [0.00462182, 0.00691551].
        let (lo, hi) = clopper_pearson(99, 17_418, 0.95).unwrap();
        assert!(close(lo, 0.004621822, 1e-6), "{lo}");
        assert!(close(hi, 0.006915512, 1e-6), "{hi}");
        let r = Rate::new(99, 17_418, 0.95);
        assert!(close(r.per_million.unwrap(), 5683.8, 1e-4));
    }

    #[test]
    fn edges() {
        assert_eq!(clopper_pearson(0, 0, 0.95), None);
        assert_eq!(clopper_pearson(5, 4, 0.95), None);
        let (lo, hi) = clopper_pearson(10, 10, 0.95).unwrap();
        assert_eq!(hi, 1.0);
        assert!(close(lo, 0.025f64.powf(0.1), 1e-6));
        assert_eq!(Rate::new(0, 0, 0.95).per_million, None);
    }

    #[test]
    fn trials_needed_for_a_bisect_bound() {
        // ln(0.01)/ln(1 - 1e-4) = 46049.4 -> 46050.
        assert_eq!(trials_to_bound(1e-4, 0.99), Some(46_050));
        assert_eq!(trials_to_bound(0.0, 0.99), None);
        assert_eq!(trials_to_bound(1e-4, 1.0), None);
        // ln(0.01)/ln(1 - 1e-300) is 4.6e300: more than any run counts.
        assert_eq!(trials_to_bound(1e-300, 0.99), None);
        let n = trials_to_bound(1e-6, 0.95).unwrap();
        assert!(upper_bound(0, n, 0.95).unwrap() <= 1e-6);
        assert!(upper_bound(0, n - 1, 0.95).unwrap() > 1e-6 * (1.0 - 1e-9));
    }
}
