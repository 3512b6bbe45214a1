//! What a SAM-family step carries from one step to the next, typed, and its
//! form in a checkpoint (named tensors beside the base optimizer's).

use super::policy::GradStatistics;
use super::OptimError;
use tch::Tensor;

/// The state a checkpoint keeps so that a resumed [`super::SamStep`]
/// continues bit for bit; every part is absent for the rules and policies
/// that carry nothing, and before the first step.
#[derive(Debug, Default)]
pub struct SamState {
    /// VASSO's average direction `d_t` (flat).
    pub vasso_average: Option<Tensor>,
    /// LookSAM's `g_v` (flat), from its last SAM step.
    pub looksam_direction: Option<Tensor>,
    /// AE-SAM's running statistics of `||g||^2`.
    pub aesam_statistics: Option<GradStatistics>,
}

/// The names in a checkpoint's optimizer state (those of earlier releases,
/// so that their checkpoints load).
const VASSO_AVERAGE: &str = "sam.direction";
const LOOKSAM_DIRECTION: &str = "sam.looksam_direction";
/// `[mu, sigma^2]`, float64.
const AESAM_STATISTICS: &str = "sam.aesam_statistics";

impl SamState {
    /// The state as named tensors for a checkpoint (sharing storage).
    pub fn to_named(&self) -> Vec<(String, Tensor)> {
        let tensors = [
            (VASSO_AVERAGE, &self.vasso_average),
            (LOOKSAM_DIRECTION, &self.looksam_direction),
        ];
        let mut named: Vec<(String, Tensor)> = tensors
            .into_iter()
            .filter_map(|(name, kept)| Some((name.to_string(), kept.as_ref()?.shallow_clone())))
            .collect();
        if let Some(GradStatistics { mean, variance }) = self.aesam_statistics {
            let statistics = Tensor::from_slice(&[mean, variance]);
            named.push((AESAM_STATISTICS.to_string(), statistics));
        }
        named
    }

    /// Takes this state's entries out of a checkpoint's `named` tensors
    /// (copied), and gives back the others (the base optimizer's).
    pub fn split_from(
        named: Vec<(String, Tensor)>,
    ) -> Result<(SamState, Vec<(String, Tensor)>), OptimError> {
        let mut state = SamState::default();
        let mut others = Vec::new();
        for (name, tensor) in named {
            match name.as_str() {
                VASSO_AVERAGE => state.vasso_average = Some(tensor.copy()),
                LOOKSAM_DIRECTION => state.looksam_direction = Some(tensor.copy()),
                AESAM_STATISTICS => state.aesam_statistics = Some(statistics(&tensor)?),
                _ => others.push((name, tensor)),
            }
        }
        Ok((state, others))
    }
}

/// AE-SAM's `[mu, sigma^2]` from its saved tensor.
fn statistics(saved: &Tensor) -> Result<GradStatistics, OptimError> {
    match Vec::<f64>::try_from(saved)?.as_slice() {
        &[mean, variance] => Ok(GradStatistics { mean, variance }),
        other => Err(OptimError::Mismatch(format!(
            "AE-SAM's statistics hold 2 numbers, the checkpoint has {}",
            other.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_comes_back_from_its_checkpoint_form_and_leaves_the_rest() {
        let state = SamState {
            vasso_average: Some(Tensor::from_slice(&[1.0f32, -2.0])),
            looksam_direction: Some(Tensor::from_slice(&[0.5f32])),
            aesam_statistics: Some(GradStatistics {
                mean: 3.0,
                variance: 0.25,
            }),
        };
        let mut named = state.to_named();
        named.push(("w.momentum".to_string(), Tensor::from_slice(&[7.0f32])));
        let (back, others) = SamState::split_from(named).unwrap();
        let same =
            |a: &Option<Tensor>, b: &Option<Tensor>| a.as_ref().unwrap().equal(b.as_ref().unwrap());
        assert!(same(&back.vasso_average, &state.vasso_average));
        assert!(same(&back.looksam_direction, &state.looksam_direction));
        assert_eq!(back.aesam_statistics, state.aesam_statistics);
        assert_eq!(others.len(), 1);
        assert_eq!(others[0].0, "w.momentum");
        let empty = SamState::default();
        assert!(empty.to_named().is_empty());
    }

    #[test]
    fn statistics_of_another_length_are_refused() {
        let named = vec![(
            AESAM_STATISTICS.to_string(),
            Tensor::from_slice(&[1.0f64, 2.0, 3.0]),
        )];
        let error = SamState::split_from(named).unwrap_err();
        assert!(matches!(error, OptimError::Mismatch(_)), "{error}");
    }
}
