//! Small hand-written streams through `InterruptJudge`, each totals asserted
//! whole: every field not named must stay 0.

use super::{InterruptEvent, InterruptEventKind, InterruptJudge, InterruptTotals};
use crate::domain::{DriverRules, RearmMode};
use crate::judge::JudgeConfig;

const P: u64 = 1_000;
/// How far past its due point an interrupt may be and be on time.
const SKID: u64 = 10;

/// Free mode, user-mode counting, every stop witnessed with its count, the
/// PMU interrupt an NMI (it may still be taken before a stop clears it).
fn cfg() -> JudgeConfig {
    JudgeConfig::new(P, P / 10, SKID, RearmMode::Free)
}

fn events(j: &mut InterruptJudge) -> Vec<InterruptEvent> {
    let mut out = Vec::new();
    j.take_events(&mut out);
    out
}

#[test]
fn an_interrupt_within_the_skid_is_on_time() {
    let mut j = InterruptJudge::new(cfg());
    // The first overflow is due a period in.
    j.sample(1, 0, 1_005, false);
    assert_eq!(j.due_point(), Some(2_000));
    j.final_stop(2, Some(1_500));
    let want = InterruptTotals {
        samples: 1,
        on_time: 1,
        overflows: 1,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
    assert_eq!((j.latency().len(), j.latency().max()), (1, 5));
    assert_eq!(events(&mut j), []);
}

#[test]
fn an_interrupt_past_the_skid_is_late_and_keeps_the_grid() {
    let mut j = InterruptJudge::new(cfg());
    j.sample(1, 0, 1_500, false);
    // Rule 2: the next a period after the due point, not the interrupt.
    assert_eq!(j.due_point(), Some(2_000));
    j.sample(2, 0, 2_003, false);
    j.final_stop(3, Some(2_100));
    let want = InterruptTotals {
        samples: 2,
        on_time: 1,
        late: 1,
        overflows: 2,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
    assert_eq!((j.latency().min(), j.latency().max()), (3, 500));
}

#[test]
fn an_interrupt_a_period_late_is_a_re_base_in_the_handler() {
    let mut j = InterruptJudge::new(cfg());
    // Due at 1,000, taken at 2,300: left = -1,300 <= -period, rule 1.
    j.sample(1, 0, 2_300, false);
    assert_eq!(j.due_point(), Some(3_300));
    j.sample(2, 0, 3_305, false);
    j.final_stop(3, Some(3_400));
    let want = InterruptTotals {
        samples: 2,
        on_time: 1,
        rebased_in_handler: 1,
        overflows: 2,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
    let e = events(&mut j);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        (e[0].kind, e[0].count, e[0].lateness),
        (InterruptEventKind::RebasedInHandler, 2_300, Some(1_300))
    );
}

#[test]
fn a_loss_at_a_witnessed_stop_keeps_the_grid_by_rule_2() {
    let mut j = InterruptJudge::new(cfg());
    j.sample(1, 0, 1_005, false);
    // Stopped at 2,100 with the overflow due at 2,000 pending; the next
    // interrupt is past the stop, so the stop cleared it. The restart
    // finds left = -100: rule 2, the next due at 3,000.
    j.stop(2, 0, Some(2_100));
    j.sample(3, 1, 3_010, false);
    assert_eq!(j.due_point(), Some(4_000));
    j.final_stop(4, Some(3_100));
    let want = InterruptTotals {
        samples: 2,
        on_time: 2,
        dropped: 1,
        stops: 1,
        overflows: 3,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
    let e = events(&mut j);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        (e[0].kind, e[0].count, e[0].prev_count),
        (InterruptEventKind::Dropped, 3_010, Some(1_005))
    );
}

#[test]
fn a_loss_a_period_past_its_due_point_re_bases_at_the_restart() {
    let mut j = InterruptJudge::new(cfg());
    j.sample(1, 0, 1_005, false);
    // Stopped at 3,100, due 2,000: left = -1,100 <= -period, rule 1 at the
    // restart, the next due a period after the stop.
    j.stop(2, 0, Some(3_100));
    j.sample(3, 1, 4_105, false);
    assert_eq!(j.due_point(), Some(5_100));
    j.final_stop(4, Some(4_200));
    let want = InterruptTotals {
        samples: 2,
        on_time: 2,
        dropped: 1,
        rebased_at_restart: 1,
        stops: 1,
        overflows: 3,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
}

#[test]
fn a_loss_at_the_final_stop() {
    let mut j = InterruptJudge::new(cfg());
    j.sample(1, 0, 1_005, false);
    j.final_stop(2, Some(2_500));
    let want = InterruptTotals {
        samples: 1,
        on_time: 1,
        dropped: 1,
        dropped_at_final_stop: 1,
        overflows: 2,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
}

/// Stopped at 2,050 with the overflow due at 2,000 pending, and the next
/// interrupt at 2,050: the stop's count, counting user mode only. The final
/// stop is there too, so no due point can be pending at it.
fn pending_then_taken(irq_masked_at_stops: bool) -> InterruptJudge {
    let mut c = cfg();
    c.irq_masked_at_stops = irq_masked_at_stops;
    let mut j = InterruptJudge::new(c);
    j.sample(1, 0, 1_005, false);
    j.stop(2, 0, Some(2_050));
    j.sample(3, 0, 2_050, false);
    j.final_stop(4, Some(2_050));
    j
}

#[test]
fn an_overflow_pending_at_a_stop_taken_by_an_nmi_is_no_loss() {
    // An NMI took it before the stop cleared it: 50 late, the grid kept.
    let j = pending_then_taken(false);
    let want = InterruptTotals {
        samples: 2,
        on_time: 1,
        late: 1,
        stops: 1,
        overflows: 2,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
}

#[test]
fn an_ordinary_irq_cannot_take_an_overflow_pending_at_a_stop() {
    // Masked from the witness's read to the stop, so the stop cleared it
    // and the next is due at 3,000: nothing explains an interrupt at
    // 2,050, and the grid is anchored on it.
    let j = pending_then_taken(true);
    let want = InterruptTotals {
        samples: 2,
        on_time: 1,
        unexplained: 1,
        stops: 1,
        overflows: 2,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
}

/// No witness records stops: interrupts at 1,000, `anchor` and `after`
/// (period 1,000). Between 1,000 and `anchor` a stop may have lost the
/// overflow due at 2,000, its restart re-basing or later stops losing more:
/// the grid moved by an unknown amount, from 4,000 at the lowest (a loss at
/// 2,000, a re-base, the next at least two periods on). `after` less than a
/// period past `anchor` refutes every explanation that kept the grid.
fn unwitnessed(anchor: u64, after: u64) -> InterruptTotals {
    let mut c = cfg();
    c.stops_unseen = true;
    let mut j = InterruptJudge::new(c);
    j.sample(1, 0, 1_000, false);
    j.sample(2, 0, anchor, false);
    j.sample(3, 0, after, false);
    j.final_stop(4, Some(after + 100));
    j.totals().clone()
}

#[test]
fn an_interrupt_anchoring_an_unknown_grid_a_period_past_its_lowest_due_point_may_be_a_re_base() {
    // 5,000 is a period past 4,000: it may be the driver's re-base in the
    // handler, booked on time and counted in `late_maybe_rebased`. The
    // move proves one loss; the due points at 3,000 and 4,000 (up to the
    // anchor's, at most a period back) may have been lost too.
    let want = InterruptTotals {
        samples: 3,
        on_time: 3,
        late_maybe_rebased: 1,
        dropped: 1,
        ambiguous: 2,
        overflows: 6,
        ..InterruptTotals::default()
    };
    assert_eq!(unwitnessed(5_000, 5_500), want);
}

#[test]
fn an_interrupt_anchoring_an_unknown_grid_less_than_a_period_past_is_no_re_base() {
    // 4,999 is less than a period past 4,000: never rule 1.
    let want = InterruptTotals {
        samples: 3,
        on_time: 3,
        dropped: 1,
        ambiguous: 1,
        overflows: 5,
        ..InterruptTotals::default()
    };
    assert_eq!(unwitnessed(4_999, 5_499), want);
}

/// `--switch-witness times` without pseudo-NMI: an interrupt at 1,005
/// (1,000 ns), a time-only stop at `stop_ns`, the thread back on its CPU at
/// 9,000 ns (its switch-in recorded if `start`), then an interrupt at 3,000
/// (`sample_ns`). The overflow due at 2,000 was lost at the stop (the next
/// on the grid, on time) or not pending there (this one is it, a period
/// late: a re-base). `rate`: the count-rate bound, events per second (0:
/// none).
fn time_only_stop(stop_ns: u64, start: bool, sample_ns: u64, rate: u64) -> InterruptTotals {
    let mut c = cfg();
    c.irq_masked_at_stops = true;
    c.max_count_rate = rate;
    let mut j = InterruptJudge::new(c);
    j.sample(1_000, 0, 1_005, false);
    j.stop(stop_ns, 0, None);
    if start {
        j.start(9_000);
    }
    j.sample(sample_ns, 1, 3_000, false);
    j.final_stop(sample_ns + 50, Some(3_040));
    j.totals().clone()
}

#[test]
fn a_time_only_stop_leaves_a_loss_and_a_re_base_open_without_a_rate_bound() {
    // Booked as the explanation without the loss (a period late, maybe a
    // re-base), the loss ambiguous.
    let want = InterruptTotals {
        samples: 2,
        on_time: 1,
        late: 1,
        ambiguous: 1,
        late_maybe_rebased: 1,
        stops: 1,
        stops_without_count: 1,
        overflows: 3,
        ..InterruptTotals::default()
    };
    assert_eq!(time_only_stop(2_101, true, 9_897, 0), want);
    assert_eq!(time_only_stop(1_301, true, 10_700, 0), want);
}

#[test]
fn a_count_rate_bound_decides_a_loss_at_a_time_only_stop() {
    // At 1 event per ns (ticks of 1 ns: the times' gcd), the stop at
    // 2,101 ns was at 1,005 + 1,101 + 1 at the most and, 897 ns of
    // counting before the interrupt at 3,000, at 3,000 - 897 - 2 = 2,101
    // at the least (2 ticks): past 2,000, so the overflow was pending
    // there and lost.
    let want = InterruptTotals {
        samples: 2,
        on_time: 2,
        dropped: 1,
        stops: 1,
        stops_without_count: 1,
        overflows: 3,
        ..InterruptTotals::default()
    };
    assert_eq!(time_only_stop(2_101, true, 9_897, 1_000_000_000), want);
    // Without the switch-in the time off the CPU counts too: the lower
    // bound is far below 2,000 and both stay open.
    let open = time_only_stop(2_101, false, 9_897, 1_000_000_000);
    assert_eq!((open.dropped, open.ambiguous), (0, 1), "{open:?}");
}

#[test]
fn a_count_rate_bound_rules_out_a_loss_at_a_time_only_stop_before_the_due_point() {
    // The stop at 1,301 ns was at 1,005 + 301 + 1 at the most: before the
    // due point at 2,000, so nothing was pending there; 3,000 is the
    // interrupt due at 2,000, a period late (rule 1: a re-base).
    let want = InterruptTotals {
        samples: 2,
        on_time: 1,
        rebased_in_handler: 1,
        stops: 1,
        stops_without_count: 1,
        overflows: 2,
        ..InterruptTotals::default()
    };
    // (9,000 to 10,700 ns on the CPU: the lower bound says nothing here.)
    assert_eq!(time_only_stop(1_301, true, 10_700, 1_000_000_000), want);
}

#[test]
fn a_count_faster_than_the_rate_bound_is_counted_not_believed() {
    // 1,990 events in 1,001 ns (ticks of 7 ns so far), at most 1 per ns:
    // the bound is wrong for this event.
    let mut c = cfg();
    c.max_count_rate = 1_000_000_000;
    let mut j = InterruptJudge::new(c);
    j.sample(1_000, 0, 1_005, false);
    j.sample(1_007, 0, 1_010, false);
    assert_eq!(j.totals().count_rate_exceeded, 0);
    j.sample(2_008, 0, 3_000, false);
    assert_eq!(j.totals().count_rate_exceeded, 1);
    // Within it: none more.
    j.sample(4_000, 0, 3_990, false);
    assert_eq!(j.totals().count_rate_exceeded, 1);
}

/// Without an NMI (the PMU interrupt masked where the event stops), under
/// `rules`.
fn masked(rules: DriverRules) -> JudgeConfig {
    JudgeConfig {
        irq_masked_at_stops: true,
        driver_rules: rules,
        ..cfg()
    }
}

/// The fixed kernel's signature (qemu/patches/fix.patch, seen on its
/// oracle): stopped right at the due point, restarted, the overflow forced
/// at the next event, stopped again before its interrupt, and the interrupt
/// right after the second restart.
fn overdue_then_delivered(j: &mut InterruptJudge) {
    j.sample(1, 0, 1_005, false);
    j.stop(2, 0, Some(2_000));
    j.stop(3, 1, Some(2_001));
    j.sample(4, 0, 2_002, false);
    j.sample(5, 0, 3_005, false);
    j.final_stop(6, Some(3_100));
}

#[test]
fn an_overflow_delivered_after_the_restart_refutes_the_stock_driver() {
    let mut j = InterruptJudge::new(masked(DriverRules::Auto));
    overdue_then_delivered(&mut j);
    // Due at 2,000, taken at 2,002: on time, the grid kept.
    let want = InterruptTotals {
        samples: 3,
        on_time: 3,
        stops: 2,
        stock_rules_refuted: 1,
        overflows: 3,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
    assert_eq!(events(&mut j), []);
    // The stock driver lost it at the first stop and armed the next at
    // 3,000: the interrupt at 2,002 fits none of its explanations.
    let mut stock = InterruptJudge::new(masked(DriverRules::Stock));
    overdue_then_delivered(&mut stock);
    assert_eq!(stock.totals().unexplained, 1, "{:?}", stock.totals());
}

/// Stopped at 2,100 with the overflow due at 2,000 pending, then the
/// interrupts at 3,010 and `next`.
fn lost_at_a_stop(j: &mut InterruptJudge, next: u64) {
    j.sample(1, 0, 1_005, false);
    j.stop(2, 0, Some(2_100));
    j.sample(3, 1, 3_010, false);
    j.sample(4, 1, next, false);
    j.final_stop(5, Some(next + 100));
}

#[test]
fn a_loss_whose_next_interrupts_vary_in_skid_refutes_the_delivering_driver() {
    // A delivering driver took the overflow due at 2,000 at 3,010, a
    // period late, and re-based: the next due at 4,010, so an interrupt at
    // 4,003 is impossible; the stock driver armed 4,000 after the loss.
    let mut j = InterruptJudge::new(masked(DriverRules::Auto));
    lost_at_a_stop(&mut j, 4_003);
    let want = InterruptTotals {
        samples: 3,
        on_time: 3,
        dropped: 1,
        stops: 1,
        delivering_rules_refuted: 1,
        overflows: 4,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
    let e = events(&mut j);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        (e[0].kind, e[0].count, e[0].prev_count),
        (InterruptEventKind::Dropped, 3_010, Some(1_005))
    );
}

#[test]
fn where_no_record_tells_the_drivers_apart_the_rules_chosen_decide() {
    // The next interrupt at 4,010 fits both: on the stock driver's grid
    // (due 4,000) and on the re-based one of a delivering driver (4,010).
    let totals = |rules| {
        let mut j = InterruptJudge::new(masked(rules));
        lost_at_a_stop(&mut j, 4_010);
        j.totals().clone()
    };
    let stock = InterruptTotals {
        samples: 3,
        on_time: 3,
        dropped: 1,
        stops: 1,
        overflows: 4,
        ..InterruptTotals::default()
    };
    assert_eq!(totals(DriverRules::Stock), stock);
    // Auto takes the stock driver's rules and says which drop rests on them.
    let auto = InterruptTotals {
        dropped_assuming_stock: 1,
        ..stock.clone()
    };
    assert_eq!(totals(DriverRules::Auto), auto);
    let either = InterruptTotals {
        samples: 3,
        on_time: 2,
        late: 1,
        late_maybe_rebased: 1,
        ambiguous: 1,
        stops: 1,
        overflows: 4,
        ..InterruptTotals::default()
    };
    assert_eq!(totals(DriverRules::Either), either);
    let delivering = InterruptTotals {
        samples: 3,
        on_time: 2,
        rebased_in_handler: 1,
        stops: 1,
        overflows: 3,
        ..InterruptTotals::default()
    };
    assert_eq!(totals(DriverRules::Delivering), delivering);
}

#[test]
fn a_delivering_driver_still_loses_an_overflow_overdue_at_the_final_stop() {
    let mut j = InterruptJudge::new(masked(DriverRules::Delivering));
    j.sample(1, 0, 1_005, false);
    j.stop(2, 0, Some(2_100));
    j.final_stop(3, Some(2_200));
    let want = InterruptTotals {
        samples: 1,
        on_time: 1,
        dropped: 1,
        dropped_at_final_stop: 1,
        stops: 1,
        overflows: 2,
        ..InterruptTotals::default()
    };
    assert_eq!(j.totals(), &want);
}
