//! A TorchScript module loaded by libtorch, through the C++ shim in
//! `csrc/script_module.cpp` (tch's own `CModule` lists parameters but not
//! buffers, and switches training mode only on the whole module).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use tch::{Device, Kind, Tensor};
use torch_sys::C_tensor;

use super::super::ModelError;

type Visit = unsafe extern "C" fn(*mut c_void, *const c_char, *mut C_tensor);

/// The C++ module object, opaque here.
#[repr(C)]
struct RawModule {
    _private: [u8; 0],
}

extern "C" {
    fn csam_script_load(
        path: *const c_char,
        device: c_int,
        scalar_type: c_int,
        out: *mut *mut RawModule,
    ) -> *mut c_char;
    fn csam_script_free(module: *mut RawModule);
    fn csam_script_free_error(message: *mut c_char);
    fn csam_script_named_tensors(
        module: *mut RawModule,
        buffers: c_int,
        data: *mut c_void,
        visit: Visit,
    ) -> *mut c_char;
    fn csam_script_set_mode(
        module: *mut RawModule,
        train: c_int,
        dropout_train: c_int,
    ) -> *mut c_char;
    fn csam_script_dropout_layers(module: *mut RawModule, count: *mut c_int) -> *mut c_char;
    fn csam_script_forward(
        module: *mut RawModule,
        input: *const C_tensor,
        out: *mut *mut C_tensor,
    ) -> *mut c_char;
}

/// Turns the shim's returned message (null: success) into a `Result`.
fn checked(message: *mut c_char) -> Result<(), String> {
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null result is a NUL-terminated string the shim allocated
    // and hands over; it is freed once, here.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    unsafe { csam_script_free_error(message) };
    Err(reason(&text))
}

/// The reason of a libtorch error: its last line. An error raised inside a
/// TorchScript module comes with both tracebacks of the module's code
/// first, and the error itself (`RuntimeError: Given groups=1, ...`) last.
fn reason(message: &str) -> String {
    let last = message.lines().map(str::trim).rfind(|l| !l.is_empty());
    last.unwrap_or("libtorch gave no reason").to_string()
}

/// libtorch's `ScalarType` number of a floating-point [`Kind`].
fn scalar_type(kind: Kind) -> Option<c_int> {
    match kind {
        Kind::Half => Some(5),
        Kind::Float => Some(6),
        Kind::Double => Some(7),
        Kind::BFloat16 => Some(15),
        _ => None,
    }
}

/// The shim's device number: -1 for the CPU, the index of a CUDA device.
fn device_number(device: Device) -> Option<c_int> {
    match device {
        Device::Cpu => Some(-1),
        Device::Cuda(index) => c_int::try_from(index).ok(),
        _ => None,
    }
}

/// Which of its layers a module runs in training mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScriptMode {
    /// Every layer in training mode (`module.train()`).
    Train,
    /// Every layer in evaluation mode (`module.eval()`).
    Eval,
    /// Evaluation mode except torch.nn's dropout layers (MC-Dropout).
    EvalWithDropout,
}

/// An owned TorchScript module.
#[derive(Debug)]
pub(super) struct ScriptModule {
    raw: *mut RawModule,
}

// SAFETY: the module is used from one thread at a time (`&mut` for mode
// changes, and the owning network is `Send` but not `Sync`); libtorch modules
// are not tied to the thread that loaded them.
unsafe impl Send for ScriptModule {}

impl Drop for ScriptModule {
    fn drop(&mut self) {
        // SAFETY: `raw` came from csam_script_load and is freed once.
        unsafe { csam_script_free(self.raw) }
    }
}

impl ScriptModule {
    /// Loads the archive at `path` onto `device`, its floating-point tensors
    /// cast to `kind`.
    pub(super) fn load(path: &Path, device: Device, kind: Kind) -> Result<Self, ModelError> {
        let refuse = |why: String| {
            ModelError::InvalidConfig(format!("TorchScript model {}: {why}", path.display()))
        };
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| refuse("the path contains a NUL byte".into()))?;
        let device = device_number(device)
            .ok_or_else(|| refuse(format!("device {device:?} is not supported")))?;
        let kind = scalar_type(kind)
            .ok_or_else(|| refuse(format!("{kind:?} is not a floating-point kind")))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid NUL-terminated path and out pointer.
        checked(unsafe { csam_script_load(c_path.as_ptr(), device, kind, &mut raw) })
            .map_err(refuse)?;
        Ok(ScriptModule { raw })
    }

    /// The parameters (`buffers` false) or buffers, with PyTorch's
    /// `state_dict` names, sharing storage with the module.
    pub(super) fn named_tensors(&self, buffers: bool) -> Result<Vec<(String, Tensor)>, String> {
        unsafe extern "C" fn visit(data: *mut c_void, name: *const c_char, tensor: *mut C_tensor) {
            // SAFETY: `data` is the vector passed below; `name` is a valid
            // C string for this call; `tensor` is a handle handed over.
            let found = unsafe { &mut *(data as *mut Vec<(String, Tensor)>) };
            let name = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            found.push((name, unsafe { Tensor::from_ptr(tensor) }));
        }
        let mut found: Vec<(String, Tensor)> = Vec::new();
        let data = &mut found as *mut Vec<(String, Tensor)> as *mut c_void;
        // SAFETY: `visit` matches the shim's callback type and `data` outlives the call.
        checked(unsafe { csam_script_named_tensors(self.raw, c_int::from(buffers), data, visit) })?;
        Ok(found)
    }

    /// Sets which layers run in training mode.
    pub(super) fn set_mode(&mut self, mode: ScriptMode) -> Result<(), String> {
        let (train, dropout) = match mode {
            ScriptMode::Train => (1, 0),
            ScriptMode::Eval => (0, 0),
            ScriptMode::EvalWithDropout => (0, 1),
        };
        // SAFETY: `raw` is a live module.
        checked(unsafe { csam_script_set_mode(self.raw, train, dropout) })
    }

    /// The number of torch.nn dropout layers with a rate above 0.
    pub(super) fn dropout_layers(&self) -> Result<usize, String> {
        let mut count: c_int = 0;
        // SAFETY: `raw` is a live module and `count` a valid out pointer.
        checked(unsafe { csam_script_dropout_layers(self.raw, &mut count) })?;
        Ok(count.max(0) as usize)
    }

    /// The module's `forward(xs)`, which must return one tensor.
    pub(super) fn forward(&self, xs: &Tensor) -> Result<Tensor, String> {
        let mut out = std::ptr::null_mut();
        // SAFETY: `xs` is a live tensor; on success `out` is a new handle we own.
        checked(unsafe { csam_script_forward(self.raw, xs.as_ptr(), &mut out) })?;
        Ok(unsafe { Tensor::from_ptr(out) })
    }
}
