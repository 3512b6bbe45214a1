//! The results table of a comparison, in Markdown (printed and saved as
//! `table.md`): one row per method, one column per [`Metric`], each cell
//! `mean ± std` over seeds (docs/conventions.md, "Experiment protocol"), in percent except NLL and Brier.

use super::compare::{CompareSettings, ShiftRequest};
use super::results::{MeanStd, MethodAggregate, Metric};

/// The caption: data, model, training length, shared hyperparameters, the
/// number of seeds and how to read the columns.
pub fn caption(settings: &CompareSettings) -> String {
    let shared = &settings.shared;
    let seeds: Vec<String> = shared.seeds.iter().map(u64::to_string).collect();
    format!(
        "Test metrics on {} ({} validation examples held out of the training part), model {}, \
         {} epochs, batch {}, lr {}, weight decay {}, rho {}, gamma {}. Mean ± sample std over \
         {} seeds ({}). Percent except NLL and Brier. ECE / CW-ECE / TCE: 15 equal-width bins; \
         AdaECE: 15 equal-mass bins; TCE, ECE iso, ECE hist: ECE after temperature scaling, \
         isotonic regression, histogram binning fitted on the validation split; AUROC mis: \
         misclassification detection by confidence; AUROC ovr: one-vs-rest macro.",
        shared.data,
        shared.val_size,
        shared.model,
        shared.epochs,
        shared.batch_size,
        shared.lr,
        shared.weight_decay,
        settings.rho,
        settings.gamma,
        seeds.len(),
        seeds.join(", "),
    )
}

/// `mean ± std` of `value` in the metric's unit: percent with 2 decimals,
/// or 3 decimals for NLL and Brier; just the mean when there is no std
/// (a single seed), `n/a` when there is no value.
pub fn cell(metric: Metric, value: Option<&MeanStd>) -> String {
    mean_std_text(value, metric.in_percent())
}

/// `mean ± std` of `value`: in percent with 2 decimals when `in_percent`,
/// else as it is with 3 decimals; just the mean when there is no std, `n/a`
/// when there is no value.
pub fn mean_std_text(value: Option<&MeanStd>, in_percent: bool) -> String {
    let Some(value) = value else {
        return "n/a".to_string();
    };
    let (scale, decimals) = if in_percent { (100.0, 2) } else { (1.0, 3) };
    match value.std {
        Some(std) => format!(
            "{:.*} ± {:.*}",
            decimals,
            value.mean * scale,
            decimals,
            std * scale
        ),
        None => format!("{:.*}", decimals, value.mean * scale),
    }
}

/// The Markdown table of [`Metric::ALL`]: the caption, a blank line, then
/// the header, the alignment row and one row per aggregate.
pub fn markdown(caption: &str, aggregates: &[MethodAggregate]) -> String {
    markdown_of(caption, aggregates, Metric::ALL)
}

/// The caption of the shift table: what the corrupted and OOD columns are.
pub fn shift_caption(settings: &CompareSettings, shift: &ShiftRequest) -> String {
    let corrupted = shift.corruptions.as_ref().map_or_else(
        || "no corrupted data".to_string(),
        |dir| {
            format!(
                "corrupted: {}, the mean over its corruptions and severities",
                dir.display()
            )
        },
    );
    let ood = shift.ood.as_deref().map_or_else(
        || "no OOD set".to_string(),
        |ood| {
            format!(
                "OOD: the test split against {ood}'s, scored by maximum probability and by entropy"
            )
        },
    );
    format!(
        "Under shift: {} ({}; {}). Mean ± sample std over {} seeds; percent except NLL; ECE: \
         15 equal-width bins.",
        settings.shared.data,
        corrupted,
        ood,
        settings.shared.seeds.len(),
    )
}

/// The Markdown table of `metrics` (see [`markdown`]).
pub fn markdown_of(caption: &str, aggregates: &[MethodAggregate], metrics: &[Metric]) -> String {
    let header: Vec<String> = std::iter::once("Method".to_string())
        .chain(metrics.iter().map(|m| match m.in_percent() {
            true => format!("{} (%)", m.header()),
            false => m.header().to_string(),
        }))
        .collect();
    let align: Vec<&str> = std::iter::once(":--")
        .chain(metrics.iter().map(|_| "--:"))
        .collect();
    let mut out = format!(
        "{caption}\n\n| {} |\n|{}|\n",
        header.join(" | "),
        align.join("|")
    );
    for aggregate in aggregates {
        let cells: Vec<String> = std::iter::once(aggregate.method.to_string().to_uppercase())
            .chain(metrics.iter().map(|&m| cell(m, aggregate.get(m))))
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::method::Method;
    use crate::experiment::results::{aggregate, tests::record};
    use csam_train::spec::OptimizerFamily;

    #[test]
    fn cells_scale_and_round_by_metric() {
        let value = MeanStd {
            mean: 0.85123,
            std: Some(0.00456),
            n: 3,
        };
        assert_eq!(cell(Metric::Accuracy, Some(&value)), "85.12 ± 0.46");
        assert_eq!(cell(Metric::Nll, Some(&value)), "0.851 ± 0.005");
        let single = MeanStd {
            std: None,
            n: 1,
            ..value
        };
        assert_eq!(cell(Metric::Ece, Some(&single)), "85.12");
        assert_eq!(cell(Metric::Brier, None), "n/a");
    }

    #[test]
    fn table_has_one_row_per_method_and_every_column() {
        let runs = vec![
            record(Method::cross_entropy(OptimizerFamily::Sgd), 0, 0.80, 0.02),
            record(Method::cross_entropy(OptimizerFamily::Sgd), 1, 0.84, 0.04),
            record(Method::cross_entropy(OptimizerFamily::Csam), 0, 0.90, 0.01),
        ];
        let aggregates = aggregate(
            &runs,
            &[
                Method::cross_entropy(OptimizerFamily::Sgd),
                Method::cross_entropy(OptimizerFamily::Csam),
            ],
        );
        let table = markdown("Caption.", &aggregates);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "Caption.");
        assert_eq!(lines[1], "");
        assert!(
            lines[2].starts_with("| Method | Acc (%) | ECE (%) |"),
            "{}",
            lines[2]
        );
        assert!(lines[2].contains("| NLL | Brier |"), "{}", lines[2]);
        assert!(lines[2].ends_with("| ECE hist (%) |"), "{}", lines[2]);
        let columns = |line: &str| line.matches('|').count();
        assert_eq!(columns(lines[3]), Metric::ALL.len() + 2);
        assert_eq!(lines.len(), 6);
        // SGD accuracy: mean 82, sample std 4 / sqrt 2 = 2.83 (percent).
        assert!(
            lines[4].starts_with("| SGD | 82.00 ± 2.83 | "),
            "{}",
            lines[4]
        );
        // CSAM has one seed: means only; TCE 1 %, ECE hist 0.25 %.
        assert!(
            lines[5].starts_with("| CSAM | 90.00 | 90.00 |"),
            "{}",
            lines[5]
        );
        assert!(lines[5].ends_with("| 0.50 | 0.25 |"), "{}", lines[5]);
        assert_eq!(columns(lines[5]), columns(lines[3]));
    }
}
