//! The settings files of earlier releases, read once here: their
//! `compare.json`, `sweep.json` and `grid.json` held the settings every run
//! shared as flat keys at the top level (`data`, `model`, `epochs`,
//! `val_size`, `batch_size`, `lr`, `weight_decay`, `augment`,
//! `track_theory`, `precision`, `metrics`; a grid's without `lr` and
//! `weight_decay`) instead of the nested `base`. Read into the base their
//! runs were built from, an experiment directory of that layout resumes
//! with the same settings given on the command line today (its runs'
//! `config.toml` match), and `csam report` and `--collect` read it.

use serde::Deserialize;
use serde_json::{Map, Value};

use csam_calib::metrics::summary::MetricOptions;
use csam_nn::model::precision::Precision;
use csam_train::spec::{DataSpec, ModelSpec, RunSpec, ValSize};

use super::{default_base, model_named, source_named};

/// The flat keys, as the earlier releases wrote them.
#[derive(Deserialize)]
struct FlatKeys {
    data: String,
    model: String,
    epochs: usize,
    val_size: usize,
    batch_size: usize,
    /// Absent from a grid's file, whose runs each take their pair's.
    #[serde(default)]
    lr: Option<f64>,
    /// Absent from a grid's file, as `lr`.
    #[serde(default)]
    weight_decay: Option<f64>,
    augment: bool,
    /// Absent in files older still: off.
    #[serde(default)]
    track_theory: bool,
    /// Left out of the files when float32.
    #[serde(default)]
    precision: Precision,
    /// Absent in files older still: the default binning.
    #[serde(default)]
    metrics: MetricOptions,
}

/// The base that the flat keys `keys` (the settings file's keys that are
/// not the experiment's own) describe, built as the runs of those releases
/// were built. A missing key, or a data set or model that no longer parses,
/// is refused with a message that names it.
pub(crate) fn base(keys: Map<String, Value>) -> Result<RunSpec, String> {
    let flat: FlatKeys = serde_json::from_value(Value::Object(keys))
        .map_err(|e| format!("settings of an earlier release: {e}"))?;
    let source = source_named(&flat.data).map_err(|e| e.to_string())?;
    let model = model_named(&flat.model).map_err(|e| e.to_string())?;
    let defaults = default_base();
    let mut base = RunSpec::new(DataSpec {
        val_size: ValSize::Count(flat.val_size),
        augment: flat.augment,
        ..DataSpec::new(source)
    });
    base.epochs = flat.epochs;
    base.batch_size = flat.batch_size;
    base.model = ModelSpec {
        precision: flat.precision,
        ..model
    };
    base.optim.lr = flat.lr.unwrap_or(defaults.optim.lr);
    base.optim.weight_decay = flat.weight_decay.unwrap_or(defaults.optim.weight_decay);
    base.track_theory = flat.track_theory;
    base.metrics = flat.metrics;
    Ok(base.normalized())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::compare_dir::CompareDir;
    use crate::experiment::compare_settings::CompareSettings;
    use crate::experiment::grid::settings::GridPoint;
    use crate::experiment::grid::GridSettings;
    use crate::experiment::method::Method;
    use crate::experiment::results::CompareResults;
    use crate::experiment::settings::{differences, read_json};
    use crate::experiment::sweep::SweepSettings;
    use csam_train::spec::OptimizerFamily;

    /// The keys that the earlier releases wrote first in `compare.json` and
    /// `sweep.json` for the defaults: those every run shared, and the seeds.
    macro_rules! flat_defaults {
        () => {
            r#"{
  "data": "fashion-mnist-full",
  "model": "mlp",
  "epochs": 20,
  "seeds": [
    0,
    1,
    2
  ],
  "val_size": 12000,
  "batch_size": 128,
  "lr": 0.05,
  "weight_decay": 0.0005,
  "augment": false,
  "track_theory": false,
  "metrics": {
    "n_bins": 15,
    "edges": "right-closed",
    "adaptive": "interpolated",
    "tolerance": 0.001
  },"#
        };
    }

    /// `compare.json` as the earlier releases wrote it for `csam compare`'s
    /// defaults.
    const COMPARE: &str = concat!(
        flat_defaults!(),
        r#"
  "methods": [
    "sgd",
    "sam",
    "csam"
  ],
  "rho": 0.05,
  "gamma": 1.0
}"#
    );

    /// `sweep.json` as the earlier releases wrote it for `csam sweep`'s
    /// defaults.
    const SWEEP: &str = concat!(
        flat_defaults!(),
        r#"
  "rhos": [
    0.02,
    0.05,
    0.1,
    0.2
  ],
  "gammas": [
    0.0,
    0.5,
    1.0,
    1.5,
    2.0
  ]
}"#
    );

    /// `grid.json` as the earlier releases wrote it for `csam grid`'s
    /// defaults (without `lr` and `weight_decay`).
    const GRID: &str = r#"{
  "augment": false,
  "batch_size": 128,
  "data": "fashion-mnist-full",
  "epochs": 20,
  "metrics": {
    "adaptive": "interpolated",
    "edges": "right-closed",
    "n_bins": 15,
    "tolerance": 0.001
  },
  "model": "mlp",
  "seeds": [
    0
  ],
  "track_theory": false,
  "val_size": 12000,
  "method": "sgd",
  "rho": 0.05,
  "gamma": 1.0,
  "lrs": [
    0.01,
    0.05,
    0.1
  ],
  "weight_decays": [
    0.0001,
    0.0005,
    0.001
  ]
}"#;

    /// The `config.toml` that the earlier releases wrote for the default
    /// comparison's CSAM run on seed 1.
    const CSAM_SEED_1: &str = r#"schema = 2
epochs = 20
batch_size = 128
seed = 1
selection = "nll"

[data]
source = "fashion-mnist-full"
val_size = 12000
augment = false
shuffle = true

[model]
arch = "mlp"
mlp_hidden = [256, 256]
dropout = 0.0

[model.head]
kind = "linear"

[model.ensemble]
kind = "single"

[model.bayesian]
kind = "none"

[loss]
kind = "cross-entropy"

[mixing]
kind = "none"

[optim]
lr = 0.05
weight_decay = 0.0005

[optim.base]
kind = "sgd"
momentum = 0.9
nesterov = false

[optim.schedule]
kind = "cosine"
warmup_epochs = 0
min_lr = 0.0

[optim.rule]
kind = "csam"
rho = 0.05
gamma = 1.0
detach = false
every = 1

[metrics]
n_bins = 15
edges = "right-closed"
adaptive = "interpolated"
tolerance = 0.001
"#;

    #[test]
    fn files_of_the_flat_layout_read_as_the_same_settings_given_today() {
        let compare: CompareSettings = serde_json::from_str(COMPARE).unwrap();
        assert_eq!(compare, CompareSettings::default());
        assert!(differences(&compare, &CompareSettings::default()).is_empty());
        let sweep: SweepSettings = serde_json::from_str(SWEEP).unwrap();
        assert_eq!(sweep, SweepSettings::default());
        assert!(differences(&sweep, &SweepSettings::default()).is_empty());
        let grid: GridSettings = serde_json::from_str(GRID).unwrap();
        assert_eq!(grid, GridSettings::default());
        assert!(differences(&grid, &GridSettings::default()).is_empty());
    }

    #[test]
    fn the_runs_of_a_flat_file_are_the_runs_it_trained() {
        let compare: CompareSettings = serde_json::from_str(COMPARE).unwrap();
        let csam = Method::cross_entropy(OptimizerFamily::Csam);
        assert_eq!(compare.run_spec(csam, 1, 0).unwrap().to_toml(), CSAM_SEED_1);
        // The same run of the sweep's SAM cell and of the grid's SGD pair,
        // but for its seed, its rule and (the grid) its lr and weight decay.
        let rule = "kind = \"csam\"\nrho = 0.05\ngamma = 1.0\ndetach = false\nevery = 1\n";
        let sweep: SweepSettings = serde_json::from_str(SWEEP).unwrap();
        let sam = CSAM_SEED_1
            .replace("seed = 1\n", "seed = 2\n")
            .replace(rule, "kind = \"sam\"\nrho = 0.1\nevery = 1\n");
        assert_eq!(sweep.run_spec(0.1, 0.0, 2).to_toml(), sam);
        let grid: GridSettings = serde_json::from_str(GRID).unwrap();
        let sgd = CSAM_SEED_1
            .replace("seed = 1\n", "seed = 0\n")
            .replace(
                "lr = 0.05\nweight_decay = 0.0005\n",
                "lr = 0.1\nweight_decay = 0.001\n",
            )
            .replace(rule, "kind = \"sgd\"\n");
        let point = GridPoint {
            lr: 0.1,
            weight_decay: 1e-3,
        };
        assert_eq!(grid.run_spec(point, 0).unwrap().to_toml(), sgd);
    }

    #[test]
    fn a_flat_file_keeps_its_optional_keys() {
        let text = COMPARE
            .replace("\"mlp\"", "\"torchscript:models/net.pt\"")
            .replace(
                "\"track_theory\": false",
                "\"track_theory\": true, \"precision\": \"bf16\"",
            );
        let settings: CompareSettings = serde_json::from_str(&text).unwrap();
        let model = &settings.base.model;
        assert_eq!(model.arch.name(), "torchscript");
        assert_eq!(
            model.script.as_deref(),
            Some(std::path::Path::new("models/net.pt"))
        );
        assert_eq!(model.precision, Precision::Bf16);
        assert!(settings.base.track_theory);
    }

    #[test]
    fn a_flat_file_that_cannot_be_read_is_refused_naming_the_key() {
        for (from, to, key) in [
            ("\"epochs\": 20,", "", "`epochs`"),
            ("\"mlp\"", "\"mpl\"", "invalid model = \"mpl\""),
            (
                "\"fashion-mnist-full\"",
                "\"nonsense\"",
                "invalid data = \"nonsense\"",
            ),
        ] {
            let text = COMPARE.replace(from, to);
            let error = serde_json::from_str::<CompareSettings>(&text)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(key) && !error.contains('\n'),
                "{key}: {error}"
            );
        }
    }

    #[test]
    fn a_directory_of_the_flat_layout_resumes_and_reports() {
        let root = tempfile::tempdir().unwrap();
        let dir = CompareDir::new(root.path());
        std::fs::write(dir.settings(), COMPARE).unwrap();
        std::fs::create_dir_all(root.path().join("runs/sgd-seed0")).unwrap();
        dir.open(&CompareSettings::default()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.settings()).unwrap(), COMPARE);
        let mut other = CompareSettings::default();
        other.base.optim.lr = 0.1;
        let error = dir.open(&other).unwrap_err().to_string();
        assert!(
            error.contains("settings differ in: base.optim.lr"),
            "{error}"
        );
        // `csam report` reads the settings that results.json embeds.
        let results = format!(
            r#"{{"schema": "csam-compare/1", "csam_version": "0", "settings": {COMPARE},
                "wall_time_s": 1.0, "runs": [], "aggregates": []}}"#
        );
        std::fs::write(dir.results_json(), results).unwrap();
        let results: CompareResults = read_json(&dir.results_json()).unwrap();
        assert_eq!(results.settings, CompareSettings::default());
    }
}
