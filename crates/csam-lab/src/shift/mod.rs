//! Distribution shift and uncertainty (the paper's Table 1 and ImageNet-C
//! columns): the CIFAR-10-C and ImageNet-C directory layouts ([`cifar_c`],
//! [`imagenet_c`]), and evaluation
//! of a run, a deep ensemble or MC-Dropout on clean, corrupted and
//! out-of-distribution data ([`predictor`], [`report`]). The corruptions
//! themselves are `csam_data::corrupt`.

pub mod cifar_c;
pub mod eval_set;
pub mod imagenet_c;
pub mod predictor;
pub mod report;
