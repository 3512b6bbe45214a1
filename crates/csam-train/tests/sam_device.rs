//! The SAM / CSAM step on an accelerator agrees with the CPU: the device is a
//! value, never a code path. Skipped with a notice where CUDA is unavailable.

use csam_train::model::{build_model, InputShape};
use csam_train::optim::{SamConfig, SamStep, SecondLoss, Sgd, SgdConfig, StepStats};
use std::collections::BTreeMap;
use tch::{nn, Device, Kind, Tensor};

fn train(device: Device) -> (BTreeMap<String, Tensor>, Vec<StepStats>) {
    tch::manual_seed(3);
    let mut vs = nn::VarStore::new(Device::Cpu);
    let input = InputShape {
        channels: 3,
        height: 8,
        width: 8,
    };
    let model = build_model("resnet20".parse().unwrap(), &vs.root(), input, 10).unwrap();
    vs.double();
    vs.set_device(device);
    let mut opt = Sgd::new(&vs, SgdConfig::default()).unwrap();
    let config = SamConfig {
        second_loss: SecondLoss::Csam {
            gamma: 1.0,
            detach: false,
        },
        m: Some(4),
        ..SamConfig::default()
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    let mut stats = Vec::new();
    for s in 0..3 {
        tch::manual_seed(100 + s);
        let xs = Tensor::randn([8, 3, 8, 8], (Kind::Double, Device::Cpu)).to_device(device);
        let ys = Tensor::randint(10, [8], (Kind::Int64, Device::Cpu)).to_device(device);
        stats.push(step.step(&model, &xs, &ys, &mut opt).unwrap());
    }
    let weights = vs
        .variables()
        .into_iter()
        .map(|(k, v)| {
            assert_eq!(v.device(), device, "{k} left the device");
            (k, v.to_device(Device::Cpu))
        })
        .collect();
    (weights, stats)
}

#[test]
fn sam_step_on_cuda_matches_cpu() {
    tch::set_num_threads(1); // tiny tensors: threads only contend
    if !tch::Cuda::is_available() {
        eprintln!("SKIPPED: no CUDA device");
        return;
    }
    let (cpu, cpu_stats) = train(Device::Cpu);
    let (gpu, gpu_stats) = train(Device::Cuda(0));
    for (k, v) in &cpu {
        let d = (v - &gpu[k]).abs().max().double_value(&[]);
        assert!(d < 1e-9, "{k}: CPU and CUDA differ by {d}");
    }
    for (a, b) in cpu_stats.iter().zip(&gpu_stats) {
        assert!((a.loss - b.loss).abs() < 1e-9 && (a.grad_norm - b.grad_norm).abs() < 1e-9);
    }
}
