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

use indicatif::{ProgressBar, ProgressStyle};
use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::{nn::VarStore, Device, Tensor};

use super::eigen::{lanczos_min, top_eigenvalue, Eigen, PowerSettings};
use super::hessian::LossSurface;
use crate::data::{self, BatchLoader, LoaderOptions, Normalization};
use crate::device::parse_device;
use crate::model::weights::load_safetensors_file;
use crate::spec::RunSpec;
use crate::train::atomic::write_atomic;
use crate::train::rundir::RunDir;
use crate::train::session::{build_network, shape_of};
use crate::train::TrainError;

type Result<T> = std::result::Result<T, TrainError>;

/// The file name of the report in the run directory.
pub const SHARPNESS_JSON: &str = "sharpness.json";

/// Which weights of the run are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointChoice {
    /// `model.safetensors`, best by the validation metric.
    Best,
    /// `model-last.safetensors`, after the last epoch.
    Last,
}

/// What is measured, and how (saved in the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharpnessSettings {
    pub checkpoint: CheckpointChoice,
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
            checkpoint: CheckpointChoice::Best,
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
    show_progress: bool,
) -> Result<SharpnessReport> {
    let started = std::time::Instant::now();
    let run_dir = RunDir::new(run);
    let out = run.join(SHARPNESS_JSON);
    check_request(&run_dir, settings, &out, force)?;
    let config_path = run_dir.config();
    let text =
        std::fs::read_to_string(&config_path).map_err(TrainError::io("read", &config_path))?;
    let spec = RunSpec::from_saved_toml(&text, &config_path.display().to_string())?;
    let device = parse_device(device).map_err(|e| TrainError::Device(e.text, e.reason))?;
    let run_rho = spec.optim.rule.sharpness().map_or(0.0, |s| s.rho);
    let rho = settings.rho.unwrap_or(run_rho);
    if !(rho.is_finite() && rho > 0.0) {
        return Err(TrainError::RunDir(format!(
            "rho = {rho}: theta~ needs a perturbation radius > 0; pass --rho"
        )));
    }
    let weights = match settings.checkpoint {
        CheckpointChoice::Best => run_dir.best_model(),
        CheckpointChoice::Last => run_dir.last_model(),
    };
    if !weights.is_file() {
        return Err(TrainError::RunDir(format!(
            "{} does not exist (the run has not written it yet{})",
            weights.display(),
            match settings.checkpoint {
                CheckpointChoice::Last => "; --checkpoint last needs a finished run",
                CheckpointChoice::Best => "",
            }
        )));
    }
    let source = data::load(&spec.data.source).map_err(|e| TrainError::Data(e.to_string()))?;
    let n_train = source.train.as_ref().map_or(0, |train| train.n);
    let splits = data::split(source, spec.data.val_size.count(n_train), spec.seed)
        .map_err(|e| TrainError::Data(e.to_string()))?;
    let train = &splits.train;
    if settings.examples > train.n {
        return Err(TrainError::RunDir(format!(
            "--examples {} exceeds the run's training split ({} examples)",
            settings.examples, train.n
        )));
    }
    let normalization = read_normalization(&run_dir.normalization())?;

    let vs = VarStore::new(device);
    let model = build_network(
        spec.model.arch,
        &vs,
        shape_of(train),
        train.n_classes,
        &spec.model.options(),
    )?;
    load_safetensors_file(&vs, &weights).map_err(|e| TrainError::Engine(e.to_string()))?;
    let mut rng = ChaCha8Rng::seed_from_u64(settings.seed);
    let mut chosen = sample(&mut rng, train.n, settings.examples).into_vec();
    chosen.sort_unstable();
    let subset = train.select(&chosen);
    let loader = BatchLoader::new(
        &subset,
        &normalization,
        LoaderOptions::evaluation(settings.batch_size, device),
    )
    .map_err(|e| TrainError::Data(e.to_string()))?;
    let surface = LossSurface::new(&model, vs.trainable_variables(), loader.epoch(0).collect())?;

    let progress = Progress::start(show_progress, settings.segment_points + 2);
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
            progress.product();
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
        progress.point();
    }
    surface.set_weights(&theta)?;
    progress.finish();
    // Invariant: the path holds t = 0 and t = 1.
    let (first, last) = (path[0], path[path.len() - 1]);
    let report = SharpnessReport {
        settings: settings.clone(),
        optimizer: spec.optim.rule.family().to_string(),
        rho,
        n_examples: subset.n,
        n_weights: surface.dim(),
        device: crate::device::device_name(device),
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
fn check_request(
    run_dir: &RunDir,
    settings: &SharpnessSettings,
    out: &Path,
    force: bool,
) -> Result<()> {
    let root = run_dir.root().display();
    if !run_dir.root().is_dir() {
        return Err(TrainError::RunDir(format!(
            "--run {root}: no such directory"
        )));
    }
    if !run_dir.config().is_file() {
        return Err(TrainError::RunDir(format!(
            "--run {root}: no config.toml, so this is not a csam run directory"
        )));
    }
    settings.power.validate()?;
    if settings.examples == 0 {
        return Err(TrainError::RunDir("--examples must be at least 1".into()));
    }
    if settings.batch_size == 0 {
        return Err(TrainError::RunDir("--batch-size must be at least 1".into()));
    }
    if out.exists() && !force {
        return Err(TrainError::RunDir(format!(
            "{} exists; refusing to overwrite it (pass --force to replace it)",
            out.display()
        )));
    }
    Ok(())
}

fn read_normalization(path: &Path) -> Result<Normalization> {
    let text = std::fs::read_to_string(path).map_err(TrainError::io("read", path))?;
    serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A bar over the points of the segment, counting Hessian-vector products.
struct Progress {
    bar: ProgressBar,
    products: std::cell::Cell<u64>,
}

impl Progress {
    fn start(visible: bool, points: usize) -> Self {
        let bar = if visible {
            ProgressBar::new(points as u64)
        } else {
            ProgressBar::hidden()
        };
        // Invariant: a literal template.
        bar.set_style(
            ProgressStyle::with_template(
                "sharpness [{bar:30}] point {pos}/{len} {msg} ({elapsed})",
            )
            .expect("valid template"),
        );
        Progress {
            bar,
            products: std::cell::Cell::new(0),
        }
    }

    fn product(&self) {
        self.products.set(self.products.get() + 1);
        self.bar
            .set_message(format!("{} Hessian-vector products", self.products.get()));
    }

    fn point(&self) {
        self.bar.inc(1);
    }

    fn finish(self) {
        self.bar.finish_and_clear();
    }
}
