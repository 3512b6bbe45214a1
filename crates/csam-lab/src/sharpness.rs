//! `csam sharpness`: the Hessian spectrum of a trained run's training loss
//! (paper Section 4, Figure 2a-b, and its sharpness table).
//!
//! For the run's weights theta (best or last checkpoint), in eval mode, over
//! a seeded sample of n training examples:
//! - `L(theta)` = mean cross entropy over the sample ([`LossSurface`]);
//! - `kappa_max` = largest eigenvalue of `hess L` by power iteration
//!   ([`top_eigenvalue`]), `kappa_min` = smallest by Lanczos ([`lanczos_min`]),
//!   both on exact Hessian-vector products, with the same iteration limit
//!   and tolerance, each reported with its convergence;
//! - `theta~ = theta + rho g / ||g||`, `g = grad L(theta)`: SAM's ascent
//!   point for the run's rho (SAM's rule for every run, so SGD and SAM runs
//!   are measured alike);
//! - both eigenvalues at `theta' = (1 - t) theta + t theta~` for
//!   `t = 0, 1/(k+1), ..., k/(k+1), 1` (`k` = segment points; paper Figure 2b),
//!   and whether Lemma 1's assumption `kappa_min(theta') >= -||g|| / rho`
//!   holds at every one of them.

use std::path::Path;

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::{Device, Tensor};

use csam_data::{BatchLoader, LoaderOptions};
use csam_nn::curvature::eigen::{lanczos_min, top_eigenvalue, Eigen, PowerSettings};
use csam_nn::curvature::hessian::LossSurface;
use csam_nn::curvature::CurvatureError;
use csam_nn::device::parse_device;
use csam_train::train::atomic::write_atomic;
use csam_train::train::session::input_shape;
use csam_train::train::{Checkpoint, ConfigError, Remedy, TrainError, TrainedRun};

use crate::error::{LabError, Result};

/// What [`measure_run`] reports while it works, for the caller's progress
/// display (the library itself prints nothing).
pub trait SharpnessObserver {
    /// Another Hessian-vector product is done (`products` so far).
    fn product(&mut self, products: u64) {
        let _ = products;
    }
    /// Point `done` of the `total` points of the segment is measured.
    fn point(&mut self, done: usize, total: usize) {
        let _ = (done, total);
    }
}

/// Reports nothing.
impl SharpnessObserver for csam_train::train::Silent {}

/// The file name of the report in the run directory.
pub const SHARPNESS_JSON: &str = "sharpness.json";

impl SharpnessSettings {
    /// Refuses settings that measure nothing, naming the field.
    pub fn validate(&self) -> std::result::Result<(), ConfigError> {
        if let Err(CurvatureError::Setting { key, value, reason }) = self.power.validate() {
            return Err(ConfigError::invalid(key, value, reason));
        }
        for (key, count) in [("examples", self.examples), ("batch_size", self.batch_size)] {
            if count == 0 {
                return Err(ConfigError::invalid(key, 0, "must be at least 1"));
            }
        }
        Ok(())
    }
}

/// What is measured, and how (saved in the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharpnessSettings {
    pub checkpoint: Checkpoint,
    /// Training examples in the sample (drawn without replacement by `seed`).
    pub examples: usize,
    /// Examples per forward pass (memory only; the loss is the same).
    pub batch_size: usize,
    pub power: PowerSettings,
    /// Interior points of the segment theta -> theta~.
    pub segment_points: usize,
    /// Seed of the example sample and of the start vector.
    pub seed: u64,
    /// Perturbation radius; None: the run's `rho`.
    pub rho: Option<f64>,
}

impl Default for SharpnessSettings {
    fn default() -> Self {
        SharpnessSettings {
            checkpoint: Checkpoint::Best,
            examples: 1000,
            batch_size: 250,
            power: PowerSettings::default(),
            segment_points: 3,
            seed: 0,
            rho: None,
        }
    }
}

/// The eigenvalues at one point of the segment.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PathPoint {
    /// `theta' = (1 - t) theta + t theta~`.
    pub t: f64,
    /// `L(theta')`.
    pub loss: f64,
    pub kappa_max: Eigen,
    pub kappa_min: Eigen,
    /// `kappa_min(theta') >= -||g|| / rho`.
    pub assumption_holds: bool,
}

/// `sharpness.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharpnessReport {
    pub settings: SharpnessSettings,
    /// The run's optimizer (sgd, sam, ...).
    pub optimizer: String,
    /// The rho that built theta~.
    pub rho: f64,
    /// Training examples the loss averages over (`settings.examples`; more
    /// than the training split holds is refused).
    pub n_examples: usize,
    /// Number of weights (dimension of the Hessian).
    pub n_weights: i64,
    pub device: String,
    /// `||grad L(theta)||`.
    pub grad_norm: f64,
    /// Lemma 1's threshold `-||g|| / rho`.
    pub kappa_min_threshold: f64,
    /// `kappa_max` at theta (the sharpness of the paper's table).
    pub kappa_max: f64,
    /// `kappa_min` at theta and at theta~.
    pub kappa_min_theta: f64,
    pub kappa_min_theta_tilde: f64,
    /// Every point of the segment, t = 0 first, t = 1 last.
    pub path: Vec<PathPoint>,
    /// The assumption held at every point of the path.
    pub assumption_holds_on_path: bool,
    pub wall_time_s: f64,
}

/// Measures the run in `run` and writes `sharpness.json` there (atomically;
/// an existing report is refused unless `force`). `device` None: the default device.
pub fn measure_run(
    run: &Path,
    settings: &SharpnessSettings,
    device: Option<&str>,
    force: bool,
    observer: &mut dyn SharpnessObserver,
) -> Result<SharpnessReport> {
    let started = std::time::Instant::now();
    let out = run.join(SHARPNESS_JSON);
    check_request(run, settings, &out, force)?;
    let trained = TrainedRun::open(run)?;
    let spec = &trained.spec;
    let device = parse_device(device).map_err(|e| TrainError::Device(e.text, e.reason))?;
    let run_rho = spec.optim.rule.sharpness().map_or(0.0, |s| s.rho);
    let rho = settings.rho.unwrap_or(run_rho);
    if !(rho.is_finite() && rho > 0.0) {
        let reason = match settings.rho {
            Some(_) => "theta~ needs a perturbation radius > 0",
            None => "the run has no perturbation radius (it was not trained with SAM); give one",
        };
        return Err(ConfigError::invalid("rho", rho, reason).into());
    }
    // Refused before the data set is loaded (`network` below checks again).
    trained.weights(settings.checkpoint)?;
    let splits = spec.data.splits(spec.seed)?;
    let train = &splits.train;
    if settings.examples > train.n {
        return Err(LabError::TooManyExamples {
            asked: settings.examples,
            available: train.n,
        });
    }
    let normalization = &trained.normalization;
    let shape = (input_shape(train), train.n_classes);
    let (vs, model) = trained.network(shape, device, settings.checkpoint)?;
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed);
    let mut chosen = sample(&mut rng, train.n, settings.examples).into_vec();
    chosen.sort_unstable();
    let subset = train.select(&chosen);
    let loader = BatchLoader::new(
        &subset,
        normalization,
        LoaderOptions::evaluation(settings.batch_size, device),
    )?;
    let surface = LossSurface::new(&model, vs.trainable_variables(), loader.epoch(0).collect())?;

    let total_points = settings.segment_points + 2;
    let mut products = 0u64;
    let (kind, device) = surface.options();
    tch::manual_seed(settings.seed as i64);
    let start = Tensor::randn([surface.dim()], (kind, Device::Cpu)).to_device(device);
    let theta = surface.weights()?;
    let gradient = surface.gradient()?;
    let grad_norm = gradient.norm().double_value(&[]);
    let theta_tilde = &theta + &gradient * (rho / (grad_norm + 1e-12));
    let threshold = -grad_norm / rho;
    let steps = settings.segment_points + 1;
    let mut path = Vec::with_capacity(steps + 1);
    for i in 0..=steps {
        let t = i as f64 / steps as f64;
        surface.set_weights(&(&theta * (1.0 - t) + &theta_tilde * t))?;
        let mut apply = |v: &Tensor| {
            products += 1;
            observer.product(products);
            surface.hessian_vector_product(v)
        };
        let kappa_max = top_eigenvalue(&mut apply, &start, settings.power)?;
        let kappa_min = lanczos_min(&mut apply, &start, settings.power)?;
        path.push(PathPoint {
            t,
            loss: surface.loss()?,
            kappa_max,
            kappa_min,
            assumption_holds: kappa_min.value >= threshold,
        });
        observer.point(path.len(), total_points);
    }
    surface.set_weights(&theta)?;
    // Invariant: the path holds t = 0 and t = 1.
    let (first, last) = (path[0], path[path.len() - 1]);
    let report = SharpnessReport {
        settings: settings.clone(),
        optimizer: spec.optim.rule.family().to_string(),
        rho,
        n_examples: subset.n,
        n_weights: surface.dim(),
        device: csam_nn::device::device_name(device),
        grad_norm,
        kappa_min_threshold: threshold,
        kappa_max: first.kappa_max.value,
        kappa_min_theta: first.kappa_min.value,
        kappa_min_theta_tilde: last.kappa_min.value,
        assumption_holds_on_path: path.iter().all(|p| p.assumption_holds),
        path,
        wall_time_s: started.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_vec_pretty(&report).map_err(|e| TrainError::Corrupt {
        path: out.clone(),
        message: e.to_string(),
    })?;
    write_atomic(&out, &json)?;
    Ok(report)
}

/// Refuses, before any work: a directory that holds no run, bad settings,
/// and an existing report without `force`.
fn check_request(run: &Path, settings: &SharpnessSettings, out: &Path, force: bool) -> Result<()> {
    if !run.is_dir() {
        return Err(TrainError::NoSuchRun {
            dir: run.to_path_buf(),
        }
        .into());
    }
    settings.validate()?;
    if out.exists() && !force {
        return Err(
            TrainError::refused(format!("{} exists", out.display()), Remedy::Replace).into(),
        );
    }
    Ok(())
}
