//! libtorch's error texts without its C++ stack trace.
//!
//! A [`tch::TchError`] raised by libtorch carries the C++ exception's whole
//! text: the message, then `Exception raised from <function> at
//! <file>:<line> (most recent call first):` and one `frame #N: ...` line per
//! stack frame, 3 KB and more. That trace helps nobody who runs csam, so
//! every place that turns a tch error into a message keeps the message only.

/// `text` up to libtorch's stack trace, trimmed; a text without one is
/// returned unchanged, and one that is nothing but a trace keeps its first
/// line.
pub fn without_backtrace(text: &str) -> &str {
    let cut = ["Exception raised from ", "frame #0: "]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    match text[..cut].trim_end() {
        "" => text.lines().next().unwrap_or(""),
        message => message,
    }
}

/// The message of a tch error without libtorch's stack trace.
pub fn message(error: &tch::TchError) -> String {
    without_backtrace(&error.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_message_and_drops_the_trace() {
        let text = "Internal torch error: 1.weight: The size of tensor a (784) must match the \
                    size of tensor b (64) at non-singleton dimension 1\nException raised from \
                    infer_size_impl at /pytorch/aten/src/ATen/ExpandUtils.cpp:31 (most recent \
                    call first):\nframe #0: c10::Error::Error(c10::SourceLocation) + 0x9d\n\
                    frame #1: c10::detail::torchCheckFail(char const*) + 0xc3\n";
        assert_eq!(
            without_backtrace(text),
            "Internal torch error: 1.weight: The size of tensor a (784) must match the size \
             of tensor b (64) at non-singleton dimension 1"
        );
        assert_eq!(without_backtrace("plain message"), "plain message");
        assert_eq!(
            without_backtrace("frame #0: f() + 0x1\nframe #1: g()"),
            "frame #0: f() + 0x1"
        );
    }

    #[test]
    fn a_real_libtorch_error_loses_its_trace() {
        let a = tch::Tensor::zeros([2, 3], (tch::Kind::Float, tch::Device::Cpu));
        let b = tch::Tensor::zeros([4, 5], (tch::Kind::Float, tch::Device::Cpu));
        let error = a.f_matmul(&b).unwrap_err();
        let text = message(&error);
        assert!(text.contains("cannot be multiplied"), "{text}");
        assert!(!text.contains("frame #") && !text.contains('\n'), "{text}");
    }
}
