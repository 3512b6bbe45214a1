//! `csam eval`: the metric summary of a trained run's best model on any data
//! set (its test split; e.g. a corrupted or shifted variant), saved as
//! `eval-NAME.json` in the run directory.

use std::path::PathBuf;

use csam_calib::metrics::summary::MetricSummary;
use serde::{Deserialize, Serialize};
use tch::nn::VarStore;

use super::atomic::write_atomic;
use super::config::TrainConfig;
use super::error::{Result, TrainError};
use super::rundir::RunDir;
use super::session::{build_network, invalid, predict_dataset, shape_of};
use crate::data::{self, DatasetSpec, Normalization};
use crate::device::{device_name, parse_device};
use crate::model::ModelKind;

/// What `csam eval` asks for.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    /// The run directory of a finished (or at least once-checkpointed) run.
    pub run: PathBuf,
    /// Data set spec; its test split is evaluated.
    pub data: String,
    /// Report name (`eval-NAME.json`); derived from the spec when None.
    pub name: Option<String>,
    /// Replace an existing report of the same name.
    pub force: bool,
    /// Device (None: the default device).
    pub device: Option<String>,
    /// Evaluation batch size.
    pub batch_size: usize,
}

/// The content of `eval-NAME.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Version of csam that evaluated.
    pub csam_version: String,
    /// The data set spec.
    pub data: String,
    /// The weights file evaluated.
    pub weights: PathBuf,
    /// Model name.
    pub model: String,
    /// Device of the evaluation.
    pub device: String,
    /// Number of examples.
    pub n: usize,
    /// Metrics of the softmax of the model's logits (fractions).
    pub metrics: MetricSummary,
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

/// Evaluates the run's best model (`model.safetensors`) on the test split of
/// `request.data` and writes the report atomically. Refuses to overwrite an
/// existing report unless `force`.
pub fn evaluate_run(request: &EvalRequest) -> Result<(EvalReport, PathBuf)> {
    let run_dir = RunDir::new(&request.run);
    let name = request
        .name
        .clone()
        .unwrap_or_else(|| report_name(&request.data));
    if name.is_empty() || name != report_name(&name) {
        return Err(invalid(
            "name",
            &name,
            "use letters, digits, '.', '_' and '-' only",
        ));
    }
    let report_path = run_dir.eval_report(&name);
    if report_path.exists() && !request.force {
        return Err(TrainError::RunDir(format!(
            "{} exists; pass --force to replace it or --name to pick another name",
            report_path.display()
        )));
    }
    let config_path = run_dir.config();
    let text = std::fs::read_to_string(&config_path).map_err(TrainError::io(
        "read the run's configuration (is --run a csam run directory?)",
        &config_path,
    ))?;
    let config = TrainConfig::from_toml(&text, &config_path.display().to_string())?;
    let normalization = read_normalization(&run_dir)?;
    let weights = run_dir.best_model();
    if !weights.exists() {
        return Err(TrainError::RunDir(format!(
            "{} does not exist: the run has not finished an epoch",
            weights.display()
        )));
    }
    let device = parse_device(request.device.as_deref())
        .map_err(|e| TrainError::Device(e.text, e.reason))?;
    let spec: DatasetSpec = request
        .data
        .parse()
        .map_err(|e| invalid("data", &request.data, e))?;
    let kind: ModelKind = config
        .model
        .parse()
        .map_err(|e| invalid("model", &config.model, e))?;
    let dataset = data::load(&spec)
        .map_err(|e| TrainError::Data(e.to_string()))?
        .test;
    if dataset.channels != normalization.mean.len() {
        return Err(TrainError::Data(format!(
            "{} has {} channels but the run was trained on {}",
            request.data,
            dataset.channels,
            normalization.mean.len()
        )));
    }
    let mut vs = VarStore::new(device);
    let model = build_network(
        kind,
        &vs,
        shape_of(&dataset),
        dataset.n_classes,
        &config.model_options(),
    )?;
    vs.load(&weights).map_err(|e| {
        TrainError::Data(format!(
            "the weights in {} do not fit {} on {} ({e}); is the data set's shape and class count that of the training data?",
            weights.display(),
            config.model,
            request.data
        ))
    })?;
    let predictions =
        predict_dataset(&model, &dataset, &normalization, request.batch_size, device)?;
    let report = EvalReport {
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        data: request.data.clone(),
        weights,
        model: config.model.clone(),
        device: device_name(device),
        n: predictions.labels.len(),
        metrics: predictions.summarize()?,
    };
    let json = serde_json::to_vec_pretty(&report).map_err(|e| TrainError::Corrupt {
        path: report_path.clone(),
        message: e.to_string(),
    })?;
    write_atomic(&report_path, &json)?;
    Ok((report, report_path))
}

fn read_normalization(run_dir: &RunDir) -> Result<Normalization> {
    let path = run_dir.normalization();
    let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
    serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path,
        message: e.to_string(),
    })
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
