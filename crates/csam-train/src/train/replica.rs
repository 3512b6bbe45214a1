//! Data-parallel training: one run trained by `W` processes (replicas),
//! each on its part of every batch, over PyTorch's c10d (`csam-dist`).
//!
//! The protocol, as PyTorch's DistributedDataParallel with a distributed
//! sampler:
//! - every replica builds the same model from the run's seed; rank 0's
//!   weights, buffers and optimiser state are then broadcast, so the replicas
//!   start equal also when resuming;
//! - the run's `batch_size` is the global batch: each epoch's order and
//!   augmentation are the single-process ones, and replica `r` trains on
//!   rows `floor(r n / W) .. floor((r + 1) n / W)` of each batch of `n`
//!   ([`csam_data::Shard`]);
//! - before every update the replicas' gradients are averaged with their
//!   rows as weights ([`DataParallel`]), so every replica takes the same
//!   step on the global batch's mean gradient: in [`GradientBuckets`]
//!   whose all-reduce starts during the backward pass that computes the
//!   update (DDP's overlap; [`BaseOptimizer::reduced_backward`]), or after
//!   the passes where the update sums several of them (m-sharpness parts)
//!   or is computed from them (LookSAM's reuse). SGD with `W` replicas
//!   therefore equals one process on the global batch, up to
//!   floating-point summation order;
//! - SAM: each replica perturbs with its own gradient and the second-pass
//!   gradients are averaged (m-sharpness with `m` = the replica's rows, as the
//!   paper's and google-research/sam's data-parallel step), one all-reduce
//!   per step as SGD; `global_ascent` averages pass 1's gradient too
//!   (exact SAM on the global batch) for a second all-reduce per step;
//! - BatchNorm normalises with each replica's own batch statistics, or with
//!   `sync_batch_norm` with the global batch's (`nn.SyncBatchNorm`,
//!   [`csam_nn::model::batch_norm`], over this group's differentiable
//!   all-reduce); the running statistics are rank 0's, broadcast at every
//!   epoch's end (what DDP's `broadcast_buffers` gives at evaluation time;
//!   with SyncBN they are equal on every replica anyway);
//! - rank 0 alone validates, tests, writes the run directory and decides the
//!   plan (start, resume, finished); the others train in step with it and
//!   read the checkpoint it wrote when resuming. The epoch's training loss
//!   and accuracy are summed over the replicas, so `metrics.jsonl` shows the
//!   global batch's.

use std::sync::Arc;

use csam_data::Shard;
use csam_dist::{BucketCaps, GradientBuckets, ProcessGroup};
use csam_nn::loss::TrainingLoss;
use csam_nn::model::{BatchNormSync, Head, ReplicaSum};
use csam_nn::optim::{BaseOptimizer, OptimError, Params, SamPolicy};
use tch::{nn::VarStore, Tensor};

use super::error::Result;
use crate::spec::ConfigError;
use crate::spec::{RunSpec, UpdateRule};

/// This process's place in a data-parallel run.
#[derive(Clone)]
pub struct Replica {
    group: Arc<ProcessGroup>,
    /// The synchronisation of the BatchNorm layers of a `sync_batch_norm`
    /// model, whose failures the next gradient reduction reports.
    batch_norm: Arc<BatchNormSync>,
}

/// The group's differentiable sum, for SyncBatchNorm.
#[derive(Debug)]
struct GroupSum(Arc<ProcessGroup>);

impl ReplicaSum for GroupSum {
    fn differentiable_sum(
        &self,
        tensor: &Tensor,
    ) -> std::result::Result<Tensor, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.0.differentiable_sum(tensor)?)
    }
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Replica({} of {})", self.rank(), self.world_size())
    }
}

impl Replica {
    /// The replica of `group`.
    pub fn new(group: ProcessGroup) -> Replica {
        let group = Arc::new(group);
        Replica {
            batch_norm: BatchNormSync::new(Arc::new(GroupSum(Arc::clone(&group)))),
            group,
        }
    }

    /// What a `sync_batch_norm` model's BatchNorm layers synchronise over
    /// (the same for every model this replica builds).
    pub fn batch_norm_sync(&self) -> Arc<BatchNormSync> {
        Arc::clone(&self.batch_norm)
    }

    /// This replica's rank.
    pub fn rank(&self) -> usize {
        self.group.rank()
    }

    /// Number of replicas.
    pub fn world_size(&self) -> usize {
        self.group.world_size()
    }

    /// Whether this replica writes the run directory (rank 0).
    pub fn writes(&self) -> bool {
        self.rank() == 0
    }

    /// This replica's part of every batch.
    pub fn shard(&self) -> Shard {
        Shard {
            index: self.rank(),
            count: self.world_size(),
        }
    }

    /// `optimizer`, with its gradients averaged over the replicas (hooks on
    /// its parameters fill [`GradientBuckets`] during the backward passes
    /// whose gradient the step uses).
    pub fn wrap(&self, optimizer: Box<dyn BaseOptimizer>) -> Result<Box<dyn BaseOptimizer>> {
        let buckets = GradientBuckets::new(
            Arc::clone(&self.group),
            optimizer.params().tensors(),
            BucketCaps::default(),
        )?;
        Ok(Box::new(DataParallel {
            inner: optimizer,
            batch_norm: Arc::clone(&self.batch_norm),
            buckets,
        }))
    }

    /// Copies rank 0's `tensors` into every replica's, in place, in the
    /// given order (the same on every rank). Gloo sends contiguous tensors:
    /// a tensor in another layout (a channels_last weight) goes through a
    /// contiguous copy, written back into it.
    pub fn broadcast_from_first(&self, tensors: &[Tensor]) -> Result<()> {
        tch::no_grad(|| {
            tensors.iter().try_for_each(|tensor| {
                if tensor.is_contiguous() {
                    return self.group.broadcast(tensor, 0);
                }
                let dense = tensor.contiguous();
                self.group.broadcast(&dense, 0)?;
                tensor.shallow_clone().copy_(&dense);
                Ok(())
            })
        })?;
        Ok(())
    }

    /// Rank 0's weights and buffers, in every replica's `vs` (sorted by name,
    /// so every rank sends them in one order).
    pub fn broadcast_variables(&self, vs: &VarStore) -> Result<()> {
        let mut variables: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        variables.sort_by(|a, b| a.0.cmp(&b.0));
        let tensors: Vec<Tensor> = variables.into_iter().map(|(_, t)| t).collect();
        self.broadcast_from_first(&tensors)
    }

    /// The sums of `values` over the replicas (float64, exact for counts).
    pub fn sum(&self, values: &[f64]) -> Result<Vec<f64>> {
        let tensor = Tensor::from_slice(values);
        self.group.all_reduce_sum(&tensor)?;
        Ok(Vec::<f64>::try_from(&tensor)?)
    }

    /// Rank 0's `value`, on every replica.
    pub fn agree(&self, value: i64) -> Result<i64> {
        let tensor = Tensor::from_slice(&[value]);
        self.group.broadcast(&tensor, 0)?;
        Ok(tensor.int64_value(&[0]))
    }

    /// Returns once every replica has called it.
    pub fn barrier(&self) -> Result<()> {
        Ok(self.group.barrier()?)
    }

    /// Refuses a run that data parallelism would train wrongly, naming why:
    /// settings whose state one replica learns from data the others do not
    /// see, or whose step decisions depend on a replica's own gradient (the
    /// replicas would call different collectives), and batches a replica
    /// would get no row of.
    pub fn check_spec(&self, spec: &RunSpec, n_train: usize) -> Result<(), ConfigError> {
        let world = self.world_size();
        let refuse = |key: &'static str, value: String, why: &str| {
            Err(ConfigError::invalid(
                key,
                value,
                format!("{why}; data-parallel training ({world} processes) does not offer it"),
            ))
        };
        if spec.data.source.is_streamed() {
            return refuse(
                "data",
                spec.data.source.to_string(),
                "a streamed source is read by one process's decoding threads",
            );
        }
        if matches!(spec.optim.rule, UpdateRule::Bsam { .. }) {
            return refuse(
                "optimizer",
                "bsam".into(),
                "bSAM's noise and precision are one process's variational state",
            );
        }
        if matches!(spec.optim.policy, SamPolicy::AeSam(_)) {
            return refuse(
                "sam_policy",
                "aesam".into(),
                "AE-SAM decides from each replica's own gradient norm whether to take the \
                 second pass, so the replicas would disagree",
            );
        }
        if spec.loss.needs_correctness_history() || matches!(spec.loss, TrainingLoss::AdaFocal(_)) {
            return refuse(
                "loss",
                spec.loss.name().into(),
                "this loss learns from every example's predictions, which one replica does \
                 not see",
            );
        }
        if matches!(spec.model.head, Head::Balcal { .. }) {
            return refuse(
                "head",
                "balcal".into(),
                "BalCAL balances its classifiers from the whole epoch's training logits",
            );
        }
        if spec.track_theory {
            return refuse(
                "track_theory",
                "true".into(),
                "the theory diagnostics read one process's batch",
            );
        }
        if spec.optim.global_ascent && spec.optim.rule.sharpness().is_some_and(|s| s.m.is_some()) {
            return refuse(
                "m_sharpness",
                "set".into(),
                "global_ascent perturbs with the global batch's gradient, \
                 not with sub-batches'",
            );
        }
        let last = match n_train % spec.batch_size {
            0 => spec.batch_size,
            rest => rest,
        };
        if spec.batch_size.min(last) < world {
            return Err(ConfigError::invalid(
                "batch_size",
                spec.batch_size,
                format!(
                    "with {world} processes every batch needs at least {world} rows, one per \
                     process, but the epoch's {} training examples end with a batch of {last}; \
                     choose a batch size that leaves a larger last batch",
                    n_train
                ),
            ));
        }
        Ok(())
    }
}

/// A base optimiser whose step uses the replicas' mean gradient: each
/// replica's gradient (the mean over its `rows`) weighted by its rows, summed
/// over the replicas and divided by their total rows, so replicas with
/// unequal parts (an epoch's last batch) give the global batch's mean.
/// A SyncBatchNorm all-reduce that failed in the forward pass is reported
/// here, before the gradients it shaped are used.
struct DataParallel {
    inner: Box<dyn BaseOptimizer>,
    batch_norm: Arc<BatchNormSync>,
    /// The buckets of `inner`'s parameters, reduced during a backward pass.
    buckets: GradientBuckets,
}

impl DataParallel {
    /// The error of a SyncBatchNorm all-reduce that failed in the forward
    /// pass, which the gradient must not be used after.
    fn batch_norm_failure(&self) -> Result<(), OptimError> {
        match self.batch_norm.take_failure() {
            Some(failure) => Err(OptimError::Replicas(Box::new(failure))),
            None => Ok(()),
        }
    }

    /// The buckets hold every parameter of the optimizer: a pass over
    /// `count` tensors must be over all of them.
    fn check_count(&self, count: usize) -> Result<(), OptimError> {
        let expected = self.inner.params().tensors().len();
        match count == expected {
            true => Ok(()),
            false => Err(OptimError::Mismatch(format!(
                "the data-parallel buckets hold the optimizer's {expected} parameters, \
                 a gradient of {count} tensors was given"
            ))),
        }
    }
}

impl BaseOptimizer for DataParallel {
    fn params(&self) -> &Params {
        self.inner.params()
    }

    fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr)
    }

    fn step(&mut self, grads: &[Tensor]) -> Result<(), OptimError> {
        self.inner.step(grads)
    }

    fn loss_scale(&self) -> f64 {
        self.inner.loss_scale()
    }

    fn skipped_last_step(&self) -> bool {
        self.inner.skipped_last_step()
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        self.inner.state()
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<(), OptimError> {
        self.inner.load_state(state)
    }

    fn ascent_momentum(&self) -> Option<&Tensor> {
        self.inner.ascent_momentum()
    }

    /// The backward pass with the buckets armed: each bucket's all-reduce
    /// starts as soon as its gradients are computed.
    fn reduced_backward(
        &self,
        objective: &Tensor,
        params: &[Tensor],
        rows: usize,
    ) -> Result<Vec<Tensor>, OptimError> {
        self.batch_norm_failure()?;
        self.check_count(params.len())?;
        let round = self.buckets.arm(rows).map_err(replicas_failed)?;
        // The local gradients are in the buckets already.
        drop(Tensor::f_run_backward(&[objective], params, false, false)?);
        Ok(round.finish().map_err(replicas_failed)?.grads)
    }

    /// `grads`, computed already, through the same buckets.
    fn reduce_gradient(&self, grads: Vec<Tensor>, rows: usize) -> Result<Vec<Tensor>, OptimError> {
        self.batch_norm_failure()?;
        if grads.is_empty() {
            return Ok(grads);
        }
        self.check_count(grads.len())?;
        let round = self.buckets.arm(rows).map_err(replicas_failed)?;
        for (index, grad) in grads.iter().enumerate() {
            round.add(index, grad).map_err(replicas_failed)?;
        }
        Ok(round.finish().map_err(replicas_failed)?.grads)
    }
}

fn replicas_failed(error: csam_dist::DistError) -> OptimError {
    OptimError::Replicas(Box::new(error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use csam_dist::Rendezvous;
    use csam_nn::optim::{Sgd, SgdConfig};
    use std::time::Duration;
    use tch::{Device, Kind};

    /// Rank `rank`'s group of two, meeting on `port`.
    fn connect(rank: usize, port: u16) -> ProcessGroup {
        ProcessGroup::connect(&Rendezvous {
            rank,
            world_size: 2,
            local_rank: rank,
            master_addr: "127.0.0.1".into(),
            master_port: port,
            timeout: Duration::from_secs(60),
        })
        .unwrap()
    }

    /// Rank 0's weights reach rank 1's channels_last convolution weight
    /// (which Gloo cannot send as it is), which keeps its layout.
    #[test]
    fn broadcast_reaches_channels_last_variables() {
        use csam_nn::model::memory_format::{is_channels_last, MemoryFormat};
        let lease = csam_testkit::port::PortLease::take();
        let port = lease.port();
        let weights: Vec<(Tensor, Tensor)> = std::thread::scope(|scope| {
            let ranks: Vec<_> = (0..2usize)
                .map(|rank| {
                    scope.spawn(move || {
                        let vs = VarStore::new(Device::Cpu);
                        let values =
                            Tensor::arange(48, (Kind::Float, Device::Cpu)) * (rank + 1) as f64;
                        let w = vs.root().var_copy("conv", &values.reshape([4, 3, 2, 2]));
                        let b = vs.root().var_copy(
                            "bias",
                            &Tensor::full([4], rank as f64, (Kind::Float, Device::Cpu)),
                        );
                        MemoryFormat::ChannelsLast.convert_variables(&vs);
                        Replica::new(connect(rank, port))
                            .broadcast_variables(&vs)
                            .unwrap();
                        (w, b)
                    })
                })
                .collect();
            ranks.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let expected = Tensor::arange(48, (Kind::Float, Device::Cpu)).reshape([4, 3, 2, 2]);
        for (w, b) in &weights {
            assert!(is_channels_last(w) && !w.is_contiguous());
            // A broadcast copies bytes: exact.
            assert_eq!((w - &expected).abs().max().double_value(&[]), 0.0);
            assert_eq!(b.abs().max().double_value(&[]), 0.0);
        }
    }

    /// Two ranks (threads with a group each) reduce gradients, computed
    /// already, that span three buckets (a small one, then 12 MB, then 20
    /// MB): every entry is the row-weighted mean, `(1 x 1 + 3 x 2) / 4`. A
    /// list missing a parameter is refused before any collective.
    #[test]
    fn gradients_over_several_buckets_are_the_row_weighted_mean() {
        let sizes = [5_000_000i64, 3_000_000, 10];
        let bytes: Vec<usize> = sizes.iter().map(|&n| n as usize * 4).collect();
        let caps = BucketCaps::default();
        assert_eq!(caps.layout(&bytes).len(), 3);
        let lease = csam_testkit::port::PortLease::take();
        let port = lease.port();
        let reduced: Vec<Vec<Tensor>> = std::thread::scope(|scope| {
            let ranks: Vec<_> = (0..2usize)
                .map(|rank| {
                    scope.spawn(move || {
                        let group = connect(rank, port);
                        let vs = VarStore::new(Device::Cpu);
                        for (i, &n) in sizes.iter().enumerate() {
                            let _ = vs.root().zeros(&format!("w{i}"), &[n]);
                        }
                        let sgd = Sgd::new(&vs, SgdConfig::default()).unwrap();
                        let optimizer = Replica::new(group).wrap(Box::new(sgd)).unwrap();
                        let value = (rank + 1) as f64;
                        let grads = optimizer
                            .params()
                            .tensors()
                            .iter()
                            .map(|p| p.full_like(value))
                            .collect();
                        let rows = 1 + 2 * rank;
                        let short: Vec<Tensor> = optimizer.params().tensors()[1..]
                            .iter()
                            .map(|p| p.full_like(value))
                            .collect();
                        let refused = optimizer.reduce_gradient(short, rows);
                        assert!(
                            matches!(refused, Err(OptimError::Mismatch(_))),
                            "a gradient missing a parameter must be refused"
                        );
                        optimizer.reduce_gradient(grads, rows).unwrap()
                    })
                })
                .collect();
            ranks.into_iter().map(|r| r.join().unwrap()).collect()
        });
        for grads in reduced {
            assert_eq!(grads.len(), sizes.len());
            for grad in &grads {
                let (min, max) = (grad.min().double_value(&[]), grad.max().double_value(&[]));
                // (1 x 1 + 3 x 2) / 4 = 1.75: small integers and a division by 4, exact
                // in float32 whatever the order.
                assert_eq!((min, max), (1.75, 1.75));
            }
        }
    }
}
