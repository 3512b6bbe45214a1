//! The key table: every setting of a run under one flat name, where it lives
//! in the [`super::RunSpec`] tree, what kind of value it takes and which branch
//! of the tree reads it. The flat names are the keys of the flat
//! `config.toml` of earlier releases and, with `-` for `_`, the flags of
//! `csam train`, which the command line builds from this table; so a new
//! setting is a field in its branch and one line here.

use csam_nn::model::{ModelKind, ModelTrait, StochasticDepth};

/// What a key's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// A name or path.
    Text,
    /// A whole number >= 0.
    Count,
    /// A real number.
    Real,
    /// A whole number (a count) or a real number (a fraction).
    CountOrFraction,
    /// `true` or `false`.
    Switch,
    /// Whole numbers >= 0, comma-separated on the command line.
    Counts,
}

/// Which branch of the tree reads a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// Every run.
    Always,
    /// Runs whose `selector` key holds one of `values`.
    When {
        /// The key that chooses the branch (`optimizer`, `schedule`, ...).
        selector: &'static str,
        /// The branches that read the key.
        values: Values,
    },
}

/// The branches of a selector that read a key: named here, or, for the
/// model, the architectures the model registry says read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// These names.
    Named(&'static [&'static str]),
    /// The registered architectures with this trait.
    Models(ModelTrait),
}

impl Values {
    /// The branch names, in the registry's order for models.
    pub fn names(self) -> Vec<&'static str> {
        match self {
            Values::Named(names) => names.to_vec(),
            Values::Models(model_trait) => model_trait.names(),
        }
    }

    /// Whether `name` is one of them.
    pub fn contains(self, name: &str) -> bool {
        match self {
            Values::Named(names) => names.contains(&name),
            Values::Models(model_trait) => name
                .parse::<ModelKind>()
                .is_ok_and(|kind| model_trait.holds(kind)),
        }
    }
}

/// Where a key's value belongs besides the run's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Part of the run: saved in `config.toml`, checked on resume.
    Run,
    /// How this process runs it ([`super::Runtime`]): free to change on resume.
    Runtime,
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The flat name.
    pub name: &'static str,
    /// Its place in the nested `config.toml` (`kind` names an enum's branch).
    pub path: &'static [&'static str],
    /// Its value.
    pub value: ValueKind,
    /// The branches that read it.
    pub applies: Applies,
    /// Run or runtime.
    pub scope: Scope,
    /// The help text: its first line, with the default, is the short help
    /// ([`Key::summary`]); the lines after it, sources and details, complete
    /// the long help ([`Key::help`]), as clap's doc comments split a short
    /// and a long help.
    pub help: &'static str,
}

/// The most characters of a key's first help line: with the flag's column
/// before it, one line of a terminal (`csam train -h`).
pub const SUMMARY_MAX_CHARS: usize = 100;

impl Key {
    /// The first line of the help: what the key sets and its default.
    pub fn summary(&self) -> &'static str {
        self.help.lines().next().unwrap_or_default()
    }

    /// The details after the first line (sources, how the value acts), if any.
    pub fn details(&self) -> Option<&'static str> {
        self.help
            .split_once('\n')
            .map(|(_, details)| details)
            .filter(|details| !details.is_empty())
    }
}

const SAM_FAMILY: &[&str] = &["sam", "asam", "csam", "vasso"];
/// The rules with a SAM ascent of size rho.
const RHO: &[&str] = &["sam", "asam", "csam", "vasso", "bsam"];
/// The architectures that read a key, as the model registry answers.
const CONVOLUTIONAL_MODELS: Values = Values::Models(ModelTrait::Convolutional);
const MEMBER_MODELS: Values = Values::Models(ModelTrait::Members);
const VITS: Values = Values::Models(ModelTrait::Reads(StochasticDepth::DropPath));
const PYRAMIDNETS: Values = Values::Models(ModelTrait::Reads(StochasticDepth::ShakeDrop));
/// The rules with m-sharpness (VASSO averages whole-batch gradients).
const M_SHARPNESS: &[&str] = &["sam", "asam", "csam"];

const fn key(
    name: &'static str,
    path: &'static [&'static str],
    value: ValueKind,
    help: &'static str,
) -> Key {
    Key {
        name,
        path,
        value,
        applies: Applies::Always,
        scope: Scope::Run,
        help,
    }
}

const fn when(
    name: &'static str,
    path: &'static [&'static str],
    value: ValueKind,
    (selector, values): (&'static str, &'static [&'static str]),
    help: &'static str,
) -> Key {
    when_any(name, path, value, (selector, Values::Named(values)), help)
}

/// [`when`] with the branches as [`Values`] (the model's, asked of the registry).
const fn when_any(
    name: &'static str,
    path: &'static [&'static str],
    value: ValueKind,
    (selector, values): (&'static str, Values),
    help: &'static str,
) -> Key {
    Key {
        applies: Applies::When { selector, values },
        ..key(name, path, value, help)
    }
}

const fn runtime(name: &'static str, value: ValueKind, help: &'static str) -> Key {
    Key {
        scope: Scope::Runtime,
        path: &[],
        ..key(name, &[], value, help)
    }
}

use ValueKind::*;

/// Every key, in the order of help texts.
pub static KEYS: &[Key] = &[
    key("data", &["data", "source"], Text,
        "Data set: a bundled name, or a format and its path (SOURCE:PATH)\n\
         Bundled: fashion-mnist, digits, mnist, fashion-mnist-full. From files: idx:DIR, cifar10:DIR, cifar100:DIR, npy:IMAGES,LABELS, folder:DIR, svhn:DIR, tiny-imagenet:DIR, imagenet:DIR."),
    key("val_size", &["data", "val_size"], CountOrFraction,
        "Validation hold-out: a count (5000) or a fraction (0.1) (default 0.2)\n\
         Taken from the training part, stratified by class."),
    key("split_seed", &["data", "split_seed"], Count,
        "Seed of the validation hold-out (default: the run's seed; runs that share it share their split)"),
    key("augment", &["data", "augment"], Switch,
        "Training augmentation: random crop with padding, flip where the data allows it (default false)"),
    key("shuffle", &["data", "shuffle"], Switch,
        "Reshuffle the training set every epoch (default true)"),
    key("seed", &["seed"], Count,
        "Seed of initialisation, split, data order and dropout (default 0)"),
    key("model", &["model", "arch"], Text,
        "Model: an architecture of the registry, or torchscript:FILE (default mlp)\n\
         The architectures are listed in docs/models.md; torchscript:FILE is a PyTorch model saved with torch.jit.script."),
    when("script", &["model", "script"], Text, ("model", &["torchscript"]),
        "The file of a torchscript model (--model torchscript:FILE says both)\n\
         A module saved with torch.jit.script or torch.jit.trace."),
    when("mlp_hidden", &["model", "mlp_hidden"], Counts, ("model", &["mlp"]),
        "MLP hidden widths, comma-separated (default 256,256)"),
    key("dropout", &["model", "dropout"], Real, "Dropout rate in [0, 1) (default 0)"),
    key("precision", &["model", "precision"], Text,
        "Precision of the forward passes: fp32, bf16 or fp16 (default fp32)\n\
         bf16 and fp16 autocast the forward passes to bfloat16 or float16, as torch.autocast; weights, gradients, optimizer state, losses and SAM's perturbation stay in float32. fp16 uses dynamic loss scaling, as torch.amp.GradScaler."),
    when_any("memory_format", &["model", "memory_format"], Text, ("model", CONVOLUTIONAL_MODELS),
        "Layout of convolution weights and batches: contiguous or channels_last (default contiguous)\n\
         contiguous is NCHW; channels_last is NHWC, as model.to(memory_format=torch.channels_last) with each batch converted. Same values; saved weights are in the standard layout."),
    when_any("sync_batch_norm", &["model", "sync_batch_norm"], Switch, ("model", CONVOLUTIONAL_MODELS),
        "Data-parallel runs: BatchNorm uses the global batch's statistics (default false)\n\
         In training, BatchNorm normalises with the statistics of all processes' rows (nn.SyncBatchNorm) instead of each process's own: one all-reduce of 2C+1 values per BatchNorm layer in every forward and backward pass. Changes the results; meant for small per-process batches."),
    when_any("drop_path", &["model", "drop_path"], Real, ("model", VITS),
        "Stochastic depth rate r in [0, 1) of the ViTs (default 0)\n\
         Block i of 12 drops each residual branch per example with rate r i / 11 in training; kept branches are scaled by 1/(1 - rate) (timm's drop_path_rate; Huang et al. 2016)."),
    when_any("shakedrop", &["model", "shakedrop"], Real, ("model", PYRAMIDNETS),
        "ShakeDrop probability p_L in [0, 1) of PyramidNet's last unit (default 0)\n\
         Unit l of L perturbs its residual branch with probability (l / L) p_L (Yamada et al. 2019, who train with 0.5)."),
    key("head", &["model", "head", "kind"], Text,
        "Classifier on the features: linear or balcal (default linear)\n\
         balcal is BalCAL (Ni et al. 2025): the linear classifier balanced with a fixed simplex ETF classifier."),
    when("balcal_lambda", &["model", "head", "lambda"], Real, ("head", &["balcal"]),
        "BalCAL's weight lambda in [0, 1] of the linear classifier at the start (default 0.8)\n\
         Used until the first epoch's end sets it (Ni et al. 2025)."),
    when("balcal_delta", &["model", "head", "delta"], Real, ("head", &["balcal"]),
        "BalCAL's delta > 0, the confidence target as a multiple of accuracy (default 0.95)\n\
         After each epoch lambda is set so that the training logits' mean confidence meets delta times their accuracy (Ni et al. 2025; 0.95 is what the authors' train_BalCAL.sh passes)."),
    when_any("ensemble", &["model", "ensemble", "kind"], Text, ("model", MEMBER_MODELS),
        "Members in one network: single, batch-ensemble or mimo (default single)\n\
         batch-ensemble is BatchEnsemble (Wen et al. 2020): shared weights times rank-1 fast weights per member, trained on every member's loss. mimo is MIMO (Havasi et al. 2021): M images in, M heads out, each member trained on its own shuffle of the batch. Both predict with their members' mean probabilities."),
    when("ensemble_size", &["model", "ensemble", "size"], Count, ("ensemble", &["batch-ensemble", "mimo"]),
        "The number of members M >= 1 (default 4 for batch-ensemble, 3 for mimo)\n\
         The defaults are the authors' CIFAR settings: Wen et al. 2020 for BatchEnsemble, Havasi et al. 2021 for MIMO."),
    when("input_repetition", &["model", "ensemble", "input_repetition"], Real, ("ensemble", &["mimo"]),
        "MIMO's input repetition probability in [0, 1] (default 0)\n\
         The fraction of each training batch's rows that every member reads in the same order; the default is uncertainty-baselines' CIFAR setting."),
    when("batch_repetitions", &["model", "ensemble", "batch_repetitions"], Count, ("ensemble", &["mimo"]),
        "MIMO's batch repetitions r >= 1 (default 4)\n\
         Each member reads its own shuffle of the batch repeated r times; the default is uncertainty-baselines' CIFAR setting."),
    when("random_sign_init", &["model", "ensemble", "random_sign_init"], Real, ("ensemble", &["batch-ensemble"]),
        "How BatchEnsemble's fast weights start: random signs (v > 0) or N(1, v^2) (default -0.5)\n\
         v > 0: random signs, +1 with probability v; v <= 0: N(1, v^2). With bayesian rank1 this sets their means. The default is uncertainty-baselines' CIFAR setting for BatchEnsemble (batchensemble.py); its rank1_bnn.py, which compare's rank1 follows, uses 0.5."),
    when_any("bayesian", &["model", "bayesian", "kind"], Text, ("model", MEMBER_MODELS),
        "Posterior over the weights: none, mean-field or rank1 (default none)\n\
         mean-field is variational inference with the Flipout estimator (Wen et al. 2018, as Ovadia et al. 2019): every weight N(mu, sigma^2), sigma = softplus(rho) + 1e-7. rank1 is the rank-1 BNN (Dusenberry et al. 2020): with ensemble batch-ensemble, each member's fast weights r, s are Gaussian, sampled per example, prior N(1, prior_std^2). Both train on the loss plus KL(q || p) / N and predict with the mean probabilities of weight samples (and members); both need weight_decay 0."),
    when("prior_std", &["model", "bayesian", "prior_std"], Real, ("bayesian", &["mean-field", "rank1"]),
        "The prior's standard deviation > 0 (default 1 for mean-field, 0.1 for rank1)\n\
         mean-field's weights are N(0, prior_std^2) (TensorFlow Probability's default prior, as Ovadia et al. 2019), or N(mu, prior_std^2) with tied_prior_mean; rank1's factors N(1, prior_std^2) (uncertainty-baselines' rank1_bnn.py)."),
    when("tied_prior_mean", &["model", "bayesian", "tied_prior_mean"], Switch, ("bayesian", &["mean-field"]),
        "Centre mean-field's prior on each weight's posterior mean (default false)\n\
         The KL term then constrains only sigma, not the weights: edward2's NormalKLDivergenceWithTiedMean, as uncertainty-baselines' variational_inference.py. false: the prior is centred at 0 (TensorFlow Probability's, as Ovadia et al. 2019)."),
    when("stddev_init", &["model", "bayesian", "stddev_init"], Real, ("bayesian", &["mean-field"]),
        "Where mean-field's posterior standard deviations start, > 0 (default 0.0486)\n\
         rho starts from N(ln(expm1(stddev_init)), 0.1^2), so sigma = softplus(rho) + 1e-7 starts near it (edward2's convention; uncertainty-baselines' variational_inference.py: 1e-3). The default is TensorFlow Probability's rho from N(-3, 0.1^2), as Ovadia et al. 2019."),
    when("posterior_samples", &["model", "bayesian", "samples"], Count, ("bayesian", &["mean-field", "rank1"]),
        "Weight samples S >= 1 averaged by a prediction (default 5 for mean-field, 1 for rank1)\n\
         A prediction is the mean probabilities of S weight samples, over the members too for rank1. The defaults are uncertainty-baselines' num_eval_samples and that of its rank1_bnn.py."),
    when("kl_annealing_epochs", &["model", "bayesian", "kl_annealing_epochs"], Count, ("bayesian", &["mean-field", "rank1"]),
        "Epochs over which the KL term's weight rises linearly to 1 (default 0)\n\
         The weight is min(1, (step + 1) / (epochs x steps per epoch)), uncertainty-baselines' KL annealing; 0 weighs it 1 from the start, as Ovadia et al. 2019. compare's vi and rank1 anneal over 4/5 of the run's epochs (the authors' 200 of 250)."),
    key("init", &["model", "init"], Text,
        "Start from these safetensors weights (PyTorch key names of the model's twin)"),
    key("init_new_classifier", &["model", "init_new_classifier"], Switch,
        "With init: keep the model's own new classifier instead of the file's (default false)\n\
         The freshly initialised classifier (and BalCAL head) is kept, to fine-tune on other classes."),
    key("loss", &["loss", "kind"], Text,
        "Training loss, each described in docs/losses.md (default cross-entropy)"),
    when("focal_gamma", &["loss", "gamma"], Real, ("loss", &["focal", "dual-focal", "mdca"]),
        "Exponent gamma >= 0 of focal, dual focal and MDCA's focal loss (default 3 / 2.6 / 0)\n\
         Focal loss: 3, Mukhoti et al. 2020's FL-3. Dual focal loss: 2.6, Tao et al. 2023's value for a Wide ResNet on CIFAR-10 (docs/losses.md lists their others). MDCA's focal loss: 0, cross entropy, Hebbalaguppe et al. 2022's NLL+MDCA."),
    when("smoothing", &["loss", "epsilon"], Real, ("loss", &["label-smoothing"]),
        "Label smoothing epsilon in [0, 1) (default 0.05)\n\
         The setting of the calibration code bases that compare with it (by-liu/MbLS, by-liu/CALS, cvlab-yonsei/ACLS: configs/loss/ls.yaml); Szegedy et al. 2016 used 0.1."),
    when("margin", &["loss", "margin"], Real, ("loss", &["mbls", "acls"]),
        "Margin m > 0 of MbLS and of ACLS (default 10)\n\
         MbLS's margin on the logit distances (Liu et al. 2022); ACLS's (Park et al. 2023)."),
    when("margin_weight", &["loss", "alpha"], Real, ("loss", &["mbls", "acls"]),
        "Weight alpha >= 0 of the MbLS margin penalty and of the ACLS regulariser (default 0.1 for both)"),
    when("acls_pos_lambda", &["loss", "pos_lambda"], Real, ("loss", &["acls"]),
        "ACLS weight >= 0 of the largest logit's term (default 1, Park et al. 2023)"),
    when("acls_neg_lambda", &["loss", "neg_lambda"], Real, ("loss", &["acls"]),
        "ACLS weight >= 0 of the other logits' term (default 0.1, Park et al. 2023)"),
    when("adafocal_lambda", &["loss", "rate"], Real, ("loss", &["adafocal"]),
        "AdaFocal's rate lambda > 0 of its exponents' update after each epoch (default 1, Ghosh et al. 2022)"),
    when("adafocal_initial_gamma", &["loss", "initial_gamma"], Real, ("loss", &["adafocal"]),
        "AdaFocal's exponent of every bin before the first update (default 1, Ghosh et al. 2022)"),
    when("adafocal_gamma_max", &["loss", "gamma_max"], Real, ("loss", &["adafocal"]),
        "AdaFocal's largest exponent (default 20, Ghosh et al. 2022)"),
    when("adafocal_gamma_min", &["loss", "gamma_min"], Real, ("loss", &["adafocal"]),
        "AdaFocal's smallest exponent, < 0 for inverse focal loss (default -2, Ghosh et al. 2022)"),
    when("adafocal_switch", &["loss", "switch"], Real, ("loss", &["adafocal"]),
        "AdaFocal's least exponent magnitude S_th > 0 (default 0.2)\n\
         Where focal and inverse focal loss switch (Ghosh et al. 2022)."),
    when("adafocal_bins", &["loss", "bins"], Count, ("loss", &["adafocal"]),
        "AdaFocal's number of equal-mass validation confidence bins (default 15, Ghosh et al. 2022)"),
    when("crl_weight", &["loss", "weight"], Real, ("loss", &["crl"]),
        "Weight >= 0 of CRL's correctness ranking term added to cross entropy (default 1, Moon et al. 2020)"),
    when("mmce_lambda", &["loss", "lambda"], Real, ("loss", &["mmce"]),
        "Weight lambda >= 0 of MMCE_w added to cross entropy (default 2)\n\
         Mukhoti et al. 2020's runs of Kumar et al. 2018."),
    when("mdca_beta", &["loss", "beta"], Real, ("loss", &["mdca"]),
        "Weight beta >= 0 of MDCA added to the classification loss (default 1, Hebbalaguppe et al. 2022)"),
    when("cpc_bdc_weight", &["loss", "bdc_weight"], Real, ("loss", &["cpc"]),
        "CPC weight >= 0 of the discrimination constraints (default 0.1)\n\
         Cheng and Vasconcelos 2022, as by-liu/CALS."),
    when("cpc_bec_weight", &["loss", "bec_weight"], Real, ("loss", &["cpc"]),
        "CPC weight >= 0 of the exclusion constraints (default 1)\n\
         Cheng and Vasconcelos 2022, as by-liu/CALS."),
    key("mixing", &["mixing", "kind"], Text,
        "Input mixing of training: none, mixup or mit-l (default none)\n\
         mixup: Zhang et al. 2018. mit-l: mixup inference in training, Wang et al. 2023."),
    when("mixup_alpha", &["mixing", "alpha"], Real, ("mixing", &["mixup", "mit-l"]),
        "Mixing coefficients from Beta(alpha, alpha) (default 1)\n\
         alpha >= 0 for mixup (0: no mixing), > 0 for MIT-L (Zhang et al. 2018; Wang et al. 2023)."),
    when("mit_margin", &["mixing", "margin"], Real, ("mixing", &["mit-l"]),
        "MIT-L's least gap l1 - l2 between its two coefficients, in [0, 1) (default 0, Wang et al. 2023)"),
    key("epochs", &["epochs"], Count, "Number of epochs (default 20)"),
    key("batch_size", &["batch_size"], Count, "Mini-batch size (default 128)"),
    key("lr", &["optim", "lr"], Real, "Peak learning rate (default 0.05)"),
    key("weight_decay", &["optim", "weight_decay"], Real,
        "Weight decay of the base optimizer; with bSAM its delta, the prior precision over N (default 5e-4)"),
    key("clip", &["optim", "clip"], Real, "Clip the global L2 norm of the descent gradient"),
    key("base_optimizer", &["optim", "base", "kind"], Text,
        "Base optimizer (default sgd)"),
    key("momentum", &["optim", "base", "momentum"], Real,
        "Momentum of SGD / beta1 of AdamW and of bSAM (default 0.9)"),
    when("nesterov", &["optim", "base", "nesterov"], Switch, ("base_optimizer", &["sgd"]),
        "Nesterov momentum (SGD base optimizer; default false)"),
    key("schedule", &["optim", "schedule", "kind"], Text,
        "Learning-rate schedule (default cosine)"),
    when("warmup_epochs", &["optim", "schedule", "warmup_epochs"], Count, ("schedule", &["cosine"]),
        "Linear warm-up epochs of the cosine schedule (default 0)"),
    when("min_lr", &["optim", "schedule", "min_lr"], Real, ("schedule", &["cosine"]),
        "Final learning rate of the cosine schedule (default 0)"),
    when("step_size", &["optim", "schedule", "step_size"], Count, ("schedule", &["step"]),
        "Epochs between two decays of the step schedule (default 60)"),
    when("decay_factor", &["optim", "schedule", "decay_factor"], Real, ("schedule", &["step"]),
        "Factor in (0, 1] of each step-schedule decay (default 0.1)"),
    key("optimizer", &["optim", "rule", "kind"], Text,
        "Update rule (default sgd)"),
    when("rho", &["optim", "rule", "rho"], Real, ("optimizer", RHO),
        "Perturbation radius of SAM / ASAM / CSAM / VASSO (default 0.05); bSAM's rho (default 0.01)\n\
         bSAM's rho is the one in its ascent rho g / s."),
    when("bsam_beta2", &["optim", "rule", "beta2"], Real, ("optimizer", &["bsam"]),
        "bSAM's beta2 in [0, 1) of its precision's moving average (default 0.999, Mollenhoff and Khan 2023)"),
    when("bsam_damping", &["optim", "rule", "damping"], Real, ("optimizer", &["bsam"]),
        "bSAM's damping gamma > 0 added to its precision every step (default 0.1)"),
    when("bsam_init_precision", &["optim", "rule", "init_precision"], Real, ("optimizer", &["bsam"]),
        "bSAM's precision s0 > 0 of every weight before the first step (default 1)"),
    when("bsam_data_factor", &["optim", "rule", "data_factor"], Real, ("optimizer", &["bsam"]),
        "bSAM's N is the training split's size times this factor > 0 (default 1)\n\
         The authors use 4 with CIFAR's augmentation."),
    when("vasso_theta", &["optim", "rule", "theta"], Real, ("optimizer", &["vasso"]),
        "VASSO's weight theta in (0, 1] of the new gradient in its average direction (default 0.9)\n\
         The authors' default and the setting of their WRN-28-10 script (BingcongLi/VaSSO)."),
    when("eta", &["optim", "rule", "eta"], Real, ("optimizer", &["asam"]),
        "ASAM's eta in T_w = |w| + eta (default 0.01)"),
    when("asam_scale_all", &["optim", "rule", "scale_all"], Switch, ("optimizer", &["asam"]),
        "ASAM's T on every parameter tensor, as davda54/sam's adaptive=True (default false)\n\
         The authors' code (SamsungLabs/ASAM) scales only the parameters named weight and adds 1e-16 to the norm; davda54/sam scales biases and BatchNorm's shift too, adds 1e-12 and has no eta (set eta = 0 for its step)."),
    when("gamma", &["optim", "rule", "gamma"], Real, ("optimizer", &["csam"]),
        "CSAM's gamma, 0 <= gamma <= 2; 0 is SAM (default 1)"),
    when("csam_detach", &["optim", "rule", "detach"], Switch, ("optimizer", &["csam"]),
        "Treat CSAM's factor (1 + p)^-gamma as a constant weight (default false)\n\
         The factor is then not differentiated."),
    when("m", &["optim", "rule", "m"], Count, ("optimizer", M_SHARPNESS),
        "m-sharpness: sub-batch size with its own perturbation (default: the whole batch)"),
    when("global_ascent", &["optim", "global_ascent"], Switch, ("optimizer", SAM_FAMILY),
        "Data-parallel runs: perturb with the global batch's gradient (default false)\n\
         The gradient averaged over the processes: exact SAM, a second all-reduce per step. Without it each process perturbs with its own gradient (m-sharpness with m = the per-process batch)."),
    when("sam_every", &["optim", "rule", "every"], Count, ("optimizer", SAM_FAMILY),
        "Take the sharpness-aware step on every k-th step only (default 1)"),
    when("sam_policy", &["optim", "policy", "kind"], Text, ("optimizer", SAM_FAMILY),
        "When and where SAM's passes run: every, rst, looksam, aesam, esam, subbatch, msam (default every)\n\
         every: every sam_every-th step. rst: with probability p (Zhao et al. 2022). looksam: every k-th, reusing its direction in between (Liu et al. 2022). aesam: where ||g||^2 is high (Jiang et al. 2023). esam: every step, perturbing a random share of the weights and running the second pass on the examples whose loss rises most (Du et al. 2022). subbatch: every step, the first pass (the ascent's direction) on a share of the batch, the second on all of it. msam: no first pass, the perturbation along SGD's momentum (Becker et al. 2024), one pass a step."),
    when("rst_p", &["optim", "policy", "p"], Real, ("sam_policy", &["rst"]),
        "RST's probability in [0, 1] of a SAM step (at the first step when rst_p_end is set) (default 0.5)"),
    when("rst_p_end", &["optim", "policy", "p_end"], Real, ("sam_policy", &["rst"]),
        "RST's probability in [0, 1] at the last step, linear from rst_p (default: constant rst_p)"),
    when("looksam_k", &["optim", "policy", "k"], Count, ("sam_policy", &["looksam"]),
        "LookSAM's steps between two SAM steps, >= 1 (default 5, Liu et al. 2022)"),
    when("looksam_alpha", &["optim", "policy", "alpha"], Real, ("sam_policy", &["looksam"]),
        "LookSAM's weight alpha >= 0 of the reused direction (default 0.7, Liu et al. 2022)"),
    when("aesam_delta", &["optim", "policy", "delta"], Real, ("sam_policy", &["aesam"]),
        "AE-SAM's factor in [0, 1) of the moving mean and variance of ||g||^2 (default 0.9)\n\
         Jiang et al. 2023."),
    when("aesam_lambda1", &["optim", "policy", "lambda1"], Real, ("sam_policy", &["aesam"]),
        "AE-SAM's threshold factor c at the first step (default -1)"),
    when("aesam_lambda2", &["optim", "policy", "lambda2"], Real, ("sam_policy", &["aesam"]),
        "AE-SAM's threshold factor c at the last step (default 1)"),
    when("esam_beta", &["optim", "policy", "beta"], Real, ("sam_policy", &["esam"]),
        "ESAM's share in (0, 1] of the weights each step perturbs (default 0.6)\n\
         The perturbation is rescaled by 1/beta (Du et al. 2022)."),
    when("esam_gamma", &["optim", "policy", "gamma"], Real, ("sam_policy", &["esam"]),
        "ESAM's share in (0, 1] of the batch that the second pass trains on (default 0.5)\n\
         The examples whose loss rises most (Du et al. 2022)."),
    when("subbatch_fraction", &["optim", "policy", "fraction"], Real, ("sam_policy", &["subbatch"]),
        "The sub-batch ascent's share in (0, 1] of the batch in the first pass (default 0.25)\n\
         The first pass only chooses the perturbation's direction; its rows are the batch's first ceil(fraction B), and BatchNorm's running statistics move with them."),
    when("msam_direction", &["optim", "policy", "direction"], Text, ("sam_policy", &["msam"]),
        "Momentum-SAM's perturbation: descent or ascent along SGD's momentum v (default descent)\n\
         descent: theta - rho v/||v||, the authors' rule (Becker et al. 2024). ascent: theta + rho v/||v||, SAM's ascent with the momentum in place of the batch's gradient (csam's variant, no published source). Needs SGD with momentum > 0, without Nesterov; rho is the rule's."),
    key("best_metric", &["selection"], Text,
        "Validation metric of the best checkpoint (default nll)"),
    key("bins", &["metrics", "n_bins"], Count, "Bins of every binned metric (default 15)"),
    key("edges", &["metrics", "edges"], Text,
        "Equal-width bin edges: right-closed or left-closed-with-one-bin (default right-closed)\n\
         right-closed: bins (lo, hi]. left-closed-with-one-bin: bins [lo, hi), confidence 1 in an extra bin."),
    key("adaptive", &["metrics", "adaptive"], Text,
        "AdaECE variant (default interpolated)"),
    when("track_theory", &["track_theory"], Switch, ("optimizer", &["sam", "csam"]),
        "Log the paper's per-step diagnostics to theory.jsonl (SAM and CSAM only)"),
    runtime("device", Text, "cpu, cuda or cuda:N (default: cuda when available)"),
    runtime("threads", Count, "CPU threads of libtorch (default: libtorch's)"),
    runtime("workers", Count,
        "Threads that decode a streamed data set's images (default: one per core)\n\
         For imagenet:DIR; the batches do not depend on it."),
    runtime("resident_data", Switch,
        "Keep the training split on the device and augment batches there (default false)\n\
         The padded bytes (at most 4 GiB off the CPU) stay on the device, which crops, flips and normalises each batch, so a GPU never waits for the host; in-memory data sets only (not imagenet:DIR). The batches are the same bits either way: on the CPU it changes nothing but where the gather runs, and is slower there."),
    runtime("tensorboard", Switch,
        "Write a TensorBoard event file into the run directory (default true)\n\
         events.out.tfevents.* holds every number of metrics.jsonl per epoch and, with track_theory, of theory.jsonl per step; tensorboard --logdir DIR plots it, also while the run trains. On by default: under a kilobyte per epoch, one append per epoch, and no number of the run changes."),
    runtime("log_every_n_steps", Count,
        "The event file's training loss and learning rate every N steps (default 50; 0: none)\n\
         train/loss_step (the batch's mean loss at theta) and lr_step at step = the global step, from step 0, as Lightning's log_every_n_steps; read from the step's statistics, which training reads anyway. Data-parallel: rank 0's part of the batch."),
];

/// The key named `name`.
pub fn find(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The names of the runtime keys, in the table's order: the settings a
/// resumed run may change.
pub fn runtime_names() -> Vec<&'static str> {
    KEYS.iter()
        .filter(|k| k.scope == Scope::Runtime)
        .map(|k| k.name)
        .collect()
}

/// The key whose value lives at `path`.
pub fn at_path(path: &[String]) -> Option<&'static Key> {
    KEYS.iter()
        .find(|k| k.scope == Scope::Run && k.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_summary_is_one_short_line_and_details_follow_it() {
        for key in KEYS {
            let summary = key.summary();
            assert!(
                !summary.is_empty() && summary.chars().count() <= SUMMARY_MAX_CHARS,
                "{}: {} characters",
                key.name,
                summary.chars().count()
            );
            if let Some(details) = key.details() {
                assert!(
                    !details.contains('\n'),
                    "{}: one paragraph of details",
                    key.name
                );
                assert_eq!(key.help, format!("{summary}\n{details}"));
            }
        }
        let precision = find("precision").unwrap();
        assert!(precision
            .details()
            .unwrap()
            .contains("torch.amp.GradScaler"));
        assert!(find("seed").unwrap().details().is_none());
    }

    /// The line that starts the generated part of `docs/run-spec.md`.
    const REFERENCE_START: &str =
        "<!-- The key reference below is generated from the key table. -->";

    /// The key table as a Markdown table: name, place, branches, whole help.
    fn reference() -> String {
        let cell = |text: &str| text.replace('|', "\\|").replace('\n', "<br>");
        let mut doc = format!(
            "{REFERENCE_START}\n\n## Every key\n\n\
             The flag is `--` and the name with `-` for `_` (`csam train -h` lists the few \
             other spellings); `csam train --help` shows the same text.\n\n\
             | Key | In `config.toml` | Read when | What it sets |\n|---|---|---|---|\n"
        );
        for key in KEYS {
            let place = match key.scope {
                Scope::Run => format!("`{}`", key.path.join(".")),
                Scope::Runtime => "`runtime.toml`".to_string(),
            };
            let applies = match key.applies {
                Applies::Always => "always".to_string(),
                Applies::When { selector, values } => {
                    format!("`{selector}`: {}", values.names().join(", "))
                }
            };
            doc.push_str(&format!(
                "| `{}` | {place} | {applies} | {} |\n",
                key.name,
                cell(key.help)
            ));
        }
        doc
    }

    #[test]
    fn the_key_reference_in_the_docs_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/run-spec.md");
        let doc = std::fs::read_to_string(&path).expect("docs/run-spec.md");
        let written = doc
            .split_once(REFERENCE_START)
            .map_or(doc.as_str(), |(before, _)| before);
        let generated = format!("{}{}", written, reference());
        if std::env::var_os("CSAM_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &generated).expect("write docs/run-spec.md");
        }
        let committed = std::fs::read_to_string(&path).expect("docs/run-spec.md");
        assert!(
            committed == generated,
            "docs/run-spec.md's key reference is stale; regenerate it with \
             CSAM_UPDATE_DOCS=1 cargo test -p csam-train --lib keys"
        );
    }
}
