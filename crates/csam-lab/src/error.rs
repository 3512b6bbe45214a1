//! Errors of the experiments on trained runs: what csam-train reports, and
//! what only a comparison, an evaluation or a corruption set can get wrong.

use std::path::PathBuf;

use csam_data::SampleShape;
use csam_train::train::{ConfigError, TrainError};

/// Anything that stops an experiment, an evaluation or a sharpness
/// measurement.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Training, a run directory or a file of a run (see [`TrainError`]).
    #[error(transparent)]
    Train(#[from] TrainError),
    /// A comparison method's own settings do not fit its run.
    #[error("the settings of method {method}: {source}")]
    MethodSettings {
        method: String,
        #[source]
        source: Box<ConfigError>,
    },
    /// A request that needs at least one run got none.
    #[error("no run to evaluate")]
    NoRuns,
    /// A combination of runs (an ensemble of validation predictions) got none.
    #[error("a combination needs a member")]
    NoMembers,
    /// Every run of an experiment diverged, so there is nothing to
    /// tabulate; each run directory keeps its record (`diverged.json`).
    #[error(
        "every run diverged ({runs} of them, each recorded in its diverged.json); the first, \
         {}: {divergence}",
        .dir.display()
    )]
    EveryRunDiverged {
        runs: usize,
        dir: PathBuf,
        divergence: csam_train::train::Divergence,
    },
    /// The grid finished no run, so it has no best point.
    #[error("the grid has no finished run")]
    EmptyGrid,
    /// A training run that stopped before its last epoch.
    #[error("{} stopped after epoch {epoch} without finishing", .dir.display())]
    Stopped { dir: PathBuf, epoch: usize },
    /// A run trained as a non-zero data-parallel rank, which writes no results.
    #[error("{} was trained as data-parallel rank {rank}, which writes no results", .dir.display())]
    ReplicaRank { dir: PathBuf, rank: usize },
    /// A run directory already holds a run trained with other settings.
    #[error(
        "{} was trained with other settings ({}) than this experiment asks for; delete it to \
         retrain it",
        .dir.display(),
        .changed.join(", ")
    )]
    OtherSettings { dir: PathBuf, changed: Vec<String> },
    /// A cluster plan that has not been written.
    #[error("{} not found: write the plan first (the same command with --plan)", .path.display())]
    NoPlan { path: PathBuf },
    /// A report asked of a directory that holds no experiment.
    #[error(
        "{} holds neither a comparison (compare.json) nor a sweep (sweep.json)",
        .dir.display()
    )]
    NotAnExperiment { dir: PathBuf },
    /// A comparison's results that lack a run its settings name.
    #[error("results.json has no run of {method} seed {seed}")]
    MissingResult { method: String, seed: u64 },
    /// A figure whose SVG could not be embedded in a report.
    #[error("figure {stem}: the SVG is not UTF-8: {source}")]
    SvgNotUtf8 {
        stem: String,
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// A data set with no training part was asked for a validation size.
    #[error("{data} has no training part; it cannot be trained on")]
    NoTrainingPart { data: String },
    /// More examples asked of a run's training split than it holds.
    #[error("{asked} examples asked for, but the run's training split has {available}")]
    TooManyExamples { asked: usize, available: usize },
    /// Runs combined whose validation splits differ.
    #[error(
        "{} and {} were trained on different validation splits (split seeds {first_seed} and \
         {other_seed}): their validation predictions cannot be combined",
        .first.display(),
        .other.display()
    )]
    OtherSplits {
        first: PathBuf,
        other: PathBuf,
        first_seed: u64,
        other_seed: u64,
    },
    /// Ensemble members that differ in data or model.
    #[error(
        "ensemble members must share data and model: {} has {what} {first_value:?}, {} has \
         {other_value:?}",
        .first.display(),
        .other.display()
    )]
    MembersDiffer {
        what: &'static str,
        first: PathBuf,
        first_value: String,
        other: PathBuf,
        other_value: String,
    },
    /// MC-Dropout asked for no pass.
    #[error("MC-Dropout needs at least 1 pass")]
    NoPasses,
    /// MC-Dropout asked of a model without dropout.
    #[error(
        "{} was trained without dropout (dropout = 0, or a TorchScript module without dropout \
         layers): MC-Dropout needs a model trained with dropout",
        .run.display()
    )]
    NoDropout { run: PathBuf },
    /// Data of another channel count than the run was trained on.
    #[error(
        "{data} has {channels} channels but the run {} was trained on {run_channels} \
         ({trained_on})",
        .run.display()
    )]
    Channels {
        data: String,
        channels: usize,
        run: PathBuf,
        run_channels: usize,
        trained_on: String,
    },
    /// Data labelled with more classes than the run's model outputs.
    #[error(
        "{data} has labels up to {} but the run {} outputs {run_classes} classes (labels \
         0..={}, {trained_on})",
        .data_classes - 1,
        .run.display(),
        .run_classes.saturating_sub(1)
    )]
    Classes {
        data: String,
        data_classes: usize,
        run: PathBuf,
        run_classes: usize,
        trained_on: String,
    },
    /// Data of another image shape than the model evaluates.
    #[error(
        "{data} has images of {} (CxHxW) but the model evaluates {reference} ({})",
        chw(.shape),
        chw(.expected)
    )]
    ImageShape {
        data: String,
        shape: SampleShape,
        reference: String,
        expected: SampleShape,
    },
    /// A model whose logits are NaN or infinite on some examples.
    #[error("{bad} of {n} examples of {data} have NaN or infinite logits under {}", .run.display())]
    NonFiniteLogits {
        bad: usize,
        n: usize,
        data: String,
        run: PathBuf,
    },
    /// A corruption set to write whose corruptions need frost textures that
    /// were not given.
    #[error("{}", csam_data::corrupt::FROST_NEEDS_TEXTURES)]
    FrostNeedsTextures,
    /// A directory that is not laid out as a corruption set.
    #[error("{}: {problem}", .path.display())]
    CorruptionLayout {
        path: PathBuf,
        problem: LayoutProblem,
    },
}

/// How a directory departs from the CIFAR-10-C or ImageNet-C layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutProblem {
    /// A CIFAR-10-C layout directory without its labels file.
    #[error(
        "no such file (a corruption set is a CIFAR-10-C layout directory: <corruption>.npy files \
         and labels.npy, as `csam corrupt` writes)"
    )]
    NoLabels,
    /// A CIFAR-10-C layout directory without a corruption file.
    #[error("holds no <corruption>.npy file")]
    NoCorruptionFiles,
    /// A corruption file whose images are not a whole number per severity.
    #[error("{images} images do not split into {severities} severities")]
    UnevenSeverities { images: usize, severities: usize },
    /// An ImageNet-C corruption folder without severity folders.
    #[error(
        "no severity folders 1 to 5 (ImageNet-C's layout is \
         <corruption>/<severity>/<class>/<image>)"
    )]
    NoSeverityFolders,
    /// An ImageNet-C layout directory without a corruption folder.
    #[error("holds no corruption folder")]
    NoCorruptionFolders,
    /// ImageNet-C corruptions with different severity folders.
    #[error("severities {levels:?} of {name} differ from {first_levels:?} of {first_name}")]
    OtherSeverities {
        name: String,
        levels: Vec<u8>,
        first_name: String,
        first_levels: Vec<u8>,
    },
    /// An ImageNet-C layout given to a run that reads CIFAR-10-C's.
    #[error(
        "laid out as ImageNet-C (<corruption>/<severity>/<class>/), which needs a run trained \
         on an imagenet: folder; this run's corruptions are CIFAR-10-C's layout \
         (<corruption>.npy and labels.npy)"
    )]
    ImageNetForArrays,
}

impl LabError {
    /// [`LabError::CorruptionLayout`] of `path`.
    pub fn layout(path: impl Into<PathBuf>, problem: LayoutProblem) -> Self {
        LabError::CorruptionLayout {
            path: path.into(),
            problem,
        }
    }

    /// The training error this is, when it is one (a caller that answers
    /// some [`TrainError`]s itself, such as a refusal, looks through here).
    pub fn as_train(&self) -> Option<&TrainError> {
        match self {
            LabError::Train(error) => Some(error),
            _ => None,
        }
    }
}

/// Errors of csam-train's sources convert through [`TrainError`], so that
/// `?` works on them here too.
macro_rules! through_train_error {
    ($($source:ty),* $(,)?) => {$(
        impl From<$source> for LabError {
            fn from(error: $source) -> Self {
                LabError::Train(TrainError::from(error))
            }
        }
    )*};
}

through_train_error!(
    ConfigError,
    tch::TchError,
    csam_data::DataError,
    csam_nn::model::ModelError,
    csam_nn::model::weights::WeightsError,
    csam_nn::optim::OptimError,
    csam_nn::loss::LossError,
    csam_nn::curvature::CurvatureError,
    csam_calib::CalibError,
);

/// A `C x H x W` shape in words.
fn chw(shape: &SampleShape) -> String {
    format!("{}x{}x{}", shape.0, shape.1, shape.2)
}

/// Result of this crate.
pub type Result<T, E = LabError> = std::result::Result<T, E>;
