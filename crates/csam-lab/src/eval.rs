//! `csam eval`: the metric summary of a trained run's best model, of a deep
//! ensemble of runs or of MC-Dropout, on any data set (its test split), and
//! optionally on a CIFAR-10-C corruption directory and against an
//! out-of-distribution set; saved as `eval-NAME.json` in the (first) run
//! directory.

use std::path::PathBuf;
use std::sync::Arc;

use csam_calib::metrics::summary::{summarize, MetricSummary};
use serde::{Deserialize, Serialize};

use crate::error::{LabError, Result};
use crate::shift::eval_set::EvalSet;
use crate::shift::predictor::{Predictor, Sampling};
use crate::shift::report::{
    evaluate_corruptions, ood_report, CorruptionReport, OodReport, ShiftReference,
};
use csam_data::streaming::{ImageFiles, ImageNetSplits};
use csam_data::{self as data, DatasetSpec};
use csam_nn::device::{device_name, parse_device};
use csam_train::spec::ConfigError;
use csam_train::spec::Runtime;
use csam_train::train::atomic::write_atomic;
use csam_train::train::error::{Remedy, TrainError};
use csam_train::train::TrainedRun;

/// What `csam eval` asks for.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    /// Run directories of finished (or at least once-checkpointed) runs:
    /// one run, or the members of a deep ensemble.
    pub runs: Vec<PathBuf>,
    /// Data set spec whose test split is evaluated; None: the first run's
    /// own training data.
    pub data: Option<String>,
    /// A CIFAR-10-C layout directory (ImageNet-C's for an `imagenet:` run)
    /// to evaluate as well.
    pub corruptions: Option<PathBuf>,
    /// An out-of-distribution data set spec (its test split) for the OOD AUROC.
    pub ood: Option<String>,
    /// MC-Dropout with this many passes (None: dropout off).
    pub mc_dropout: Option<usize>,
    /// Seed of the MC-Dropout masks.
    pub seed: u64,
    /// Report name (`eval-NAME.json`); derived from the request when None.
    pub name: Option<String>,
    /// Replace an existing report of the same name.
    pub force: bool,
    /// Device (None: the default device).
    pub device: Option<String>,
    /// Evaluation batch size.
    pub batch_size: usize,
    /// Threads that decode a streamed data set (`imagenet:`, ImageNet-C);
    /// None: one per core.
    pub workers: Option<usize>,
}

/// The content of `eval-NAME.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Version of csam that evaluated.
    pub csam_version: String,
    /// The data set spec.
    pub data: String,
    /// The weights files evaluated (one per ensemble member).
    pub weights: Vec<PathBuf>,
    /// Model name.
    pub model: String,
    /// `single`, `ensemble` or `mc-dropout`.
    pub method: String,
    /// Forward passes per member (MC-Dropout; 1 otherwise).
    pub passes: usize,
    /// Seed of the MC-Dropout masks (None without MC-Dropout).
    pub seed: Option<u64>,
    /// Device of the evaluation.
    pub device: String,
    /// Number of examples.
    pub n: usize,
    /// Metrics of the predicted probabilities (fractions).
    pub metrics: MetricSummary,
    /// Results per corruption and severity, with `--corruptions`.
    pub corruptions: Option<CorruptionReport>,
    /// OOD AUROCs, with `--ood`.
    pub ood: Option<OodReport>,
}

/// A file-name-safe report name from a data set spec: letters, digits, `.`,
/// `_` and `-` kept, everything else (`:`, `/`, `,`) turned into `-`.
pub fn report_name(spec: &str) -> String {
    let name: String = spec
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    name.trim_matches('-').to_string()
}

/// The default report name: the data set, then `ensembleN` / `mcdropoutN`,
/// `corrupt-DIRNAME` and `ood-SPEC` for what the request adds.
fn default_name(request: &EvalRequest, data: &str) -> String {
    let mut parts = vec![data.to_string()];
    if request.runs.len() > 1 {
        parts.push(format!("ensemble{}", request.runs.len()));
    }
    if let Some(passes) = request.mc_dropout {
        parts.push(format!("mcdropout{passes}"));
    }
    if let Some(dir) = &request.corruptions {
        let stem = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        parts.push(format!("corrupt-{stem}"));
    }
    if let Some(ood) = &request.ood {
        parts.push(format!("ood-{ood}"));
    }
    report_name(&parts.join("-"))
}

/// Evaluates the runs' best models (`model.safetensors`) on the test split
/// of the request's data (and corruptions, OOD set) and writes the report
/// atomically into the first run's directory. Refuses to overwrite an
/// existing report unless `force`.
pub fn evaluate_run(request: &EvalRequest) -> Result<(EvalReport, PathBuf)> {
    let runs = request
        .runs
        .iter()
        .map(|dir| TrainedRun::open(dir))
        .collect::<Result<Vec<_>, TrainError>>()?;
    let Some(first) = runs.first() else {
        return Err(LabError::NoRuns);
    };
    let data = request
        .data
        .clone()
        .unwrap_or_else(|| first.spec.data.source.to_string());
    let name = request
        .name
        .clone()
        .unwrap_or_else(|| default_name(request, &data));
    if name.is_empty() || name != report_name(&name) {
        return Err(ConfigError::invalid(
            "name",
            &name,
            "use letters, digits, '.', '_' and '-' only",
        )
        .into());
    }
    let report_path = first.dir.eval_report(&name);
    if report_path.exists() && !request.force {
        return Err(TrainError::refused(
            format!(
                "{} exists (another report name keeps both)",
                report_path.display()
            ),
            Remedy::Replace,
        )
        .into());
    }
    let device = parse_device(request.device.as_deref())
        .map_err(|e| TrainError::Device(e.text, e.reason))?;
    // Both specs are parsed before any work, so a bad --ood is refused at
    // once; `key` names the flag a spec came from in an error.
    let parse = |key: &'static str, text: &str| -> Result<DatasetSpec> {
        text.parse()
            .map_err(|e| ConfigError::invalid(key, text, e).into())
    };
    let data_spec = parse("data", &data)?;
    let ood_spec = request
        .ood
        .as_deref()
        .map(|text| Ok::<_, LabError>((text, parse("ood", text)?)))
        .transpose()?;
    let split_seed = first.spec.data.split_seed(first.spec.seed);
    let workers = Runtime {
        workers: request.workers,
        ..Runtime::default()
    }
    .data_workers();
    let test = TestPart::load(&data_spec, &data, split_seed)?;
    let sampling = match request.mc_dropout {
        Some(passes) => Sampling::McDropout {
            passes,
            seed: request.seed,
        },
        None => Sampling::Deterministic,
    };
    let model = first.spec.model.arch.to_string();
    // The binning the runs were trained and reported with.
    let options = first.spec.metrics;
    let set = test.set(workers);
    let predictor = Predictor::new(runs, set, &data, sampling, request.batch_size, device)?;
    let probs = predictor.probabilities(set)?;
    let metrics = summarize(probs.view(), set.labels(), &options)?;
    let reference = match &test {
        TestPart::Images(dataset) => ShiftReference::Labels {
            n_classes: dataset.n_classes,
        },
        TestPart::Files { test, held_out } => ShiftReference::Folders {
            classes: &test.classes,
            held_out: Some(held_out),
            workers,
        },
    };
    let corruptions = request
        .corruptions
        .as_deref()
        .map(|dir| evaluate_corruptions(&predictor, dir, &reference, &options))
        .transpose()?;
    let ood = match &ood_spec {
        Some((text, spec)) => {
            let ood_set = TestPart::load(spec, text, split_seed)?;
            let ood_probs = predictor.probabilities(ood_set.set(workers))?;
            Some(ood_report(text, probs.view(), ood_probs.view())?)
        }
        None => None,
    };
    let (method, passes, seed) = match (predictor.sampling(), predictor.n_members()) {
        (Sampling::McDropout { passes, seed }, _) => ("mc-dropout", passes, Some(seed)),
        (Sampling::Deterministic, 1) => ("single", 1, None),
        (Sampling::Deterministic, _) => ("ensemble", 1, None),
    };
    let report = EvalReport {
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        data,
        weights: predictor.runs().map(|r| r.dir.best_model()).collect(),
        model,
        method: method.to_string(),
        passes,
        seed,
        device: device_name(device),
        n: set.len(),
        metrics,
        corruptions,
        ood,
    };
    let json = serde_json::to_vec_pretty(&report).map_err(|e| TrainError::Corrupt {
        path: report_path.clone(),
        message: e.to_string(),
    })?;
    write_atomic(&report_path, &json)?;
    Ok((report, report_path))
}

/// The test part of a data set: in memory, or the image files of an
/// `imagenet:` folder's test part with the validation images held out of it.
enum TestPart {
    Images(data::Dataset),
    Files {
        test: Arc<ImageFiles>,
        held_out: ImageFiles,
    },
}

impl TestPart {
    /// The test part of `spec` (named `name`); an `imagenet:` folder's is
    /// what a run of split seed `split_seed` tested on.
    fn load(spec: &DatasetSpec, name: &str, split_seed: u64) -> Result<TestPart> {
        Ok(match spec {
            DatasetSpec::ImageNet(dir) => {
                let splits = ImageNetSplits::open(dir, name, split_seed)?;
                TestPart::Files {
                    test: Arc::new(splits.test),
                    held_out: splits.val,
                }
            }
            _ => TestPart::Images(data::load(spec)?.test),
        })
    }

    /// The part as a predictor reads it, decoded by `workers` threads where
    /// it is streamed.
    fn set(&self, workers: usize) -> EvalSet<'_> {
        match self {
            TestPart::Images(dataset) => EvalSet::Images(dataset),
            TestPart::Files { test, .. } => EvalSet::Files {
                files: test,
                workers,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::report_name;

    #[test]
    fn report_names_are_file_safe() {
        assert_eq!(report_name("fashion-mnist"), "fashion-mnist");
        assert_eq!(report_name("cifar10:/data/c10"), "cifar10--data-c10");
        assert_eq!(report_name("npy:a.npy,b.npy"), "npy-a.npy-b.npy");
    }
}
