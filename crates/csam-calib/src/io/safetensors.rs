//! `.safetensors` files, as `safetensors.torch.save_file` or
//! `safetensors.numpy.save_file` write them: a JSON header naming each tensor
//! with its dtype and shape, then the little-endian data. One file can hold
//! the predictions and the labels side by side (`logits` or `probs`, and
//! `labels`).
//!
//! float16 and bfloat16 tensors are widened to float32 once (exactly: every
//! half-precision value is a float32 value); float32 stays float32. The 8-bit
//! float types have no exact meaning for predictions here and are refused.

use std::io::Read;
use std::path::Path;

use half::{bf16, f16};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use super::array::{format_error, io_error, open_regular_file, Elements, LoadedArray};
use super::npz::choose;
use crate::error::Result;

/// Reads one tensor of the `.safetensors` file at `path`. `name` picks it;
/// without a name the file's only tensor is taken, or the one whose name is
/// in `preferred` when exactly one such name is present (as for `.npz`).
pub fn read(path: &Path, name: Option<&str>, preferred: &[&str]) -> Result<LoadedArray> {
    let (mut file, len) = open_regular_file(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    read_from(&bytes, name, preferred, path)
}

/// Reads one tensor (see [`read`]) of the `.safetensors` bytes `bytes`;
/// `source` names the input in errors.
pub fn read_from(
    bytes: &[u8],
    name: Option<&str>,
    preferred: &[&str],
    source: &Path,
) -> Result<LoadedArray> {
    let tensors = SafeTensors::deserialize(bytes).map_err(|e| {
        let detail = match unknown_dtype(bytes) {
            Some((tensor, dtype)) => format!(
                "tensor '{tensor}' has dtype {dtype}, which csam does not read ({SUPPORTED})"
            ),
            None => format!("{e:?}"),
        };
        format_error(source, format!("not a valid .safetensors file: {detail}"))
    })?;
    let mut names: Vec<String> = tensors.names().into_iter().cloned().collect();
    names.sort();
    let chosen = choose(&names, name, preferred, "the file holds no tensors")
        .map_err(|detail| format_error(source, detail))?;
    let tensor = tensors
        .tensor(&chosen)
        .map_err(|e| format_error(source, format!("tensor '{chosen}': {e:?}")))?;
    let elements = decode(&tensor)
        .map_err(|detail| format_error(source, format!("tensor '{chosen}': {detail}")))?;
    Ok(LoadedArray {
        shape: tensor.shape().to_vec(),
        elements,
    })
}

/// The dtypes [`decode`] reads, for messages.
const SUPPORTED: &str = "supported: F16, BF16, F32, F64, integers, BOOL";

/// The first tensor whose header dtype the safetensors reader does not know
/// (the 8-bit floats of newer writers, `F8_E4M3`, ...) with that dtype: the
/// reader itself only says that the header did not deserialize. `None` when
/// the header is not JSON or names no such dtype.
fn unknown_dtype(bytes: &[u8]) -> Option<(String, String)> {
    let length = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header = bytes.get(8..8_usize.checked_add(length)?)?;
    let tensors: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(header).ok()?;
    tensors
        .into_iter()
        .filter(|(name, _)| name != "__metadata__")
        .find_map(|(name, tensor)| {
            let dtype = tensor.get("dtype")?.clone();
            let known = serde_json::from_value::<Dtype>(dtype.clone()).is_ok();
            (!known).then(|| {
                (
                    name,
                    dtype.as_str().map_or(dtype.to_string(), str::to_string),
                )
            })
        })
}

/// The tensor's values: floats as `f32` (16- and 32-bit) or `f64`, integers
/// and booleans as `i64`.
fn decode(tensor: &TensorView<'_>) -> std::result::Result<Elements, String> {
    let data = tensor.data();
    macro_rules! le {
        ($t:ty) => {
            data.chunks_exact(std::mem::size_of::<$t>()).map(|c| {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(c);
                <$t>::from_le_bytes(b)
            })
        };
    }
    Ok(match tensor.dtype() {
        Dtype::F16 => Elements::Float32(le!(u16).map(|b| f16::from_bits(b).to_f32()).collect()),
        Dtype::BF16 => Elements::Float32(le!(u16).map(|b| bf16::from_bits(b).to_f32()).collect()),
        Dtype::F32 => Elements::Float32(le!(f32).collect()),
        Dtype::F64 => Elements::Float(le!(f64).collect()),
        Dtype::BOOL => Elements::Integer(data.iter().map(|&b| i64::from(b != 0)).collect()),
        Dtype::U8 => Elements::Integer(le!(u8).map(i64::from).collect()),
        Dtype::I8 => Elements::Integer(le!(i8).map(i64::from).collect()),
        Dtype::I16 => Elements::Integer(le!(i16).map(i64::from).collect()),
        Dtype::U16 => Elements::Integer(le!(u16).map(i64::from).collect()),
        Dtype::I32 => Elements::Integer(le!(i32).map(i64::from).collect()),
        Dtype::U32 => Elements::Integer(le!(u32).map(i64::from).collect()),
        Dtype::I64 => Elements::Integer(le!(i64).collect()),
        Dtype::U64 => Elements::Integer(
            le!(u64)
                .enumerate()
                .map(|(i, v)| {
                    i64::try_from(v)
                        .map_err(|_| format!("uint64 value {v} at index {i} does not fit in int64"))
                })
                .collect::<std::result::Result<_, _>>()?,
        ),
        other => return Err(format!("unsupported dtype {other:?}; {SUPPORTED}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::serialize;
    use std::collections::HashMap;

    /// A `.safetensors` file of `(name, dtype, shape, data)`.
    fn file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let views: HashMap<String, TensorView<'_>> = tensors
            .iter()
            .map(|(name, dtype, shape, data)| {
                let view = TensorView::new(*dtype, shape.clone(), data).unwrap();
                (name.to_string(), view)
            })
            .collect();
        serialize(&views, &None).unwrap()
    }

    fn bytes_of(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn reads_preferred_and_named_tensors() {
        let labels: Vec<u8> = [1i64, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let bytes = file(&[
            (
                "logits",
                Dtype::F32,
                vec![2, 2],
                bytes_of(&[0.5, 1.5, -1.0, 2.0]),
            ),
            ("labels", Dtype::I64, vec![2], labels),
        ]);
        let source = Path::new("p.safetensors");
        let logits = read_from(&bytes, None, &["logits", "probs"], source).unwrap();
        assert_eq!(logits.shape, vec![2, 2]);
        assert_eq!(
            logits.elements,
            Elements::Float32(vec![0.5, 1.5, -1.0, 2.0])
        );
        let labels = read_from(&bytes, Some("labels"), &[], source).unwrap();
        assert_eq!(labels.elements, Elements::Integer(vec![1, 0]));
        let e = read_from(&bytes, Some("probs"), &[], source)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("p.safetensors: no array named 'probs'") && e.contains("labels, logits"),
            "{e}"
        );
    }

    #[test]
    fn half_precision_widens_exactly() {
        let halves = [f16::from_f32(0.1), f16::from_f32(-2.5), f16::MAX, f16::NAN];
        let data: Vec<u8> = halves
            .iter()
            .flat_map(|h| h.to_bits().to_le_bytes())
            .collect();
        let bytes = file(&[("probs", Dtype::F16, vec![1, 4], data)]);
        let read = read_from(&bytes, None, &[], Path::new("h.safetensors")).unwrap();
        let Elements::Float32(values) = read.elements else {
            panic!("{:?}", read.elements)
        };
        assert_eq!(values[..3], [f16::from_f32(0.1).to_f32(), -2.5, 65504.0]);
        assert!(values[3].is_nan());
    }

    #[test]
    fn garbage_and_unsupported_dtypes_are_refused() {
        let source = Path::new("g.safetensors");
        let e = read_from(b"not safetensors", None, &[], source)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("g.safetensors: not a valid .safetensors file"),
            "{e}"
        );
        let big: Vec<u8> = u64::MAX.to_le_bytes().to_vec();
        let bytes = file(&[("labels", Dtype::U64, vec![1], big)]);
        let e = read_from(&bytes, None, &[], source)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tensor 'labels': uint64 value"), "{e}");
    }

    #[test]
    fn a_dtype_the_reader_does_not_know_is_named() {
        let header = br#"{"logits":{"dtype":"F8_E4M3","shape":[1,2],"data_offsets":[0,2]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&[0x38, 0x40]);
        let e = read_from(&bytes, None, &[], Path::new("f8.safetensors"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tensor 'logits' has dtype F8_E4M3, which csam does not read (supported:"),
            "{e}"
        );
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic the reader.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = read_from(&bytes, None, &["logits"], Path::new("fuzz.safetensors"));
        }
    }
}
