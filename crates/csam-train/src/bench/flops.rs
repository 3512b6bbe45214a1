//! Analytic forward cost of the built-in architectures: multiply-adds of
//! their convolution and linear layers (BatchNorm, ReLU, pooling and the
//! loss are ignored, as is customary; they are < 2% for these models).
//!
//! One multiply-add is 2 FLOPs. A training step costs about 3 forward passes
//! (forward, plus backward through activations and weights): `3 F` for SGD,
//! `6 F` for the SAM family (two forward/backward passes on the same batch).
//! The counts mirror the architectures' definitions in `csam_nn::model` and are
//! cross-checked against PyTorch forward hooks on the twins
//! (`bench/torch_reference.py --flops`, fixture `tests/fixtures/flops.json`).

/// Output side of a 3x3 convolution with padding 1 and the given stride.
fn conv3x3_out(side: u64, stride: u64) -> u64 {
    (side + 2 - 3) / stride + 1
}

/// Multiply-adds of one 3x3 convolution (no bias) on a `side x side` input.
/// Returns (macs, output side).
fn conv3x3_macs(c_in: u64, c_out: u64, side: (u64, u64), stride: u64) -> (u64, (u64, u64)) {
    let out = (conv3x3_out(side.0, stride), conv3x3_out(side.1, stride));
    (c_in * c_out * 9 * out.0 * out.1, out)
}

/// Multiply-adds per example of the forward pass of model `name` (`mlp` with
/// its hidden widths, `cnn`, the CIFAR ResNets `resnet20` ... `resnet110`) on
/// inputs `channels x height x width` with `n_classes` outputs; None for an
/// architecture without a count here (the bench then leaves its FLOP
/// columns empty).
pub fn forward_macs(
    name: &str,
    input: (u64, u64, u64),
    n_classes: u64,
    mlp_hidden: &[u64],
) -> Option<u64> {
    let (channels, height, width) = input;
    match name {
        "mlp" => {
            let widths: Vec<u64> = std::iter::once(channels * height * width)
                .chain(mlp_hidden.iter().copied())
                .chain(std::iter::once(n_classes))
                .collect();
            Some(widths.windows(2).map(|w| w[0] * w[1]).sum())
        }
        "cnn" => {
            let mut macs = 0;
            let mut side = (height, width);
            let mut c_in = channels;
            for (c_out, stride) in [(32, 1), (64, 2), (128, 2)] {
                let (m, out) = conv3x3_macs(c_in, c_out, side, stride);
                macs += m;
                side = out;
                c_in = c_out;
            }
            Some(macs + c_in * n_classes)
        }
        // The CIFAR ResNets only: `resnet50` is torchvision's, another network.
        "resnet20" | "resnet32" | "resnet44" | "resnet56" | "resnet110" => {
            let depth: u64 = name.strip_prefix("resnet")?.parse().ok()?;
            let blocks = (depth - 2) / 6;
            let (mut macs, mut side) = conv3x3_macs(channels, 16, (height, width), 1);
            let mut c_in = 16;
            for (stage, width) in [16u64, 32, 64].into_iter().enumerate() {
                for block in 0..blocks {
                    let stride = if stage > 0 && block == 0 { 2 } else { 1 };
                    let (m1, out) = conv3x3_macs(c_in, width, side, stride);
                    let (m2, _) = conv3x3_macs(width, width, out, 1);
                    macs += m1 + m2;
                    side = out;
                    c_in = width;
                }
            }
            Some(macs + c_in * n_classes)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlp_by_hand() {
        // 784*256 + 256*256 + 256*10
        assert_eq!(
            forward_macs("mlp", (1, 28, 28), 10, &[256, 256]),
            Some(268_800)
        );
    }

    #[test]
    fn resnet20_on_cifar_is_the_published_41_million() {
        // He et al. ResNet-20 (option A) on 32x32, commonly quoted as "41 M":
        // 40_550_400 in the convolutions plus 64 * 10 in the classifier.
        let macs = forward_macs("resnet20", (3, 32, 32), 10, &[]).unwrap();
        assert_eq!(macs, 40_551_040);
    }

    /// Counted independently by PyTorch forward hooks on the twins
    /// (`bench/torch_reference.py --flops`).
    #[test]
    fn matches_pytorch_forward_hooks() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("../../../../bench/flops_reference.json")).unwrap();
        let hidden: Vec<u64> = fixture["mlp_hidden"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_u64().unwrap())
            .collect();
        let classes = fixture["n_classes"].as_u64().unwrap();
        let cases = fixture["forward_macs"].as_object().unwrap();
        assert_eq!(cases.len(), 10);
        for (case, expected) in cases {
            let (model, input) = case.split_once('/').unwrap();
            let shape = match input {
                "cifar" => (3, 32, 32),
                "fmnist" => (1, 28, 28),
                other => panic!("unknown input {other}"),
            };
            let macs = forward_macs(model, shape, classes, &hidden);
            assert_eq!(macs, expected.as_u64(), "{case}");
        }
    }

    #[test]
    fn bad_names_are_none() {
        assert_eq!(forward_macs("resnet21", (3, 32, 32), 10, &[]), None);
        assert_eq!(forward_macs("vit", (3, 32, 32), 10, &[]), None);
        // torchvision's ResNet-50 is not a CIFAR ResNet of depth 50.
        assert_eq!(forward_macs("resnet50", (3, 32, 32), 10, &[]), None);
    }
}
