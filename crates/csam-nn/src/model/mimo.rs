//! MIMO, multi-input multi-output (Havasi et al. 2021, "Training independent
//! subnetworks for robust prediction", ICLR): `M` members in one plain
//! network, wired through its input and output layers alone.
//!
//! The network is the architecture built for `M C` input channels and `M K`
//! classes ([`network_shape`]). Its members' inputs come stacked member
//! after member (`[M N, C, H, W]`, as every model of members reads them,
//! [`super::ensemble`]); [`concat_members`] lays them side by side along
//! channels, member `m`'s image in channels `m C .. (m + 1) C` (the MLP
//! flattens that, so member `m`'s features are the `m`-th block of
//! `C H W`), and [`split_heads`] reads the classifier's `M K` logits as head
//! `m`'s `K` logits at `m K .. (m + 1) K`. This is uncertainty-baselines'
//! wiring (`models/wide_resnet_mimo.py`: the inputs `[B, M, H, W, C]`
//! transposed and reshaped to `M C` channels, the output `Dense(M K)`
//! reshaped to `[B, M, K]`).
//!
//! Training batches are drawn per member ([`Shuffles`]); in prediction every
//! member reads the same image, so the heads are `M` predictions of it.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tch::Tensor;

use super::InputShape;

/// How MIMO's training draws each member's rows of a batch (uncertainty-
/// baselines' `baselines/cifar/mimo.py`, `train_step`): the batch of `B`
/// examples is repeated `batch_repetitions` times and shuffled once,
/// `main = shuffle(tile(0..B, r))` of `n = r B` rows; member `m` then reads
/// `shuffle(main[..t]) ++ main[t..]` with its own shuffle of the first
/// `t = floor(n (1 - input_repetition))` rows, so a fraction
/// `input_repetition` of the rows (the last ones) reach every member in the
/// same order (the paper's input repetition, Section 3.4) and the rest in
/// independent orders.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shuffles {
    /// `M`.
    pub(crate) members: usize,
    /// `rho` in `[0, 1]`.
    pub(crate) input_repetition: f64,
    /// `r >= 1`.
    pub(crate) batch_repetitions: usize,
}

impl Shuffles {
    /// The rows `[M, r B]` (int64 indices into the batch) of a batch of
    /// `batch` examples, a pure function of `seed`.
    pub(crate) fn draw_rows(&self, batch: usize, seed: u64) -> Tensor {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut main: Vec<i64> = (0..self.batch_repetitions)
            .flat_map(|_| 0..batch as i64)
            .collect();
        main.shuffle(&mut rng);
        let n = main.len();
        // floor(n (1 - rho)) in [0, n] for rho in [0, 1].
        let independent = ((n as f64 * (1.0 - self.input_repetition)) as usize).min(n);
        let mut rows = Vec::with_capacity(self.members * n);
        for _ in 0..self.members {
            let mut own = main.clone();
            own[..independent].shuffle(&mut rng);
            rows.extend(own);
        }
        Tensor::from_slice(&rows).reshape([self.members as i64, n as i64])
    }
}

/// The input shape and the number of classes of the plain network a MIMO of
/// `members` members builds for `input` and `n_classes`: `M C` channels
/// (the same height and width) and `M K` classes.
pub(crate) fn network_shape(input: InputShape, n_classes: i64, members: i64) -> (InputShape, i64) {
    let shape = InputShape {
        channels: members * input.channels,
        ..input
    };
    (shape, members * n_classes)
}

/// The members' inputs stacked member after member, `[M N, C, ...]`, side
/// by side along channels: `[N, M C, ...]`, member `m`'s in channels
/// `m C .. (m + 1) C`.
pub(crate) fn concat_members(stacked: &Tensor, members: i64) -> Tensor {
    let shape = stacked.size();
    let n = shape[0] / members;
    let mut split = vec![members, n];
    split.extend_from_slice(&shape[1..]);
    let mut joined = vec![n, members * shape[1]];
    joined.extend_from_slice(&shape[2..]);
    stacked
        .reshape(split.as_slice())
        .transpose(0, 1)
        .reshape(joined.as_slice())
}

/// The classifier's logits `[N, M K]` as the `M` heads' `[M, N, K]`, head
/// `m`'s at `m K .. (m + 1) K`.
pub(crate) fn split_heads(logits: &Tensor, members: i64) -> Tensor {
    let size = logits.size();
    logits
        .reshape([size[0], members, size[1] / members])
        .transpose(0, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(shuffles: Shuffles, batch: usize, seed: u64) -> Vec<Vec<i64>> {
        let drawn = shuffles.draw_rows(batch, seed);
        Vec::<Vec<i64>>::try_from(&drawn).unwrap()
    }

    fn sorted(mut v: Vec<i64>) -> Vec<i64> {
        v.sort_unstable();
        v
    }

    #[test]
    fn each_member_reads_every_example_r_times_in_its_own_order() {
        let shuffles = Shuffles {
            members: 3,
            input_repetition: 0.0,
            batch_repetitions: 2,
        };
        let drawn = rows(shuffles, 8, 7);
        assert_eq!(drawn.len(), 3);
        let twice: Vec<i64> = sorted((0..2).flat_map(|_| 0..8).collect());
        for member in &drawn {
            assert_eq!(sorted(member.clone()), twice);
        }
        assert_ne!(drawn[0], drawn[1]);
        assert_ne!(drawn[1], drawn[2]);
        assert_eq!(rows(shuffles, 8, 7), drawn, "a pure function of the seed");
        assert_ne!(rows(shuffles, 8, 8), drawn);
    }

    #[test]
    fn input_repetition_gives_every_member_the_last_rows_in_one_order() {
        let half = Shuffles {
            members: 4,
            input_repetition: 0.5,
            batch_repetitions: 1,
        };
        let drawn = rows(half, 10, 3);
        // floor(10 (1 - 0.5)) = 5 rows of each member's own order, then 5
        // shared.
        for member in &drawn[1..] {
            assert_eq!(member[5..], drawn[0][5..]);
            assert_eq!(sorted(member[..5].to_vec()), sorted(drawn[0][..5].to_vec()));
        }
        assert!(drawn.iter().any(|m| m[..5] != drawn[0][..5]));
        let all = Shuffles {
            input_repetition: 1.0,
            ..half
        };
        let drawn = rows(all, 10, 3);
        assert!(drawn.iter().all(|m| *m == drawn[0]));
    }

    #[test]
    fn members_sit_side_by_side_along_channels_and_heads_along_logits() {
        // Two members, N = 2 examples of 1 channel of 1x1: member m's
        // example i is 10 m + i.
        let stacked = Tensor::from_slice(&[0i64, 1, 10, 11]).reshape([4, 1, 1, 1]);
        let joined = concat_members(&stacked, 2);
        assert_eq!(joined.size(), [2, 2, 1, 1]);
        let values = Vec::<i64>::try_from(&joined.reshape([-1])).unwrap();
        assert_eq!(values, [0, 10, 1, 11]);
        // Logits [N = 2, M K = 2 * 3]: head m of example i at 3 m.. of row i.
        let logits = Tensor::arange(12, (tch::Kind::Int64, tch::Device::Cpu)).reshape([2, 6]);
        let heads = split_heads(&logits, 2);
        assert_eq!(heads.size(), [2, 2, 3]);
        let head1 = Vec::<i64>::try_from(&heads.get(1).reshape([-1])).unwrap();
        assert_eq!(head1, [3, 4, 5, 9, 10, 11]);
    }
}
