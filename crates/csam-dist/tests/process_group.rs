//! A Gloo group of ranks on loopback, each rank a thread of this test
//! process with its own group object (as separate processes would be).

use std::time::{Duration, Instant};

use csam_dist::{DistError, ProcessGroup, Rendezvous};
use tch::{Kind, Tensor};

fn rendezvous(rank: usize, world_size: usize, port: u16, timeout: Duration) -> Rendezvous {
    Rendezvous {
        rank,
        world_size,
        local_rank: rank,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        timeout,
    }
}

/// Runs `body(group)` on `world_size` ranks at once and returns their results by rank.
fn on_ranks<T: Send>(
    world_size: usize,
    timeout: Duration,
    body: impl Fn(ProcessGroup) -> T + Sync,
) -> Vec<T> {
    let lease = csam_testkit::port::PortLease::take();
    let port = lease.port();
    std::thread::scope(|scope| {
        let ranks: Vec<_> = (0..world_size)
            .map(|rank| {
                let body = &body;
                scope.spawn(move || {
                    let group = ProcessGroup::connect(&rendezvous(rank, world_size, port, timeout))
                        .expect("join the group");
                    body(group)
                })
            })
            .collect();
        ranks
            .into_iter()
            .map(|rank| rank.join().expect("rank thread"))
            .collect()
    })
}

#[test]
fn all_reduce_sums_and_broadcast_copies_over_three_ranks() {
    let results = on_ranks(3, Duration::from_secs(30), |group| {
        let rank = group.rank() as f64;
        let summed = Tensor::from_slice(&[rank, 10.0 * rank, 1.0]);
        group.all_reduce_sum(&summed).expect("all-reduce");
        let pending = Tensor::full([4], rank + 1.0, (Kind::Float, tch::Device::Cpu));
        group
            .start_all_reduce_sum(&pending)
            .expect("start")
            .wait()
            .expect("wait");
        let copied = Tensor::from_slice(&[rank, rank]);
        group.broadcast(&copied, 2).expect("broadcast");
        group.barrier().expect("barrier");
        (
            Vec::<f64>::try_from(&summed).unwrap(),
            Vec::<f32>::try_from(&pending).unwrap(),
            Vec::<f64>::try_from(&copied).unwrap(),
        )
    });
    for (summed, pending, copied) in results {
        assert_eq!(summed, vec![3.0, 30.0, 3.0]);
        assert_eq!(pending, vec![6.0; 4]);
        assert_eq!(copied, vec![2.0, 2.0]);
    }
}

#[test]
fn a_rank_that_leaves_makes_the_others_fail_not_hang() {
    let timeout = Duration::from_secs(20);
    let results = on_ranks(2, timeout, |group| {
        // Both ranks have joined once the barrier passes: a rank that left
        // during the rendezvous would fail rank 0's join instead (Gloo's
        // connecting side may finish before the listening side).
        group.barrier().expect("barrier before leaving");
        if group.rank() == 1 {
            drop(group);
            return None;
        }
        let started = Instant::now();
        let error = group.all_reduce_sum(&Tensor::from_slice(&[1.0f64]));
        Some((error, started.elapsed()))
    });
    let (error, elapsed) = results
        .into_iter()
        .flatten()
        .next()
        .expect("rank 0's result");
    match error {
        Err(DistError::Collective {
            operation,
            rank: 0,
            world_size: 2,
            ..
        }) => {
            assert_eq!(operation, "all-reduce")
        }
        other => panic!("expected a failed all-reduce, got {other:?}"),
    }
    assert!(
        elapsed <= timeout + Duration::from_secs(5),
        "took {elapsed:?}"
    );
}

#[test]
fn a_rendezvous_nobody_joins_times_out_with_its_address() {
    let lease = csam_testkit::port::PortLease::take();
    let port = lease.port();
    let started = Instant::now();
    let error = ProcessGroup::connect(&rendezvous(1, 2, port, Duration::from_secs(2)))
        .expect_err("no rank 0 serves the store");
    let message = error.to_string();
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("as rank 1"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn cuda_tensors_and_strided_views_are_refused_before_gloo_sees_them() {
    let results = on_ranks(1, Duration::from_secs(10), |group| {
        let strided = Tensor::arange(6, (Kind::Float, tch::Device::Cpu))
            .view([2, 3])
            .tr();
        group.all_reduce_sum(&strided).map_err(|e| e.to_string())
    });
    let message = results[0].clone().expect_err("refused");
    assert!(message.contains("contiguous"), "{message}");
}

/// The differentiable sum over three ranks: the forward value is the sum of
/// the ranks' inputs, and rank r's input gradient is the sum over the ranks
/// of the gradients reaching their outputs (here `r' + 1` on rank r', each
/// output entry weighted by it), by the chain rule through the sum: 1 + 2 + 3.
#[test]
fn differentiable_sum_sums_values_forward_and_gradients_backward() {
    let results = on_ranks(3, Duration::from_secs(30), |group| {
        let rank = group.rank() as f64;
        let x = Tensor::from_slice(&[rank, 2.0 * rank])
            .to_kind(Kind::Float)
            .set_requires_grad(true);
        let y = group.differentiable_sum(&(&x * 1.0)).expect("forward");
        (&y * (rank + 1.0)).sum(Kind::Float).backward();
        (
            Vec::<f32>::try_from(&y.detach()).unwrap(),
            Vec::<f32>::try_from(&x.grad()).unwrap(),
            Vec::<f32>::try_from(&x.detach()).unwrap(),
        )
    });
    for (rank, (y, grad, x)) in results.into_iter().enumerate() {
        assert_eq!(y, vec![3.0, 6.0]);
        assert_eq!(grad, vec![6.0, 6.0]);
        assert_eq!(
            x,
            vec![rank as f32, 2.0 * rank as f32],
            "the input is left as it was"
        );
    }
}
