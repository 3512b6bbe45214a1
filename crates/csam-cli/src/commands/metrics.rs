//! `csam metrics`: calibration metrics of saved predictions, optionally after
//! post-hoc calibrators fitted on validation predictions (conventions of both:
//! crates/csam-calib/README.md).

mod inputs;
mod outputs;
mod report;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use csam_calib::binning::{AdaptiveVariant, EdgeConvention};
use csam_calib::calibrators::registry::{self, CalibratorKind, FittedCalibrator};
use csam_calib::calibrators::temperature::TemperatureObjective;
use csam_calib::io::Scores;
use csam_calib::metrics::summary::{
    bootstrap_summary, par_summarize, MetricOptions, MetricSummary,
};
use csam_calib::metrics::tce::tce;
use csam_calib::metrics::BootstrapOptions;
use csam_calib::parallel::Threads;

use inputs::{with_scores, PredictionSet, ScoreKind, Source};
use report::{ColumnReport, Files, Meta, Report, JSON_SCHEMA, SCHEMA};

/// Calibrators fitted when validation data is given and `--calibrate` is not.
const DEFAULT_CALIBRATORS: &[CalibratorKind] = &[
    CalibratorKind::Temperature,
    CalibratorKind::Isotonic,
    CalibratorKind::Histogram,
];

/// Arguments of `csam metrics`.
#[derive(Args)]
#[command(
    about = "Calibration metrics of saved predictions; with validation predictions, also after post-hoc calibration",
    long_about = "Reads test predictions (an N x K matrix of logits or probabilities) and N integer \
labels from .npy, .npz, .safetensors or .csv/.tsv/.txt files and prints accuracy, ECE (l1, l2, \
max), AdaECE, classwise ECE, NLL, Brier and AUROCs. One .safetensors file can hold both: the \
tensor `logits` or `probs` (or --array NAME) and the tensor `labels` (or --labels-array NAME); \
--labels may then be left out. float16 (.npy <f2, safetensors F16) and bfloat16 (safetensors \
BF16) predictions are widened to float32 once; float32 predictions are measured in float32 \
(logits softmaxed in float32), float64 ones in float64. With --val-preds/--val-labels it also \
reports TCE (ECE after temperature scaling fitted on the validation set) and fits the \
--calibrate methods on the validation set (in float64), reporting the test metrics after each. \
--bootstrap N adds a bias-corrected and accelerated (BCa) bootstrap interval to every metric.",
    after_long_help = JSON_SCHEMA
)]
pub struct MetricsArgs {
    /// Test predictions (N x K): .npy, .npz, .safetensors, .csv/.tsv/.txt
    #[arg(value_name = "PREDS", required_unless_present = "preds_flag")]
    preds: Option<PathBuf>,
    /// Test predictions, as a flag (instead of the positional PREDS)
    #[arg(long = "preds", value_name = "FILE", conflicts_with = "preds")]
    preds_flag: Option<PathBuf>,
    /// Test labels (N integers in 0..K) [default for a .safetensors PREDS: PREDS itself]
    #[arg(long, value_name = "FILE")]
    labels: Option<PathBuf>,
    #[command(flatten)]
    kind: KindArgs,
    /// Array (tensor) holding the predictions inside .npz and .safetensors files
    /// (default: the only one, or `logits` / `probs`)
    #[arg(long, value_name = "NAME")]
    array: Option<String>,
    /// Array (tensor) holding the labels inside .npz and .safetensors files
    /// (default: the only one, or `labels`)
    #[arg(long, value_name = "NAME")]
    labels_array: Option<String>,
    /// Validation predictions: enables TCE and --calibrate
    #[arg(long, value_name = "FILE")]
    val_preds: Option<PathBuf>,
    /// Validation labels [default for a .safetensors --val-preds: that file]
    #[arg(long, value_name = "FILE", requires = "val_preds")]
    val_labels: Option<PathBuf>,
    /// Calibrators to fit on the validation set, comma-separated, or `none`
    /// [default with validation data: temperature,isotonic,histogram]
    /// [possible: temperature, vector, matrix, dirichlet, histogram, isotonic, platt]
    #[arg(long, value_name = "LIST", requires = "val_preds", value_parser = parse_calibrators)]
    calibrate: Option<CalibratorList>,
    /// Number of bins of every binned metric
    #[arg(long, value_name = "N", default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..=csam_calib::binning::MAX_BINS as i64))]
    bins: u32,
    /// Equal-width bin edges: (lo, hi] (paper, default) or [lo, hi) with an extra bin for confidence 1
    #[arg(long, value_enum, default_value_t = Edges::RightClosed)]
    edges: Edges,
    /// Equal-mass (AdaECE) bins: interpolated edges (paper, default) or equal-count chunks
    #[arg(long, value_enum, default_value_t = Adaptive::Interpolated)]
    adaptive: Adaptive,
    /// How the temperature of TCE is fitted on the validation set
    #[arg(long, value_enum, default_value_t = TceObjective::Nll)]
    tce_objective: TceObjective,
    /// Largest accepted |row sum - 1| of --probs input
    #[arg(long, value_name = "TOL", default_value_t = MetricOptions::default().tolerance)]
    tolerance: f64,
    /// Add a bootstrap BCa interval to every metric, from N resamples
    /// of the test rows (at least 2; 1000 is usual)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(2..=csam_calib::metrics::bootstrap::MAX_RESAMPLES as u64))]
    bootstrap: Option<u64>,
    /// Coverage of the --bootstrap intervals, in (0, 1)
    #[arg(long, value_name = "LEVEL", default_value_t = BootstrapOptions::default().level, requires = "bootstrap")]
    confidence: f64,
    /// Seed of the --bootstrap resampling: the same seed gives the same intervals
    #[arg(long, value_name = "SEED", default_value_t = BootstrapOptions::default().seed, requires = "bootstrap")]
    seed: u64,
    /// Threads for the binned metrics and the misclassification AUROC (rows
    /// split into contiguous chunks). 1, the default, gives the same bits on
    /// any machine; more can change ECE and classwise ECE in the last digits
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Print the results as JSON (schema below) instead of a table
    #[arg(long)]
    json: bool,
    /// Write reliability diagrams and confidence histograms (SVG and PNG) for raw and each calibrator into DIR
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Write each fitted calibrator as DIR/NAME.json
    #[arg(long, value_name = "DIR", requires = "val_preds")]
    save_calibrators: Option<PathBuf>,
}

/// `--logits` or `--probs`: exactly one.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct KindArgs {
    /// The prediction files hold logits (softmax gives the probabilities)
    #[arg(long)]
    logits: bool,
    /// The prediction files hold probabilities (rows sum to 1, entries in [0, 1])
    #[arg(long)]
    probs: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Edges {
    /// Bins (lo, hi]; a confidence of exactly 0 falls in no bin
    RightClosed,
    /// Bins [lo, hi) plus one bin for confidence exactly 1
    LeftClosed,
}

#[derive(Clone, Copy, ValueEnum)]
enum Adaptive {
    /// Edges interpolated between sorted confidences; the smallest is not counted
    Interpolated,
    /// Equal-count chunks of the sorted samples; every sample counted
    Chunked,
}

#[derive(Clone, Copy, ValueEnum)]
enum TceObjective {
    /// Minimum validation NLL
    Nll,
    /// Minimum validation ECE over T = 0.1, 0.2, ..., 10
    EceGrid,
}

/// A parsed `--calibrate` list.
#[derive(Clone)]
struct CalibratorList(Vec<CalibratorKind>);

fn parse_calibrators(list: &str) -> Result<CalibratorList, String> {
    if list.trim().eq_ignore_ascii_case("none") {
        return Ok(CalibratorList(Vec::new()));
    }
    let mut kinds: Vec<CalibratorKind> = Vec::new();
    for name in list.split(',') {
        let kind: CalibratorKind = name
            .parse()
            .map_err(|e: csam_calib::CalibError| e.to_string())?;
        if kinds.contains(&kind) {
            return Err(format!("'{kind}' is listed twice"));
        }
        kinds.push(kind);
    }
    Ok(CalibratorList(kinds))
}

impl MetricsArgs {
    fn options(&self) -> MetricOptions {
        MetricOptions {
            n_bins: self.bins as usize,
            edges: match self.edges {
                Edges::RightClosed => EdgeConvention::RightClosed,
                Edges::LeftClosed => EdgeConvention::LeftClosedWithOneBin,
            },
            adaptive: match self.adaptive {
                Adaptive::Interpolated => AdaptiveVariant::Interpolated,
                Adaptive::Chunked => AdaptiveVariant::Chunked,
            },
            tolerance: self.tolerance,
        }
    }

    fn objective(&self) -> TemperatureObjective {
        match self.tce_objective {
            TceObjective::Nll => TemperatureObjective::Nll,
            TceObjective::EceGrid => TemperatureObjective::EceGrid,
        }
    }

    fn score_kind(&self) -> ScoreKind {
        if self.kind.probs {
            ScoreKind::Probs
        } else {
            ScoreKind::Logits
        }
    }

    fn preds_path(&self) -> anyhow::Result<&PathBuf> {
        // clap requires one of the two; this is a fallback message, not a panic.
        self.preds_flag
            .as_ref()
            .or(self.preds.as_ref())
            .context("no test predictions given (PREDS or --preds FILE)")
    }

    /// The test labels: `--labels`, else a `.safetensors` PREDS itself.
    fn labels_path<'a>(&'a self, preds: &'a Path) -> anyhow::Result<&'a Path> {
        match &self.labels {
            Some(labels) => Ok(labels),
            None if is_safetensors(preds) => Ok(preds),
            None => bail!(
                "--labels FILE is required: the test labels (only a .safetensors PREDS holds its own)"
            ),
        }
    }

    /// The validation files: `--val-labels`, else a `.safetensors`
    /// `--val-preds` itself.
    fn validation_paths(&self) -> anyhow::Result<Option<(&Path, &Path)>> {
        let Some(preds) = &self.val_preds else {
            return Ok(None);
        };
        match &self.val_labels {
            Some(labels) => Ok(Some((preds, labels))),
            None if is_safetensors(preds) => Ok(Some((preds, preds))),
            None => bail!(
                "--val-preds needs --val-labels FILE (only a .safetensors file holds its own labels)"
            ),
        }
    }

    /// `--bootstrap`, `--confidence` and `--seed`, checked.
    fn bootstrap(&self) -> anyhow::Result<Option<BootstrapOptions>> {
        let Some(resamples) = self.bootstrap else {
            return Ok(None);
        };
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            bail!(
                "--confidence must be in (0, 1), e.g. 0.95 for a 95 % interval; got {}",
                self.confidence
            );
        }
        let resamples =
            usize::try_from(resamples).context("--bootstrap is too large for this machine")?;
        Ok(Some(BootstrapOptions {
            resamples,
            level: self.confidence,
            seed: self.seed,
        }))
    }

    fn calibrators(&self) -> Vec<CalibratorKind> {
        match (&self.calibrate, &self.val_preds) {
            (Some(list), _) => list.0.clone(),
            (None, Some(_)) => DEFAULT_CALIBRATORS.to_vec(),
            (None, None) => Vec::new(),
        }
    }
}

/// One column of results: `raw` or a calibrator, with its test probabilities.
struct Column<'a> {
    name: String,
    probs: Cow<'a, Scores>,
    summary: MetricSummary,
}

/// A path as the JSON `files` member shows it.
fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// `true` for a `.safetensors` path, which can hold predictions and labels.
fn is_safetensors(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("safetensors"))
}

/// Runs `csam metrics`.
pub fn run(args: &MetricsArgs) -> anyhow::Result<()> {
    if !(args.tolerance.is_finite() && args.tolerance >= 0.0) {
        bail!(
            "--tolerance must be a non-negative number, got {}",
            args.tolerance
        );
    }
    let resampling = args.bootstrap()?;
    let options = args.options();
    let preds = args.preds_path()?;
    let labels = args.labels_path(preds)?;
    let validation_paths = args.validation_paths()?;
    let (test, validation) = load_sets(args, preds, labels, validation_paths)?;

    let threads = Threads::new(args.threads as usize)?;
    let mut columns = vec![raw_column(
        &test,
        validation.as_ref(),
        &options,
        args.objective(),
        threads,
    )?];
    let mut fitted = Vec::new();
    if let Some(val) = &validation {
        for kind in args.calibrators() {
            let (column, model) = calibrated_column(kind, val, &test, &options, threads)?;
            columns.push(column);
            fitted.push(model);
        }
    }

    if let Some(dir) = &args.plot {
        outputs::create_dir(dir, "--plot")?;
        let mut count = 0;
        for column in &columns {
            let binning = options.equal_width();
            let (name, ece) = (&column.name, column.summary.ece);
            count += with_scores!(column.probs.as_ref(), |m| outputs::write_plots(
                dir,
                name,
                m.view(),
                &test.labels,
                &binning,
                ece
            ))?
            .len();
        }
        eprintln!("wrote {count} plots to {}", dir.display());
    }
    if let Some(dir) = &args.save_calibrators {
        outputs::create_dir(dir, "--save-calibrators")?;
        for model in &fitted {
            let path = outputs::save_calibrator(dir, model)?;
            eprintln!("wrote {}", path.display());
        }
    }

    let files = Files {
        preds: shown(preds),
        labels: shown(labels),
        val_preds: validation_paths.map(|(p, _)| shown(p)),
        val_labels: validation_paths.map(|(_, l)| shown(l)),
    };
    let meta = meta(
        args,
        files,
        &test,
        validation.as_ref(),
        &columns,
        resampling,
    );
    let order: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    let mut reports = BTreeMap::new();
    for column in columns {
        let ci = match &resampling {
            Some(resampling) => Some(
                with_scores!(column.probs.as_ref(), |m| bootstrap_summary(
                    m.view(),
                    &test.labels,
                    &options,
                    resampling
                ))
                .with_context(|| format!("bootstrap intervals of the {} metrics", column.name))?,
            ),
            None => None,
        };
        let summary = column.summary;
        reports.insert(column.name, ColumnReport { summary, ci });
    }
    let output = if args.json {
        let report = Report {
            schema: SCHEMA,
            csam_version: env!("CARGO_PKG_VERSION"),
            meta,
            columns: reports,
        };
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        format!(
            "{}\n{}",
            report::table_caption(&meta),
            report::table(&reports, &order)
        )
    };
    super::print_stdout(&output)?;
    Ok(())
}

/// Loads the test set and, when given, the validation set (same `K` as test).
/// The float64 logits are kept only when validation data will fit calibrators.
fn load_sets(
    args: &MetricsArgs,
    preds: &Path,
    labels: &Path,
    validation_paths: Option<(&Path, &Path)>,
) -> anyhow::Result<(PredictionSet, Option<PredictionSet>)> {
    let kind = args.score_kind();
    let with_logits = validation_paths.is_some();
    let test_source = Source {
        role: "test",
        preds,
        labels,
        preds_array: args.array.as_deref(),
        labels_array: args.labels_array.as_deref(),
        same_classes_as: None,
    };
    let test = inputs::load(&test_source, kind, args.tolerance, with_logits)?;
    let validation = match validation_paths {
        Some((val_preds, val_labels)) => {
            let val_source = Source {
                role: "validation",
                preds: val_preds,
                labels: val_labels,
                same_classes_as: Some((test.n_classes(), preds)),
                ..test_source
            };
            Some(inputs::load(&val_source, kind, args.tolerance, true)?)
        }
        None => None,
    };
    Ok((test, validation))
}

/// Fits `kind` on the validation set and measures the calibrated test predictions.
fn calibrated_column(
    kind: CalibratorKind,
    val: &PredictionSet,
    test: &PredictionSet,
    options: &MetricOptions,
    threads: Threads,
) -> anyhow::Result<(Column<'static>, FittedCalibrator)> {
    let model = registry::fit(kind, val.logits()?.view(), &val.labels)
        .with_context(|| format!("fitting {kind} on the validation set"))?;
    let probs = model
        .transform(test.logits()?.view())
        .with_context(|| format!("applying {kind} to the test predictions"))?;
    let summary = par_summarize(probs.view(), &test.labels, options, threads)
        .with_context(|| format!("metrics after {kind}"))?;
    let column = Column {
        name: kind.name().to_string(),
        probs: Cow::Owned(Scores::F64(probs)),
        summary,
    };
    Ok((column, model))
}

/// The `meta` member of the report: sizes, settings and input files.
fn meta(
    args: &MetricsArgs,
    files: Files,
    test: &PredictionSet,
    validation: Option<&PredictionSet>,
    columns: &[Column<'_>],
    bootstrap: Option<BootstrapOptions>,
) -> Meta {
    Meta {
        n: test.labels.len(),
        k: test.n_classes(),
        n_val: validation.map(|v| v.labels.len()),
        bins: args.bins as usize,
        edges: args.edges.to_possible_value_name(),
        adaptive: args.adaptive.to_possible_value_name(),
        tolerance: args.tolerance,
        input: args.score_kind().name(),
        dtype: match test.probs {
            Scores::F32(_) => "float32",
            Scores::F64(_) => "float64",
        },
        tce_objective: validation.map(|_| args.tce_objective.to_possible_value_name()),
        calibrators: columns[1..].iter().map(|c| c.name.clone()).collect(),
        bootstrap,
        files,
    }
}

/// Metrics of the test predictions as given, with TCE when validation data exists.
fn raw_column<'a>(
    test: &'a PredictionSet,
    validation: Option<&PredictionSet>,
    options: &MetricOptions,
    objective: TemperatureObjective,
    threads: Threads,
) -> anyhow::Result<Column<'a>> {
    let mut summary = with_scores!(&test.probs, |m| par_summarize(
        m.view(),
        &test.labels,
        options,
        threads
    ))
    .context("metrics of the test predictions")?;
    if let Some(val) = validation {
        summary.tce = Some(
            tce(
                val.logits()?.view(),
                &val.labels,
                test.logits()?.view(),
                &test.labels,
                options,
                objective,
            )
            .context("TCE (temperature fitted on the validation set)")?,
        );
    }
    Ok(Column {
        name: "raw".to_string(),
        probs: Cow::Borrowed(&test.probs),
        summary,
    })
}

/// The command-line spelling of a value-enum variant.
trait PossibleValueName {
    fn to_possible_value_name(&self) -> String;
}

impl<T: ValueEnum> PossibleValueName for T {
    fn to_possible_value_name(&self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }
}
