//! Where an index beyond an image's edge reads from: the border modes of the
//! libraries the reference code calls, named after them.

/// How an out-of-range index folds back into `0..len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Border {
    /// OpenCV's `BORDER_REFLECT_101` (`gfedcb|abcdefgh|gfedcba`): mirrored
    /// about the edge sample, which is not repeated.
    Reflect101,
    /// scipy.ndimage's `reflect` (`dcba|abcd|dcba`, half-sample symmetric):
    /// mirrored about the edge, the edge sample repeated.
    Reflect,
    /// scipy.ndimage's `nearest` (`aaaa|abcd|dddd`): the edge sample repeated.
    Nearest,
}

impl Border {
    /// The in-range index that index `i` of a line of `len` samples reads,
    /// folded as often as needed for offsets beyond the line.
    pub fn index(self, i: i64, len: usize) -> usize {
        let n = len as i64;
        match self {
            Border::Nearest => i.clamp(0, n - 1) as usize,
            Border::Reflect => {
                // Period 2n: 0..n forwards, n..2n backwards.
                let j = i.rem_euclid(2 * n);
                (if j < n { j } else { 2 * n - 1 - j }) as usize
            }
            Border::Reflect101 => {
                if n == 1 {
                    return 0;
                }
                // Period 2n - 2: 0..n forwards, then back down to 1.
                let j = i.rem_euclid(2 * n - 2);
                (if j < n { j } else { 2 * n - 2 - j }) as usize
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(border: Border, len: usize) -> Vec<usize> {
        (-5..len as i64 + 5).map(|i| border.index(i, len)).collect()
    }

    #[test]
    fn the_modes_fold_like_their_libraries() {
        // Written out by hand from the libraries' documented patterns, len 4.
        assert_eq!(
            folded(Border::Reflect101, 4),
            [1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2]
        );
        assert_eq!(
            folded(Border::Reflect, 4),
            [3, 3, 2, 1, 0, 0, 1, 2, 3, 3, 2, 1, 0, 0]
        );
        assert_eq!(
            folded(Border::Nearest, 4),
            [0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 3, 3, 3]
        );
        for border in [Border::Reflect101, Border::Reflect, Border::Nearest] {
            assert!(folded(border, 1).iter().all(|&i| i == 0), "{border:?}");
        }
    }
}
