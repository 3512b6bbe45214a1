//! The random streams of the data pipeline, one per purpose, all derived
//! from the user's seed so that the same seed gives the same numbers.
//!
//! A stream is ChaCha8 keyed with the 32 bytes
//! `seed (u64 LE) | purpose (u64 LE) | epoch (u64 LE) | 0 (u64)`: streams of
//! different purposes or epochs are independent, and none depends on how
//! many numbers another one drew.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// What a random stream is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Purpose {
    /// Choosing the validation samples.
    Split = 1,
    /// The order of the samples in an epoch.
    Order = 2,
    /// Crop offsets and flips in an epoch.
    Augment = 3,
    /// The noise and angles of one corrupted image (`crate::corrupt`);
    /// the `epoch` slot carries the corruption and the image index.
    Corrupt = 4,
    /// Choosing the test part of a flat image folder (`crate::folder`).
    FolderTest = 5,
}

/// The stream for `(seed, purpose, epoch)`.
pub(crate) fn stream(seed: u64, purpose: Purpose, epoch: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&(purpose as u64).to_le_bytes());
    key[16..24].copy_from_slice(&epoch.to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn streams_repeat_and_differ() {
        let draw = |seed, purpose, epoch| stream(seed, purpose, epoch).next_u64();
        assert_eq!(draw(7, Purpose::Order, 3), draw(7, Purpose::Order, 3));
        assert_ne!(draw(7, Purpose::Order, 3), draw(7, Purpose::Order, 4));
        assert_ne!(draw(7, Purpose::Order, 3), draw(7, Purpose::Augment, 3));
        assert_ne!(draw(7, Purpose::Order, 3), draw(8, Purpose::Order, 3));
    }
}
