//! Train / validation / test splits.
//!
//! The validation set is taken from the training part, stratified by class:
//! class `c` with `n_c` of the `N` training samples gives
//! `floor(val_size * n_c / N)` samples, and the samples still missing to
//! reach `val_size` go one each to the classes with the largest remainders
//! (ties to the lower class index). Within a class the validation samples are
//! drawn uniformly at random (a seeded shuffle, see [`super::rng`]). Train and
//! validation keep the source's order. The test part is the source's, untouched.

use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use super::dataset::{DataSource, Dataset};
use super::error::{DataError, Result};
use super::rng::{stream, Purpose};

/// The three parts a run uses; `val` and `train` are disjoint and together
/// are the source's training part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splits {
    pub train: Dataset,
    pub val: Dataset,
    pub test: Dataset,
}

/// Splits `val_size` samples off the training part (see the module doc).
/// `val_size` may be 0 (empty validation set) but must leave at least one
/// training sample; a test-only source is an error.
pub fn split(source: DataSource, val_size: usize, seed: u64) -> Result<Splits> {
    let DataSource { train, test } = source;
    let train = train.ok_or_else(|| {
        let source = test.name.strip_suffix("/test").unwrap_or(&test.name);
        DataError::Invalid(format!(
            "{source} has only a test part (an evaluation set): it can be evaluated but not \
             trained on; train on a data set with a training part"
        ))
    })?;
    if val_size >= train.n {
        return Err(DataError::Invalid(format!(
            "validation size {val_size} leaves no training sample of the {} in {}",
            train.n, train.name
        )));
    }
    let mut rng = stream(seed, Purpose::Split, 0);
    let is_val = stratified_mask(&train.labels, train.n_classes, val_size, &mut rng);
    let (val_indices, train_indices): (Vec<usize>, Vec<usize>) =
        (0..train.n).partition(|&i| is_val[i]);
    let base = train
        .name
        .strip_suffix("/train")
        .unwrap_or(&train.name)
        .to_string();
    Ok(Splits {
        val: train.select(&val_indices).renamed(format!("{base}/val")),
        train: train
            .select(&train_indices)
            .renamed(format!("{base}/train")),
        test,
    })
}

/// Per class, how many validation samples (largest-remainder allocation).
fn stratified_quotas(counts: &[usize], val_size: usize) -> Vec<usize> {
    let total: usize = counts.iter().sum();
    let exact: Vec<(usize, usize)> = counts
        .iter()
        .map(|&n_c| (val_size * n_c / total, val_size * n_c % total))
        .collect();
    let mut quotas: Vec<usize> = exact.iter().map(|&(q, _)| q).collect();
    let missing = val_size - quotas.iter().sum::<usize>();
    let mut by_remainder: Vec<usize> = (0..counts.len()).collect();
    // Stable sort: equal remainders keep the lower class index first.
    by_remainder.sort_by(|&a, &b| exact[b].1.cmp(&exact[a].1));
    for &c in by_remainder.iter().take(missing) {
        quotas[c] += 1;
    }
    quotas
}

/// `mask[i]` is true when sample `i` is among the `size` drawn: a stratified
/// draw (quotas by [`stratified_quotas`]), uniform within each class (one
/// shuffle per class, in class order, from `rng`). Validation sets and the
/// test part of a flat image folder are drawn this way.
pub(crate) fn stratified_mask(
    labels: &[usize],
    n_classes: usize,
    size: usize,
    rng: &mut ChaCha8Rng,
) -> Vec<bool> {
    let mut by_class = vec![Vec::new(); n_classes];
    for (i, &l) in labels.iter().enumerate() {
        by_class[l].push(i);
    }
    let counts: Vec<usize> = by_class.iter().map(Vec::len).collect();
    let quotas = stratified_quotas(&counts, size);
    let mut mask = vec![false; labels.len()];
    for (members, quota) in by_class.iter_mut().zip(quotas) {
        members.shuffle(rng);
        for &i in &members[..quota] {
            mask[i] = true;
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quotas_by_hand() {
        // 10 of 100 split 50/30/20 -> 5/3/2 exactly.
        assert_eq!(stratified_quotas(&[50, 30, 20], 10), vec![5, 3, 2]);
        // 3 of 9 split 4/4/1: exact 1.33/1.33/0.33 -> floors 1/1/0, one more to
        // the largest remainder (ties: class 0).
        assert_eq!(stratified_quotas(&[4, 4, 1], 3), vec![2, 1, 0]);
        assert_eq!(stratified_quotas(&[4, 0, 5], 0), vec![0, 0, 0]);
    }

    proptest! {
        #[test]
        fn quotas_sum_and_stay_within_classes(
            counts in proptest::collection::vec(0usize..50, 1..8),
            fraction in 0.0f64..1.0,
        ) {
            let total: usize = counts.iter().sum();
            prop_assume!(total > 0);
            let val_size = ((total as f64) * fraction) as usize;
            let quotas = stratified_quotas(&counts, val_size);
            prop_assert_eq!(quotas.iter().sum::<usize>(), val_size);
            for (q, n) in quotas.iter().zip(&counts) {
                prop_assert!(q <= n);
                // Within one of the exact proportional share.
                let exact = val_size as f64 * *n as f64 / total as f64;
                // exact: a product and a quotient of integers < 2^9, within 2 ulps of
                // values < 400 (~1.1e-13); 1e-9 covers that round-off only.
                prop_assert!((*q as f64 - exact).abs() < 1.0 + 1e-9);
            }
        }
    }
}
