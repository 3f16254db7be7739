/*!
Stress: how hard a run pressed on the window where overflows are lost.

An overflow is lost when it is pending while the kernel stops its event (a
context switch out, a migration) with the PMU interrupt masked; so the unit
of stress is a stop of a running counting thread, witnessed by the kernel's
own records, not a move request: moving a thread that is waiting on a
runqueue stops nothing. Per worker:

- the stops the switch witness recorded;
- the migrator's moves, and how many of them stopped the worker (a stop
  witnessed between the request and its return: the kernel stops a running
  thread inside sched_setaffinity);
- where in the period each stop fell: its count past the last due point,
  in twentieths of the period. A driver that loses overflows due within w
  events before a stop loses one at every stop in the first w events past
  a due point, so stops bunched away from the due points would be stress
  that cannot find the bug.

`Sensitivity` turns that into what a clean verdict may claim.
*/

use serde::{Deserialize, Serialize};

use crate::stats::Rate;

/// Bins of the stop-position histogram over one period.
pub const POSITION_BINS: usize = 20;

/// ln(100): a window that holds this many stops on average is hit by at
/// least one with 99% probability (Poisson).
const LN_100: f64 = 4.605_170_185_988_092;

/// One worker's (or a run's) stress, from its stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StressTotals {
    /// Stops of the counting event the switch witness recorded.
    pub stops: u64,
    /// Moves the migrator made (requests the kernel carried out).
    pub moves: u64,
    /// Of those, moves that stopped the worker: a stop was witnessed
    /// between the request and its return.
    pub moves_that_stopped: u64,
    /// Moves recorded without the time of their request (runs recorded
    /// before it was kept): not told either way.
    pub moves_untimed: u64,
    /// Stops by their count past the last due point, in twentieths of the
    /// period: bin 0 holds the stops in the first twentieth. Only stops
    /// whose count and last due point are both known.
    pub stop_positions: [u64; POSITION_BINS],
}

impl StressTotals {
    pub fn add(&mut self, o: &StressTotals) {
        self.stops += o.stops;
        self.moves += o.moves;
        self.moves_that_stopped += o.moves_that_stopped;
        self.moves_untimed += o.moves_untimed;
        for (a, b) in self.stop_positions.iter_mut().zip(o.stop_positions) {
            *a += b;
        }
    }

    /// Stops whose position in the period is known.
    pub fn positioned(&self) -> u64 {
        self.stop_positions.iter().sum()
    }

    /// Records a stop at `count` with the next overflow due at `due`.
    pub fn stop(&mut self, count: Option<u64>, due: Option<u64>, period: u64) {
        self.stops += 1;
        if let (Some(count), Some(due)) = (count, due)
            && period > 0
        {
            let past = (i128::from(count) - i128::from(due)).rem_euclid(i128::from(period));
            let bin = past * POSITION_BINS as i128 / i128::from(period);
            self.stop_positions[bin as usize] += 1;
        }
    }
}

/// What a run's stops let a clean verdict claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sensitivity {
    /// The witnessed stops it rests on.
    pub stops: u64,
    /// The smallest interrupts-masked window, in events before a stop,
    /// that would have lost at least one overflow with 99% probability if
    /// the driver lost every overflow due inside it: P x ln(100) / S for
    /// stops spread evenly over the period, divided by the measured
    /// density of stops in the first twentieth past a due point where
    /// that is below even (never credited above it).
    pub window_events: Option<f64>,
    /// The same as a fraction of the period.
    pub window_fraction: Option<f64>,
    /// Stops in the first twentieth of the period past a due point,
    /// against an even spread (1: even; None: no stop had a known
    /// position, and the even spread is assumed).
    pub near_due_density: Option<f64>,
    /// Dropped interrupts per stop, with its exact interval.
    pub per_stop: Rate,
}

impl Sensitivity {
    pub fn new(stress: &StressTotals, dropped: u64, period: u64, confidence: f64) -> Sensitivity {
        let s = stress.stops;
        let positioned = stress.positioned();
        let density = (positioned > 0)
            .then(|| stress.stop_positions[0] as f64 * POSITION_BINS as f64 / positioned as f64);
        let credit = density.unwrap_or(1.0).min(1.0);
        let fraction = (s > 0 && credit > 0.0).then(|| LN_100 / (s as f64 * credit));
        Sensitivity {
            stops: s,
            window_events: fraction.map(|f| f * period as f64),
            window_fraction: fraction,
            near_due_density: density,
            per_stop: Rate::new(dropped, s, confidence),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_binned_by_its_count_past_the_last_due_point() {
        let mut s = StressTotals::default();
        // Due at 200,000 (period 100,000): 100,000 was the last due point.
        s.stop(Some(100_000), Some(200_000), 100_000);
        s.stop(Some(104_999), Some(200_000), 100_000);
        s.stop(Some(105_000), Some(200_000), 100_000);
        s.stop(Some(199_999), Some(200_000), 100_000);
        // Past the due point (pending at the stop): 200,010 is 10 past it.
        s.stop(Some(200_010), Some(200_000), 100_000);
        // Unknown count or due point: a stop, not positioned.
        s.stop(None, Some(200_000), 100_000);
        s.stop(Some(1), None, 100_000);
        assert_eq!(s.stops, 7);
        assert_eq!(s.positioned(), 5);
        assert_eq!(s.stop_positions[0], 3);
        assert_eq!(s.stop_positions[1], 1);
        assert_eq!(s.stop_positions[19], 1);
    }

    #[test]
    fn sensitivity_follows_p_ln100_over_s_for_an_even_spread() {
        let mut s = StressTotals {
            stops: 4_000,
            ..StressTotals::default()
        };
        s.stop_positions = [200; POSITION_BINS];
        let x = Sensitivity::new(&s, 0, 100_000, 0.95);
        let w = x.window_events.unwrap();
        assert!((w - 100_000.0 * LN_100 / 4_000.0).abs() < 1e-6, "{w}");
        assert_eq!(x.near_due_density, Some(1.0));
        // Zero drops in 4,000 stops: the exact two-sided 95% interval's
        // upper end, 1 - 0.025^(1/4000).
        let hi = x.per_stop.ci_high_per_million.unwrap() / 1e6;
        assert!(
            (hi - (1.0 - 0.025f64.powf(1.0 / 4_000.0))).abs() < 1e-9,
            "{hi}"
        );
    }

    #[test]
    fn stops_away_from_the_due_points_buy_less_sensitivity() {
        let mut s = StressTotals {
            stops: 2_000,
            ..StressTotals::default()
        };
        // A quarter of an even share right after the due points.
        s.stop_positions = [105; POSITION_BINS];
        s.stop_positions[0] = 5 + 20;
        let even = 100_000.0 * LN_100 / 2_000.0;
        let x = Sensitivity::new(&s, 0, 100_000, 0.95);
        let density = x.near_due_density.unwrap();
        assert!(density < 0.25, "{density}");
        assert!((x.window_events.unwrap() - even / density).abs() < 1e-6);
        // Bunched near the due points is not credited above even.
        s.stop_positions = [0; POSITION_BINS];
        s.stop_positions[0] = 2_000;
        let x = Sensitivity::new(&s, 0, 100_000, 0.95);
        assert!((x.window_events.unwrap() - even).abs() < 1e-6);
    }

    #[test]
    fn no_stop_no_window() {
        let x = Sensitivity::new(&StressTotals::default(), 0, 100_000, 0.95);
        assert_eq!(x.window_events, None);
        assert_eq!(x.per_stop.trials, 0);
        // Stops but none near a due point: no window is shown to be hit.
        let mut s = StressTotals {
            stops: 100,
            ..StressTotals::default()
        };
        s.stop_positions[5] = 100;
        assert_eq!(Sensitivity::new(&s, 0, 100_000, 0.95).window_events, None);
    }
}
