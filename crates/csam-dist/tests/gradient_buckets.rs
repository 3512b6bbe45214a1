//! Gradient buckets reduced during the backward pass, on three ranks over
//! loopback (threads of this test process, each with its own group), against
//! the row-weighted mean computed here from every rank's own gradient.

use std::sync::Arc;
use std::time::Duration;

use csam_dist::{BucketCaps, GradientBuckets, ProcessGroup, Rendezvous};
use csam_testkit::roundoff::{sum_bound, F32_EPSILON};
use tch::{Device, Kind, Tensor};

const RANKS: usize = 3;
/// Runs `body(rank, group)` on [`RANKS`] ranks at once; results by rank.
fn on_ranks<T: Send>(body: impl Fn(usize, Arc<ProcessGroup>) -> T + Sync) -> Vec<T> {
    let lease = csam_testkit::port::PortLease::take();
    let port = lease.port();
    std::thread::scope(|scope| {
        let ranks: Vec<_> = (0..RANKS)
            .map(|rank| {
                let body = &body;
                scope.spawn(move || {
                    let group = ProcessGroup::connect(&Rendezvous {
                        rank,
                        world_size: RANKS,
                        local_rank: rank,
                        master_addr: "127.0.0.1".into(),
                        master_port: port,
                        timeout: Duration::from_secs(60),
                    })
                    .expect("join the group");
                    body(rank, Arc::new(group))
                })
            })
            .collect();
        ranks.into_iter().map(|r| r.join().expect("rank")).collect()
    })
}

/// One parameter no pass reaches, then a three-layer tanh network's weights
/// and biases (the same on every rank). The unreached one is in the last
/// bucket (buckets are filled from the last parameter).
fn parameters() -> Vec<Tensor> {
    let shapes: [&[i64]; 7] = [&[5], &[8, 16], &[16], &[16, 16], &[16], &[16, 4], &[4]];
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let n: i64 = shape.iter().product();
            (Tensor::arange(n, (Kind::Float, Device::Cpu)) * (0.37 + i as f64) / n as f64)
                .sin()
                .reshape(*shape)
                .set_requires_grad(true)
        })
        .collect()
}

/// Rank `rank`'s loss on its own `rows` inputs.
fn loss(params: &[Tensor], rank: usize, rows: i64) -> Tensor {
    let x = (Tensor::arange(rows * 8, (Kind::Float, Device::Cpu)) * (1.0 + rank as f64) * 0.1)
        .cos()
        .reshape([rows, 8]);
    let h = (x.matmul(&params[1]) + &params[2]).tanh();
    let h = (h.matmul(&params[3]) + &params[4]).tanh();
    (h.matmul(&params[5]) + &params[6])
        .square()
        .mean(Kind::Float)
}

/// Small caps, so the network's parameters fill several buckets.
const CAPS: BucketCaps = BucketCaps {
    first_bytes: 64,
    bytes: 600,
};

fn rows_of(rank: usize) -> i64 {
    2 + rank as i64
}

#[test]
fn buckets_start_during_backward_and_give_the_row_weighted_mean() {
    let results = on_ranks(|rank, group| {
        let params = parameters();
        let buckets = GradientBuckets::new(group, &params, CAPS).expect("buckets");
        let rows = rows_of(rank);
        // A backward pass outside a round is left alone (were its gradients
        // reduced, the ranks' collectives would pair up wrongly below).
        let _ = Tensor::run_backward(&[loss(&params, rank, rows)], &params[1..], false, false);
        let round = buckets.arm(rows as usize).expect("arm");
        let own = Tensor::run_backward(&[loss(&params, rank, rows)], &params, false, false);
        let reduced = round.finish().expect("finish");
        (own, reduced, buckets.count())
    });
    let total_rows: i64 = (0..RANKS).map(rows_of).sum();
    for (_, reduced, count) in &results {
        assert!(
            *count >= 4,
            "the caps should make several buckets, got {count}"
        );
        // In a chain every bucket completes at a hook, before backward
        // returns, but the last one, which waits for the unreached parameter.
        assert_eq!(reduced.launched_early, count - 1);
        assert_eq!(reduced.buckets, *count);
        for (i, grad) in reduced.grads.iter().enumerate() {
            let expected = match i {
                0 => Tensor::zeros([5], (Kind::Double, Device::Cpu)),
                _ => {
                    results
                        .iter()
                        .enumerate()
                        .map(|(rank, (own, _, _))| own[i].to_kind(Kind::Double) * rows_of(rank))
                        .reduce(|a, b| a + b)
                        .unwrap()
                        / total_rows as f64
                }
            };
            assert_eq!(grad.size(), parameters()[i].size());
            assert_eq!(grad.kind(), Kind::Float);
            let error = (grad.to_kind(Kind::Double) - &expected)
                .abs()
                .max()
                .double_value(&[]);
            // A float32 sum of the ranks' weighted gradients, then a
            // division: round-off of RANKS + 1 operations on values no
            // larger than the largest gradient entry (none for the
            // unreached parameter 0, whose mean is exactly 0).
            let scale = results
                .iter()
                .filter(|(own, _, _)| own[i].defined())
                .map(|(own, _, _)| own[i].abs().max().double_value(&[]))
                .fold(0.0, f64::max);
            let bar = sum_bound(RANKS + 1, F32_EPSILON) * scale;
            assert!(error <= bar, "parameter {i}: off by {error} (bar {bar})");
        }
    }
    // The ranks' inputs differ, so the mean is not any rank's own gradient.
    let (own, reduced, _) = &results[0];
    let gap = (&own[6] - &reduced.grads[6]).abs().max().double_value(&[]);
    assert!(gap > 1e-3, "rank 0's own gradient is {gap} from the mean");
}

/// A round dropped unfinished (a backward pass that failed) leaves the
/// buckets ready for the next; gradients computed before arming go in by hand.
#[test]
fn a_dropped_round_is_cleaned_up_and_gradients_can_be_added_by_hand() {
    let results = on_ranks(|rank, group| {
        let params = parameters();
        let buckets = GradientBuckets::new(group, &params, CAPS).expect("buckets");
        drop(buckets.arm(1).expect("arm"));
        let own = Tensor::run_backward(&[loss(&params, rank, 3)], &params[1..], false, false);
        let round = buckets.arm(1).expect("arm again");
        for (i, grad) in own.iter().enumerate() {
            round.add(i + 1, grad).expect("add");
        }
        let wrong_shape = round.add(1, &Tensor::zeros([3], (Kind::Float, Device::Cpu)));
        let reduced = round.finish().expect("finish");
        (own, reduced, wrong_shape.is_err())
    });
    for (_, reduced, refused) in &results {
        assert!(refused, "a gradient of the wrong shape must be refused");
        assert_eq!(reduced.launched_early, reduced.buckets - 1);
        for i in 0..6 {
            let sum = results
                .iter()
                .map(|(own, _, _)| own[i].shallow_clone())
                .reduce(|a, b| a + b)
                .unwrap();
            let error = (&reduced.grads[i + 1] - sum / RANKS as f64)
                .abs()
                .max()
                .double_value(&[]);
            // Two float32 sums of RANKS terms in other orders, then a
            // division: round-off of RANKS + 1 operations each.
            let scale = results
                .iter()
                .map(|(own, _, _)| own[i].abs().max().double_value(&[]))
                .fold(0.0, f64::max);
            let bar = 2.0 * sum_bound(RANKS + 1, F32_EPSILON) * scale;
            assert!(error <= bar, "parameter {i}: off by {error} (bar {bar})");
        }
    }
}
