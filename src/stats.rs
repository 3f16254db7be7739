/*!
Statistics for rates of rare events: how often an overflow's interrupt is
dropped, with an exact binomial confidence interval.

Clopper & Pearson (1934), "The use of confidence or fiducial limits
illustrated in the case of the binomial", Biometrika 26(4): the interval is
given by quantiles of Beta distributions, exact (conservative) for any n,
which matters here because the counts are tiny (0 to a few hundred drops in
millions of overflows) where the normal approximation is useless.

statrs (0.19) gives the special functions (`beta_reg`, `erfc`,
`ln_gamma`); its distributions are not used where they would change a
printed figure: `Beta::inverse_cdf` (`inv_beta_reg`) is another algorithm
than the bisection here, off by ~0.4% for Beta(1, 3e6), and
`Binomial::ln_pmf` is the plain sum of ln C(n, k) and the log terms,
from p alone, which `ln_pmf` below explains is inexact at large n.
*/

use serde::{Deserialize, Serialize};
use statrs::function::beta::beta_reg;
use statrs::function::erf::erfc;
use statrs::function::gamma::ln_gamma;

/// A rate with its two-sided exact confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub events: u64,
    pub trials: u64,
    /// events / trials x 1e6 (None without trials).
    pub per_million: Option<f64>,
    pub ci_low_per_million: Option<f64>,
    pub ci_high_per_million: Option<f64>,
    pub confidence: f64,
    pub method: RateMethod,
}

/// How a `Rate`'s interval was computed (the name run.json carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RateMethod {
    #[serde(rename = "Clopper-Pearson exact, two-sided")]
    ClopperPearson,
}

impl std::fmt::Display for RateMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RateMethod::ClopperPearson => "Clopper-Pearson exact, two-sided",
        })
    }
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

/// Drops in total up to which `rates_differ_p` sums the binomial exactly;
/// beyond, the normal approximation (its error there is below 1e-5).
pub const EXACT_TEST_UP_TO: u64 = 1 << 32;

/// ln P(X = k) for X ~ Binomial(n, p), given ln p and ln(1 - p), to
/// ~1e-14 whatever n: Loader (2000), "Fast and accurate computation of
/// binomial probabilities" (R's dbinom_raw). The plain sum of ln C(n, k),
/// k ln p and (n - k) ln q cancels terms of size n ln n: at n = 1e9 it is
/// off by 5e-6, and outcomes within ~50 of the mode then looked more
/// likely than the mode itself.
fn ln_pmf(n: u64, k: u64, ln_p: f64, ln_q: f64) -> f64 {
    if k == 0 {
        return n as f64 * ln_q;
    }
    if k == n {
        return n as f64 * ln_p;
    }
    let (nf, kf, rest) = (n as f64, k as f64, (n - k) as f64);
    let lc = stirlerr(nf)
        - stirlerr(kf)
        - stirlerr(rest)
        - bd0(kf, nf * ln_p.exp())
        - bd0(rest, nf * ln_q.exp());
    let lf = (2.0 * std::f64::consts::PI).ln() + kf.ln() + (-kf / nf).ln_1p();
    lc - 0.5 * lf
}

/// ln(n!) - (n + 1/2) ln n + n - ln sqrt(2 pi): Stirling's error (Loader's
/// series for n > 15; directly from ln Gamma below).
fn stirlerr(n: f64) -> f64 {
    const S0: f64 = 1.0 / 12.0;
    const S1: f64 = 1.0 / 360.0;
    const S2: f64 = 1.0 / 1260.0;
    const S3: f64 = 1.0 / 1680.0;
    const S4: f64 = 1.0 / 1188.0;
    if n <= 15.0 {
        return ln_gamma(n + 1.0) - (n + 0.5) * n.ln() + n
            - 0.5 * (2.0 * std::f64::consts::PI).ln();
    }
    let nn = n * n;
    if n > 500.0 {
        (S0 - S1 / nn) / n
    } else if n > 80.0 {
        (S0 - (S1 - S2 / nn) / nn) / n
    } else if n > 35.0 {
        (S0 - (S1 - (S2 - S3 / nn) / nn) / nn) / n
    } else {
        (S0 - (S1 - (S2 - (S3 - S4 / nn) / nn) / nn) / nn) / n
    }
}

/// x ln(x / m) + m - x, the deviance term, without cancellation when x is
/// near m (Loader's series).
fn bd0(x: f64, m: f64) -> f64 {
    if (x - m).abs() < 0.1 * (x + m) {
        let v = (x - m) / (x + m);
        let mut s = (x - m) * v;
        let mut ej = 2.0 * x * v;
        let v2 = v * v;
        for j in 1..1000 {
            ej *= v2;
            let next = s + ej / f64::from(2 * j + 1);
            if next == s {
                break;
            }
            s = next;
        }
        s
    } else {
        x * (x / m).ln() + m - x
    }
}

/// P(X <= k) (`down`) or P(X >= k) of X ~ Binomial(n, p), for k on the
/// far side of the mode, summed outwards from k by the ratio of
/// consecutive terms. The terms fall ever faster (the binomial is
/// log-concave), so the sum stops when what is left, at most term x r /
/// (1 - r) with r the current ratio, is below 1e-17 of it.
fn tail(n: u64, k: u64, down: bool, ln_p: f64, ln_q: f64) -> f64 {
    let odds = (ln_p - ln_q).exp(); // p / q
    let mut term = ln_pmf(n, k, ln_p, ln_q).exp();
    let mut sum = term;
    let mut k = k;
    while term > 0.0 {
        let r = if down {
            if k == 0 {
                break;
            }
            k as f64 / ((n - k + 1) as f64 * odds)
        } else {
            if k == n {
                break;
            }
            (n - k) as f64 / (k + 1) as f64 * odds
        };
        if r < 1.0 && term * r / (1.0 - r) <= sum * 1e-17 {
            break;
        }
        term *= r;
        sum += term;
        k = if down { k - 1 } else { k + 1 };
    }
    sum
}

/// Two-sided exact conditional test that two binomial rates are equal:
/// given x = xa + xb drops, xa ~ Binomial(x, na / (na + nb)) under the null
/// (Przyborowski & Wilenski 1940); the p-value sums the probabilities of
/// outcomes no more likely than the one seen (as R's binom.test does).
///
/// The binomial is unimodal, so those outcomes are the two tails: xa's own
/// side up to xa, and the other side from the first outcome no more likely
/// than xa's, found by bisection. Each tail is summed outwards from its
/// end until what is left is negligible, so the work is O(log x) to find
/// the ends plus O(sqrt x) terms at worst (p near 1), never O(x): about
/// 1 ms at `EXACT_TEST_UP_TO` (2^32) drops here; beyond that, the normal
/// approximation with continuity correction. None without overflows on a
/// side, or with more drops than overflows.
pub fn rates_differ_p(xa: u64, na: u64, xb: u64, nb: u64) -> Option<f64> {
    if na == 0 || nb == 0 || xa > na || xb > nb {
        return None;
    }
    let x = u128::from(xa) + u128::from(xb);
    if x == 0 {
        return Some(1.0);
    }
    // p = na / (na + nb) and q = 1 - p, each from its own count, so
    // neither rounds to 0 or 1 when the counts differ by 2^60.
    let total = na as f64 + nb as f64;
    let (ln_p, ln_q) = ((na as f64).ln() - total.ln(), (nb as f64).ln() - total.ln());
    let Ok(x) = u64::try_from(x) else {
        return Some(normal_p(xa as f64, x as f64, ln_p, ln_q));
    };
    if x > EXACT_TEST_UP_TO {
        return Some(normal_p(xa as f64, x as f64, ln_p, ln_q));
    }
    let p = ln_p.exp();
    let mode = (((x + 1) as f64 * p).floor() as u64).min(x);
    // Relative tolerance as in R, so ties are not lost to rounding.
    let limit = ln_pmf(x, xa, ln_p, ln_q) + 1e-7f64.ln_1p();
    let unlikely = |k: u64| ln_pmf(x, k, ln_p, ln_q) <= limit;
    let p_value = if xa <= mode {
        // Right side, falling from the mode: the first k past xa there.
        let (mut lo, mut hi) = (mode.max(xa + 1), x + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if unlikely(mid) {
                hi = mid
            } else {
                lo = mid + 1
            }
        }
        let right = if lo <= x {
            tail(x, lo, false, ln_p, ln_q)
        } else {
            0.0
        };
        tail(x, xa, true, ln_p, ln_q) + right
    } else {
        // Left side, rising to the mode: the last k there.
        let (mut lo, mut hi) = (0u64, mode + 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if unlikely(mid) {
                lo = mid + 1
            } else {
                hi = mid
            }
        }
        let left = if lo > 0 {
            tail(x, lo - 1, true, ln_p, ln_q)
        } else {
            0.0
        };
        left + tail(x, xa, false, ln_p, ln_q)
    };
    Some(p_value.min(1.0))
}

/// The two-sided p-value of xa out of x under the normal approximation
/// (continuity-corrected), for counts too large to sum.
fn normal_p(xa: f64, x: f64, ln_p: f64, ln_q: f64) -> f64 {
    let (p, q) = (ln_p.exp(), ln_q.exp());
    let mean = x * p;
    let sd = (x * p * q).sqrt();
    let below = 0.5 * erfc(-((xa + 0.5 - mean) / sd) / std::f64::consts::SQRT_2);
    let above = 0.5 * erfc(((xa - 0.5 - mean) / sd) / std::f64::consts::SQRT_2);
    (2.0 * below.min(above)).min(1.0)
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
            method: RateMethod::ClopperPearson,
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
    fn exact_test_matches_known_values() {
        // Equal exposure, 10 vs 0: p = 2 * 0.5^10 = 0.001953125.
        let p = rates_differ_p(10, 1000, 0, 1000).unwrap();
        assert!((p - 0.001953125).abs() < 1e-12, "{p}");
        // 5 vs 5 on equal exposure: no evidence at all.
        assert!((rates_differ_p(5, 1000, 5, 1000).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(rates_differ_p(0, 10, 0, 10), Some(1.0));
        assert_eq!(rates_differ_p(1, 0, 0, 10), None);
        assert_eq!(rates_differ_p(11, 10, 0, 10), None);
        // Unequal exposure, R: binom.test(3, 10, p = 1/3)$p.value = 1.
        assert!((rates_differ_p(3, 100, 7, 200).unwrap() - 1.0).abs() < 1e-9);
        // 72 of 14918 vs 3 of 17175 (the recorded arm64 runs without and
        // with pseudo-NMI, if the second had 3 drops): 1.624598129858642e-20,
        // summed in exact rational arithmetic (Python's fractions).
        let p = rates_differ_p(72, 14918, 3, 17175).unwrap();
        assert!(close(p, 1.624598129858642e-20, 1e-9), "{p:e}");
    }

    /// ln P(X = k) against values computed in exact rational arithmetic
    /// (Python's fractions, then a 50-digit logarithm).
    #[test]
    fn binomial_probabilities_are_exact_to_1e_13() {
        let half = 0.5f64.ln();
        let third = (1.0f64 / 3.0).ln();
        let two_thirds = (2.0f64 / 3.0).ln();
        let p = (14918.0f64 / 32093.0).ln();
        let q = (17175.0f64 / 32093.0).ln();
        for (n, k, lp, lq, want) in [
            (1000, 500, half, half, -3.6799189920941293),
            (1000, 3, third, two_thirds, -388.6160457851301),
            (100_000, 49_000, half, half, -25.983390093165433),
            (75, 72, p, q, -45.91229294112082),
        ] {
            let got = ln_pmf(n, k, lp, lq);
            assert!(
                (got - want).abs() <= 1e-13 * want.abs(),
                "{n} {k}: {got} {want}"
            );
        }
        // At a billion the mode's probability is Stirling's sqrt(2 / (pi
        // n)) x (1 - 1/(4n)) to 1e-13.
        let n = 1_000_000_000u64;
        let got = ln_pmf(n, n / 2, half, half).exp();
        let want = (2.0 / (std::f64::consts::PI * n as f64)).sqrt() * (1.0 - 0.25 / n as f64);
        assert!(close(got, want, 1e-12), "{got:e} {want:e}");
    }

    /// The sum over every outcome, as the test was written before: the
    /// reference for the tails.
    fn brute_force(xa: u64, na: u64, xb: u64, nb: u64) -> f64 {
        let x = xa + xb;
        let total = na as f64 + nb as f64;
        let (ln_p, ln_q) = ((na as f64).ln() - total.ln(), (nb as f64).ln() - total.ln());
        let limit = ln_pmf(x, xa, ln_p, ln_q) + 1e-7f64.ln_1p();
        (0..=x)
            .map(|k| ln_pmf(x, k, ln_p, ln_q))
            .filter(|&l| l <= limit)
            .map(f64::exp)
            .sum::<f64>()
            .min(1.0)
    }

    #[test]
    fn tails_equal_the_sum_over_every_outcome() {
        let mut rng = fastrand::Rng::with_seed(13);
        for _ in 0..2000 {
            let na = rng.u64(1..1_000_000);
            let nb = rng.u64(1..1_000_000);
            let xa = rng.u64(0..=na.min(1500));
            let xb = rng.u64(0..=nb.min(1500));
            let fast = rates_differ_p(xa, na, xb, nb).unwrap();
            let slow = brute_force(xa, na, xb, nb);
            assert!(
                (fast - slow).abs() <= 1e-12 + 1e-9 * slow,
                "{xa}/{na} vs {xb}/{nb}: {fast:e} != {slow:e}"
            );
        }
    }

    /// Counts of 1e9 and up took minutes (2^64 - 1 was killed after 2.5):
    /// now a few thousand terms, or the normal approximation past 2^32.
    #[test]
    fn huge_counts_are_answered() {
        let g = 1_000_000_000u64;
        // xa at the mode: every outcome is as unlikely or more, p = 1.
        let same = rates_differ_p(g, 2 * g, g, 2 * g).unwrap();
        assert!(same > 1.0 - 1e-9, "{same}");
        let apart = rates_differ_p(g, 2 * g, g - 1_000_000, 2 * g).unwrap();
        assert!(apart < 1e-12, "{apart:e}");
        let max = u64::MAX;
        assert!(rates_differ_p(max, max, max, max).unwrap() > 0.99);
        assert!(rates_differ_p(max / 2, max, max / 4, max).unwrap() < 1e-12);
        // Around the switch to the approximation the two agree.
        let n = EXACT_TEST_UP_TO;
        let exact = rates_differ_p(n / 2, n, n / 2 - 60_000, n).unwrap();
        let normal = normal_p(
            (n / 2) as f64,
            (n - 60_000) as f64,
            0.5f64.ln(),
            0.5f64.ln(),
        );
        assert!(close(exact, normal, 1e-3), "{exact:e} vs {normal:e}");
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
