//! BatchNorm, local or synchronised over the replicas of a data-parallel run
//! (`torch.nn.SyncBatchNorm`).
//!
//! A model's BatchNorm layers are [`BatchNorm`]: `nn.BatchNorm1d/2d` with
//! PyTorch's defaults, which in training normalise with the statistics of
//! the batch the process sees. A model built with a [`BatchNormSync`]
//! ([`super::ModelSpec::sync_batch_norm`], [`super::build_model_synced`]) normalises with the statistics
//! of the global batch instead, the rows of every replica:
//!
//! - each layer sums, per channel `c`, its input's shifted values
//!   `d = x - K_c` and their squares over the batch and spatial positions,
//!   and counts them (`n`): `2C + 1` values;
//! - one differentiable sum over the replicas ([`ReplicaSum`]) gives the
//!   global `S_c`, `Q_c`, `N`; the mean is `K_c + S_c / N`, the biased
//!   variance `Q_c / N - (S_c / N)^2` normalises, the unbiased one (times
//!   `N / (N - 1)`) enters `running_var`, both with the layer's momentum as
//!   `nn.BatchNorm` (`r <- (1 - m) r + m s`);
//! - autograd differentiates through the sum (its adjoint sums the
//!   gradient over the replicas), so the gradient is the global batch's,
//!   as `torch.nn.SyncBatchNorm`'s hand-written backward gives.
//!
//! The shift `K_c` is the layer's `running_mean`, which every replica holds
//! equal (broadcast at the start, then moved by the same global
//! statistics): the "shifted data" variance of Chan, Golub & LeVeque (1983,
//! "Algorithms for computing the sample variance", The American
//! Statistician 37(3)), whose cancellation in `Q/N - (S/N)^2` shrinks with
//! `(mean - K)^2 / var` instead of `mean^2 / var` once the running mean
//! tracks the batches, so the sums stay in float32 (PyTorch's SyncBN
//! gathers per-replica means and variances instead, Welford-style, at the
//! price of an all-gather). Inputs in float16 / bfloat16 (autocast) are
//! normalised in float32 and returned in their own kind, as PyTorch's
//! kernels accumulate BatchNorm statistics in float32.
//!
//! In evaluation a synchronised layer is the local one: it normalises with
//! its running statistics and communicates nothing.

use std::fmt;
use std::sync::{Arc, Mutex};

use tch::nn::{self, ModuleT};
use tch::{Kind, Tensor};

/// Sums a tensor over the replicas of a data-parallel run, differentiably:
/// the backward pass sums the incoming gradient over the replicas (every
/// replica runs it, in the same order). Implemented by the trainer over its
/// process group.
pub trait ReplicaSum: Send + Sync + fmt::Debug {
    /// The sum of `tensor` (a CPU tensor) over the replicas.
    fn differentiable_sum(
        &self,
        tensor: &Tensor,
    ) -> Result<Tensor, Box<dyn std::error::Error + Send + Sync>>;
}

/// The all-reduce of a synchronised BatchNorm failed (a replica is gone, or
/// the group's timeout passed).
#[derive(Debug, Clone, thiserror::Error)]
#[error("SyncBatchNorm's all-reduce of the batch statistics failed: {0}")]
pub struct SyncBatchNormError(pub String);

/// What the synchronised BatchNorm layers of a model share: the sum over
/// the replicas, and the first failure of it. A forward pass cannot return
/// an error, so a layer whose sum fails records the failure here, normalises
/// with its local statistics, and the layers after it skip the collective
/// (which would fail again, each after the timeout); the trainer takes the
/// failure ([`BatchNormSync::take_failure`]) before it uses the step.
pub struct BatchNormSync {
    sum: Arc<dyn ReplicaSum>,
    failure: Mutex<Option<SyncBatchNormError>>,
}

impl fmt::Debug for BatchNormSync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BatchNormSync({:?})", self.sum)
    }
}

impl BatchNormSync {
    /// Synchronisation over `sum`'s replicas.
    pub fn new(sum: Arc<dyn ReplicaSum>) -> Arc<BatchNormSync> {
        Arc::new(BatchNormSync {
            sum,
            failure: Mutex::new(None),
        })
    }

    /// The failure of a forward pass's all-reduce since the last call, if
    /// any (the batch it happened in was normalised locally from there on).
    pub fn take_failure(&self) -> Option<SyncBatchNormError> {
        self.lock().take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<SyncBatchNormError>> {
        // A poisoned lock only means a panic elsewhere; the slot stays valid.
        self.failure.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sum over the replicas, or `None` after a failure (recorded).
    fn sum(&self, tensor: &Tensor) -> Option<Tensor> {
        let mut failure = self.lock();
        if failure.is_some() {
            return None;
        }
        match self.sum.differentiable_sum(tensor) {
            Ok(sum) => Some(sum),
            Err(e) => {
                *failure = Some(SyncBatchNormError(e.to_string()));
                None
            }
        }
    }
}

/// `nn.BatchNorm1d/2d`, or `nn.SyncBatchNorm` when built with a
/// [`BatchNormSync`]. The variables (`weight`, `bias`, `running_mean`,
/// `running_var`) are tch's `nn::BatchNorm`'s, so the checkpoints of both
/// are the same.
#[derive(Debug)]
pub struct BatchNorm {
    local: nn::BatchNorm,
    /// `local`'s `eps` and `momentum` (tch keeps its config private).
    eps: f64,
    momentum: f64,
    sync: Option<Arc<BatchNormSync>>,
}

impl BatchNorm {
    /// `local`, built with `config`, synchronised over `sync`'s replicas
    /// when given.
    pub(crate) fn new(
        local: nn::BatchNorm,
        config: &nn::BatchNormConfig,
        sync: Option<Arc<BatchNormSync>>,
    ) -> BatchNorm {
        BatchNorm {
            local,
            eps: config.eps,
            momentum: config.momentum,
            sync,
        }
    }

    /// Training-mode normalisation with the global batch's statistics;
    /// `None` after a failed sum (the caller normalises locally).
    fn synchronised(&self, xs: &Tensor, sync: &BatchNormSync) -> Option<Tensor> {
        let bn = &self.local;
        let channels = xs.size()[1];
        let mut shape = vec![1i64; xs.dim()];
        shape[1] = channels;
        let dims: Vec<i64> = (0..xs.dim() as i64).filter(|&d| d != 1).collect();
        let x = match xs.kind() {
            Kind::Half | Kind::BFloat16 => xs.to_kind(Kind::Float),
            _ => xs.shallow_clone(),
        };
        // A copy, not a view: this call updates running_mean in place below.
        let shift = bn.running_mean.detach().to_kind(x.kind()).copy();
        let d = &x - shift.view(shape.as_slice());
        let count = (x.numel() as i64 / channels) as f64;
        let local = Tensor::cat(
            &[
                d.sum_dim_intlist(dims.as_slice(), false, x.kind()),
                d.square().sum_dim_intlist(dims.as_slice(), false, x.kind()),
                Tensor::full([1], count, (x.kind(), x.device())),
            ],
            0,
        );
        let global = sync.sum(&local)?;
        let n = global.double_value(&[2 * channels]);
        let mean_shift = global.narrow(0, 0, channels) / n;
        let var = global.narrow(0, channels, channels) / n - mean_shift.square();
        let normalised = (d - mean_shift.view(shape.as_slice()))
            * (&var + self.eps).rsqrt().view(shape.as_slice());
        let scaled = match &bn.ws {
            Some(w) => normalised * w.view(shape.as_slice()),
            None => normalised,
        };
        let ys = match &bn.bs {
            Some(b) => scaled + b.view(shape.as_slice()),
            None => scaled,
        };
        tch::no_grad(|| {
            let m = self.momentum;
            let mean = mean_shift + shift;
            let unbiased = var * (n / (n - 1.0).max(1.0));
            for (running, batch) in [(&bn.running_mean, mean), (&bn.running_var, unbiased)] {
                let mut running = running.shallow_clone();
                let update = (batch * m).to_kind(running.kind());
                let _ = running.g_mul_scalar_(1.0 - m).g_add_(&update);
            }
        });
        Some(ys.to_kind(xs.kind()))
    }
}

impl ModuleT for BatchNorm {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        if let (true, Some(sync)) = (train, &self.sync) {
            if let Some(ys) = self.synchronised(xs, sync) {
                return ys;
            }
        }
        self.local.forward_t(xs, train)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{build_model_synced, InputShape, ModelKind, ModelSpec};
    use tch::{nn::VarStore, Device};

    /// One replica: the sum is the tensor itself (through an op autograd
    /// records), or a failure.
    #[derive(Debug)]
    struct OneReplica {
        fails: bool,
    }

    impl ReplicaSum for OneReplica {
        fn differentiable_sum(
            &self,
            tensor: &Tensor,
        ) -> Result<Tensor, Box<dyn std::error::Error + Send + Sync>> {
            if self.fails {
                return Err("rank 1 is gone".into());
            }
            Ok(tensor * 1.0)
        }
    }

    const INPUT: InputShape = InputShape {
        channels: 3,
        height: 8,
        width: 8,
    };

    /// `kind` synchronised over `sync` when given, its variables a copy of
    /// `like`'s when given.
    fn build(
        kind: &str,
        sync: Option<Arc<BatchNormSync>>,
        like: Option<&VarStore>,
    ) -> (VarStore, crate::model::Model) {
        let mut vs = VarStore::new(Device::Cpu);
        let spec = ModelSpec::of(kind.parse::<ModelKind>().unwrap());
        let model = build_model_synced(&spec, &vs, (INPUT, 10), sync).unwrap();
        if let Some(like) = like {
            vs.copy(like).unwrap();
        }
        (vs, model)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    /// Synchronised vs local training-mode BatchNorm on the small CNN. Only
    /// the statistics differ: libtorch's batch_norm accumulates them in
    /// float64, ours sums <= 384 float32 values per channel, off by up to
    /// 384 * 1.19e-7 = 4.6e-5 of the sums' magnitudes (|mean| / std up to ~2),
    /// ~2e-4 on the O(1) normalised values, less after the later layers. A
    /// real bug (wrong mean, variance or count; biased running_var at the
    /// third layer's N = 24) moves logits, gradients or statistics by >= 1e-3.
    const FLOAT32_STATISTICS: f64 = 5e-4;

    /// Synchronised over one replica, the small CNN trains as the local one:
    /// the same logits, gradients and running statistics (the shifted sums
    /// and the all-reduced count reproduce libtorch's batch_norm), across
    /// two steps so the second shifts by a nonzero running mean.
    #[test]
    fn synchronised_over_one_replica_is_local_batch_norm() {
        let sync = BatchNormSync::new(Arc::new(OneReplica { fails: false }));
        let (local_vs, local) = build("cnn", None, None);
        let (sync_vs, synced) = build("cnn", Some(sync.clone()), Some(&local_vs));
        let xs = Tensor::randn([6, 3, 8, 8], (Kind::Float, Device::Cpu)) * 2.0 + 1.5;
        for step in 0..2 {
            let batch = &xs + step as f64;
            let (a, b) = (
                local.forward_t(&batch, true),
                synced.forward_t(&batch, true),
            );
            assert!(max_diff(&a, &b) < FLOAT32_STATISTICS, "logits, step {step}");
            a.square().mean(Kind::Float).backward();
            b.square().mean(Kind::Float).backward();
        }
        let (a, b) = (local_vs.variables(), sync_vs.variables());
        for (name, tensor) in &a {
            let other = &b[name];
            assert!(max_diff(tensor, other) < FLOAT32_STATISTICS, "{name}");
            if tensor.requires_grad() {
                assert!(
                    max_diff(&tensor.grad(), &other.grad()) < FLOAT32_STATISTICS,
                    "grad {name}"
                );
            }
        }
        assert!(sync.take_failure().is_none());
        let eval = Tensor::randn([2, 3, 8, 8], (Kind::Float, Device::Cpu));
        let diff = max_diff(
            &local.forward_t(&eval, false),
            &synced.forward_t(&eval, false),
        );
        // Evaluation normalises with the running statistics, equal to
        // FLOAT32_STATISTICS as checked above; the same bar carries over.
        assert!(diff < FLOAT32_STATISTICS, "evaluation");
    }

    /// Under bfloat16 autocast the synchronised layers normalise in float32
    /// and return bfloat16 as libtorch's BatchNorm does: the logits agree to
    /// bfloat16's rounding.
    #[test]
    fn synchronised_layers_work_under_bf16_autocast() {
        use crate::model::precision::Precision;
        let sync = BatchNormSync::new(Arc::new(OneReplica { fails: false }));
        let bf16 = ModelSpec {
            precision: Precision::Bf16,
            ..ModelSpec::of("cnn".parse().unwrap())
        };
        let local_vs = VarStore::new(Device::Cpu);
        let local = build_model_synced(&bf16, &local_vs, (INPUT, 10), None).unwrap();
        let mut sync_vs = VarStore::new(Device::Cpu);
        let synced = build_model_synced(&bf16, &sync_vs, (INPUT, 10), Some(sync.clone())).unwrap();
        sync_vs.copy(&local_vs).unwrap();
        let xs = Tensor::randn([6, 3, 8, 8], (Kind::Float, Device::Cpu));
        let (a, b) = (local.forward_t(&xs, true), synced.forward_t(&xs, true));
        assert_eq!(b.kind(), a.kind());
        let scale = a.abs().max().double_value(&[]);
        // Float32 statistics differing by <~ 1e-4 relative (see
        // FLOAT32_STATISTICS) flip few bfloat16 roundings (1 ulp = 2^-7 =
        // 7.8e-3 relative); the bf16 logits then differ by <~ 2 ulps of the
        // largest: 2e-2 * max|logit| is 2.5 ulps. A real bug moves them by O(1).
        assert!(
            max_diff(&a, &b) < 2e-2 * scale.max(1.0),
            "{}",
            max_diff(&a, &b)
        );
        assert!(sync.take_failure().is_none());
    }

    /// A failing sum is recorded once, the batch is normalised locally, and
    /// evaluation never calls it.
    #[test]
    fn a_failed_sum_is_recorded_and_the_layers_fall_back_to_local() {
        let sync = BatchNormSync::new(Arc::new(OneReplica { fails: true }));
        let (local_vs, local) = build("cnn", None, None);
        let (_sync_vs, synced) = build("cnn", Some(sync.clone()), Some(&local_vs));
        let xs = Tensor::randn([4, 3, 8, 8], (Kind::Float, Device::Cpu));
        let _ = synced.forward_t(&xs, false);
        assert!(sync.take_failure().is_none(), "evaluation communicated");
        let diff = max_diff(&local.forward_t(&xs, true), &synced.forward_t(&xs, true));
        // Both run libtorch's local batch_norm on equal weights and input: the
        // same kernels in the same order, bitwise equal; 1e-6 is only slack.
        assert!(diff < 1e-6);
        let failure = sync.take_failure().expect("recorded").to_string();
        assert!(failure.contains("rank 1 is gone"), "{failure}");
        assert!(sync.take_failure().is_none(), "taken");
    }

    /// A model without BatchNorm is refused, by name.
    #[test]
    fn a_model_without_batch_norm_is_refused() {
        let sync = BatchNormSync::new(Arc::new(OneReplica { fails: false }));
        let mlp = ModelSpec::of("mlp".parse().unwrap());
        let vs = VarStore::new(Device::Cpu);
        let error = build_model_synced(&mlp, &vs, (INPUT, 10), Some(sync))
            .expect_err("refused")
            .to_string();
        assert!(error.contains("mlp has none"), "{error}");
    }
}
