//! Any PyTorch model, without porting it: a module the user saved with
//! `torch.jit.script(model).save("model.pt")` (or `torch.jit.trace`) as a
//! csam [`Network`].
//!
//! Its parameters and buffers become the variables of the run's `VarStore`
//! under their PyTorch `state_dict` names (sharing storage with the module),
//! so every update rule, checkpoints, `--resume`, `--init` and weight export
//! work on it as on a native model. The module gives logits only: its
//! "features" are its logits and its classifier the identity, so a head that
//! reads features (BalCAL), the `dropout` option (the module has its own) and
//! replacing its classifier are refused. The module starts from the weights
//! saved in the file, not from the run's seed.
//!
//! Training mode switches through libtorch (`module.train()` / `.eval()`;
//! MC-Dropout sets evaluation mode and then training mode on torch.nn's
//! dropout layers alone). A traced module recorded one mode when it was
//! traced, so modules with BatchNorm or dropout should be scripted.

mod module;

use std::cell::{Cell, RefCell};
use std::path::Path;

use tch::{nn, Tensor};

use super::{InputShape, Mode, ModelError, Network};
use module::{ScriptMode, ScriptModule};

/// A TorchScript module as a csam network.
#[derive(Debug)]
pub struct TorchScriptNetwork {
    module: RefCell<ScriptModule>,
    /// The mode the module is in, so it switches only when the mode changes.
    mode: Cell<ScriptMode>,
    n_classes: i64,
    /// Whether the module has dropout layers with a rate above 0.
    has_dropout: bool,
}

impl TorchScriptNetwork {
    /// Loads `file` onto the device and floating-point kind of `p`'s store,
    /// adds its parameters (trainable where they require gradients) and
    /// buffers under `p`, and checks that it maps a batch of `input` to
    /// `n_classes` logits.
    pub fn load(
        p: &nn::Path,
        file: &Path,
        input: InputShape,
        n_classes: i64,
    ) -> Result<Self, ModelError> {
        let refuse = |why: String| {
            ModelError::InvalidConfig(format!("TorchScript model {}: {why}", file.display()))
        };
        // Modules run unoptimised, for the whole process: the optimising
        // executor profiles the first calls and then runs differentiable
        // subgraphs whose second derivatives are wrong (with PyTorch 2.11, a
        // small convolutional module's Hessian-vector products differ from
        // eager PyTorch's by 0.1 from its second call on; right when
        // unoptimised, as tests/torchscript_torch.rs checks), and its
        // profiling would make a resumed run's first steps differ from the
        // uninterrupted run's.
        tch::jit::set_graph_executor_optimize(false);
        let mut module = ScriptModule::load(file, p.device(), p.kind())?;
        let parameters = module.named_tensors(false).map_err(&refuse)?;
        if !parameters.iter().any(|(_, t)| t.requires_grad()) {
            return Err(refuse("it has no trainable parameters".into()));
        }
        for (name, tensor) in parameters {
            let trainable = tensor.requires_grad();
            add_variable(p, &name, tensor, trainable);
        }
        for (name, tensor) in module.named_tensors(true).map_err(&refuse)? {
            add_variable(p, &name, tensor, false);
        }
        module.set_mode(ScriptMode::Eval).map_err(&refuse)?;
        let has_dropout = module.dropout_layers().map_err(&refuse)? > 0;
        let network = TorchScriptNetwork {
            module: RefCell::new(module),
            mode: Cell::new(ScriptMode::Eval),
            n_classes,
            has_dropout,
        };
        network.check_output(p, input).map_err(refuse)?;
        Ok(network)
    }

    /// Runs an evaluation-mode forward of a zero batch of two `input`s and
    /// checks it gives `[2, n_classes]` floating-point logits.
    fn check_output(&self, p: &nn::Path, input: InputShape) -> Result<(), String> {
        let shape = [2, input.channels, input.height, input.width];
        let xs = Tensor::zeros(shape, (p.kind(), p.device()));
        let logits = tch::no_grad(|| self.module.borrow().forward(&xs))
            .map_err(|e| format!("its forward of a batch {shape:?} fails: {e}"))?;
        let wanted = [2, self.n_classes];
        if logits.size() != wanted || !logits.is_floating_point() {
            return Err(format!(
                "it maps a batch {shape:?} to {:?} {:?} logits, and the data needs {wanted:?}",
                logits.kind(),
                logits.size()
            ));
        }
        Ok(())
    }

    fn enter(&self, mode: Mode) {
        let wanted = match mode {
            Mode::Train => ScriptMode::Train,
            Mode::Eval => ScriptMode::Eval,
            Mode::McDropout => ScriptMode::EvalWithDropout,
        };
        if self.mode.get() != wanted {
            if let Err(e) = self.module.borrow_mut().set_mode(wanted) {
                panic!("libtorch could not set the TorchScript model's mode: {e}");
            }
            self.mode.set(wanted);
        }
    }
}

/// Adds `tensor` to `p`'s store under the dotted `name` (`layer1.0.bn1.weight`
/// is variable `weight` of path `layer1 / 0 / bn1`), so the store's names are
/// the module's `state_dict` keys.
fn add_variable(p: &nn::Path, name: &str, tensor: Tensor, trainable: bool) {
    let mut parts: Vec<&str> = name.split('.').collect();
    let leaf = parts.pop().unwrap_or(name);
    let path = parts.iter().fold(p.clone(), |path, part| path / *part);
    // The store keeps its own handle; the returned one is not needed.
    let _in_store = path.add(leaf, tensor, trainable);
}

impl Network for TorchScriptNetwork {
    /// The module's logits. A forward that passed the check at load time but
    /// fails on a batch (BatchNorm in training mode on one example) panics
    /// with libtorch's message, as a native model's kernels do.
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        self.enter(mode);
        match self.module.borrow().forward(xs) {
            Ok(logits) => logits,
            Err(e) => panic!("the TorchScript model's forward failed: {e}"),
        }
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        features.shallow_clone()
    }

    fn feature_width(&self) -> i64 {
        self.n_classes
    }

    fn classifier_name(&self) -> Option<String> {
        None
    }

    fn own_dropout(&self) -> Option<bool> {
        Some(self.has_dropout)
    }

    fn counts_macs(&self) -> bool {
        false
    }
}
