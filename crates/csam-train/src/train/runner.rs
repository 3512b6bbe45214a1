//! The epoch loop: train, validate, keep the best checkpoint, checkpoint for
//! resume, stop on divergence, and finish with the test evaluation of the
//! best weights.

use std::path::PathBuf;
use std::time::Instant;

use super::checkpoint::{self, epoch_seed, BestRecord, TrainState};
use super::claim::Claim;
use super::divergence::Divergence;
use super::error::{Result, TrainError};
use super::evaluate::Predictions;
use super::integrity;
use super::metrics_log::{EpochRecord, MetricsLog, TrainStats};
use super::notice::{self, RunNotice};
use super::observer::RunObserver;
use super::preflight;
use super::replica::Replica;
use super::run_data::TrainEpoch;
use super::rundir::{Plan, RunDir, Split};
use super::session::Session;
use super::summary::RunSummary;
use crate::spec::{BestMetric, RunSpec, Runtime};
use crate::tensorboard::{EventWriter, Progress, StepPoint};
use crate::theory::{self, TheoryLog, TheoryRecord, TheorySummary};
use csam_calib::metrics::summary::MetricSummary;
use csam_data::Shard;
use csam_nn::device::{device_name, parse_device};
use csam_nn::model::precision::Precision;

/// What `csam train` asks for.
#[derive(Debug, Clone)]
pub struct TrainRequest {
    /// What the run is.
    pub spec: RunSpec,
    /// How this process runs it (device, threads).
    pub runtime: Runtime,
    /// The run directory.
    pub out: PathBuf,
    /// Continue the unfinished run in `out`.
    pub resume: bool,
    /// Test hook: return after this epoch's checkpoint as if the process had
    /// been killed (no final evaluation, no summary).
    pub stop_after_epoch: Option<usize>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// All epochs trained; the summary was written.
    Finished(Box<RunSummary>),
    /// A resume of a run that had already finished: nothing was trained.
    AlreadyFinished {
        /// Its `summary.json`.
        summary: PathBuf,
    },
    /// Stopped by `stop_after_epoch` after checkpointing this epoch.
    Stopped {
        /// The last checkpointed epoch.
        epoch: usize,
    },
    /// A data-parallel process other than rank 0 trained its part of every
    /// epoch; rank 0 wrote the run's results.
    Replicated {
        /// This process's rank.
        rank: usize,
    },
}

/// The value of `metric` in a metric summary.
fn metric_value(metric: BestMetric, summary: &MetricSummary) -> f64 {
    match metric {
        BestMetric::Nll => summary.nll,
        BestMetric::Ece => summary.ece,
        BestMetric::Adaece => summary.adaece,
        BestMetric::Brier => summary.brier,
        BestMetric::Accuracy => summary.accuracy,
    }
}

/// A run checked and ready to train: its directory claimed (see
/// [`super::claim`]), its data loaded, its model built, the free space
/// checked. Its notices say what it does differently than asked.
pub struct PreparedRun {
    notices: Vec<RunNotice>,
    work: Work,
}

enum Work {
    /// A resume of a finished run.
    Finished(PathBuf),
    Train(Box<Training>),
}

/// What the epoch loop needs.
struct Training {
    session: Session,
    runtime: Runtime,
    run_dir: RunDir,
    resuming: bool,
    stop_after_epoch: Option<usize>,
    /// Held until the run's outcome is written; None on a data-parallel
    /// process that does not write (rank 0 holds the run's claim).
    claim: Option<Claim>,
}

/// How rank 0 tells the other processes of a data-parallel run what the
/// run directory holds ([`Replica::agree`]).
const PLAN_START: i64 = 0;
const PLAN_RESUME: i64 = 1;
const PLAN_FINISHED: i64 = 2;

/// Checks everything a run can check before training: the configuration,
/// the run directory (a resume of a finished run keeps it as it is and
/// trains nothing), whether it can be written, the data, the model and the
/// free space. Creates and locks the directory only when all of that
/// passed.
pub fn prepare(request: &TrainRequest) -> Result<PreparedRun> {
    prepare_replica(request, None)
}

/// [`prepare`] for one process of a data-parallel run (see
/// [`super::replica`]): rank 0 claims and checks the run directory and
/// tells the other processes whether to start, resume or stop; they write
/// nothing. `None`: the run's only process.
pub fn prepare_replica(request: &TrainRequest, replica: Option<Replica>) -> Result<PreparedRun> {
    let spec = &request.spec;
    spec.validate()?;
    request.runtime.validate()?;
    let device = parse_device(request.runtime.device.as_deref())
        .map_err(|e| TrainError::Device(e.text, e.reason))?;
    if replica.is_some() && device != tch::Device::Cpu {
        return Err(TrainError::Device(
            device_name(device),
            "data-parallel training runs on the CPU (Gloo); NCCL for GPUs is not available yet"
                .into(),
        ));
    }
    let run_dir = RunDir::new(&request.out);
    if let Some(follower) = replica.as_ref().filter(|r| !r.writes()) {
        let resuming = match follower.agree(-1)? {
            PLAN_FINISHED => {
                return Ok(PreparedRun {
                    notices: Vec::new(),
                    work: Work::Finished(run_dir.summary()),
                })
            }
            plan => plan == PLAN_RESUME,
        };
        request.runtime.apply_threads();
        let session = Session::prepare(spec, device, &request.runtime, replica)?;
        let training = Training::new(request, session, (run_dir, resuming), None);
        return Ok(PreparedRun::train(Vec::new(), training));
    }
    let mut claim = Claim::new(&run_dir, request.resume)?;
    let plan = claim.plan();
    let mut notices = Vec::new();
    if plan == Plan::Resume {
        notices.extend(integrity::check_resume(&run_dir)?);
    }
    if matches!(plan, Plan::Resume | Plan::Finished) {
        check_resume_spec(&run_dir, spec)?;
    }
    if let Some(replica) = &replica {
        replica.agree(match plan {
            Plan::Finished => PLAN_FINISHED,
            Plan::Resume => PLAN_RESUME,
            Plan::Start(_) => PLAN_START,
        })?;
    }
    let resuming = match plan {
        Plan::Finished => {
            return Ok(PreparedRun {
                notices,
                work: Work::Finished(run_dir.summary()),
            })
        }
        Plan::Resume => true,
        Plan::Start(nothing) => {
            notices.extend(nothing.map(|why| RunNotice::NothingToResume {
                dir: request.out.clone(),
                why,
            }));
            false
        }
    };
    preflight::check_writable(run_dir.root())?;
    request.runtime.apply_threads();
    let session = Session::prepare(spec, device, &request.runtime, replica)?;
    notices.extend(notice::full_batch(spec.batch_size, session.data.n_train()));
    let run_bytes = session.estimated_output_bytes();
    let needed = match resuming {
        true => preflight::estimate_resume_bytes(
            run_bytes,
            preflight::weight_bytes(session.trainer.var_store()),
        ),
        false => run_bytes,
    };
    preflight::check_free_space(run_dir.root(), needed, resuming)?;
    claim.create(&run_dir)?;
    let training = Training::new(request, session, (run_dir, resuming), Some(claim));
    Ok(PreparedRun::train(notices, training))
}

impl Training {
    fn new(
        request: &TrainRequest,
        session: Session,
        (run_dir, resuming): (RunDir, bool),
        claim: Option<Claim>,
    ) -> Training {
        Training {
            session,
            runtime: request.runtime.clone(),
            run_dir,
            resuming,
            stop_after_epoch: request.stop_after_epoch,
            claim,
        }
    }
}

/// Trains the run described by `request` (see the module doc of
/// [`super`] for what the run directory receives); [`prepare`] then
/// [`PreparedRun::run`], for callers that need no notices. `observer` hears
/// of every epoch and step.
pub fn run(request: &TrainRequest, observer: &mut dyn RunObserver) -> Result<RunOutcome> {
    prepare(request)?.run(observer)
}

impl PreparedRun {
    fn train(notices: Vec<RunNotice>, training: Training) -> PreparedRun {
        PreparedRun {
            notices,
            work: Work::Train(Box::new(training)),
        }
    }

    /// What the run does differently than asked; empty for most runs.
    pub fn notices(&self) -> &[RunNotice] {
        &self.notices
    }

    /// Trains the remaining epochs, then evaluates the best weights,
    /// reporting to `observer`.
    pub fn run(self, observer: &mut dyn RunObserver) -> Result<RunOutcome> {
        match self.work {
            Work::Finished(summary) => Ok(RunOutcome::AlreadyFinished { summary }),
            Work::Train(mut training) => {
                // The claim is held until a divergence is recorded, and only
                // the process that holds it (that writes the run directory)
                // records one: every data-parallel rank sees it.
                let claim = training.claim.take();
                let run_dir = training.run_dir.clone();
                let outcome = train(*training, observer);
                if let (Err(error), Some(_)) = (&outcome, &claim) {
                    if let Some(divergence) = Divergence::of(error) {
                        divergence.write(&run_dir)?;
                    }
                }
                outcome
            }
        }
    }
}

/// The epoch loop from the first epoch still to train, then the final
/// evaluation of the best weights. A data-parallel process other than rank
/// 0 trains its part of each epoch and nothing else ([`follow`]).
fn train(training: Training, observer: &mut dyn RunObserver) -> Result<RunOutcome> {
    if let Some(rank) = training
        .session
        .replica
        .as_ref()
        .filter(|r| !r.writes())
        .map(Replica::rank)
    {
        return follow(training, observer, rank);
    }
    let Training {
        mut session,
        runtime,
        run_dir,
        resuming,
        stop_after_epoch,
        ..
    } = training;
    let spec = session.spec.clone();
    let tensorboard = runtime.tensorboard;
    let point_every = match tensorboard {
        true => runtime.log_every_n_steps,
        false => 0,
    };
    run_dir.remove_temporaries()?;
    // This attempt replaces the record of an earlier one that diverged.
    Divergence::clear(&run_dir)?;
    super::atomic::write_atomic(&run_dir.config(), spec.to_toml().as_bytes())?;
    let runtime = toml::to_string(&runtime).unwrap_or_default();
    super::atomic::write_atomic(&run_dir.root().join(Runtime::FILE), runtime.as_bytes())?;
    session.data.save_normalization(&run_dir.normalization())?;

    let log = MetricsLog::new(run_dir.metrics_log());
    let mut state = restore(&mut session, &run_dir, resuming)?;
    log.truncate_after(state.epochs_done)?;
    let theory_log = spec
        .track_theory
        .then(|| theory::theory_log(run_dir.root()));
    if let Some(theory_log) = &theory_log {
        theory_log.truncate_after(state.epochs_done)?;
    }
    let done = Progress {
        epochs: state.epochs_done,
        global_step: state.global_step,
    };
    let events = match tensorboard {
        true => Some(EventWriter::for_run(&run_dir, done)?),
        false => None,
    };

    for epoch in state.epochs_done + 1..=spec.epochs {
        let started = Instant::now();
        let mut steps = StepRecords::every(point_every);
        let (train, lr) = train_epoch(&mut session, &mut state, epoch, observer, &mut steps)?;
        let balcal_lambda = session.trainer.end_epoch_steps()?;
        let val = session.predict_split(Split::Val)?;
        if val.non_finite_rows() > 0 {
            let what = format!(
                "{} validation examples have non-finite logits",
                val.non_finite_rows()
            );
            return Err(diverged(epoch, session.steps_per_epoch(), &what, &state));
        }
        session.trainer.end_epoch(epoch, &val)?;
        let val_metrics = val.summarize(&spec.metrics)?;
        let test_metrics = session
            .predict_split(Split::Test)?
            .summarize_with_tce(&val, &spec.metrics)?;
        let value = metric_value(spec.selection, &val_metrics);
        let best = spec.selection.improves(value, state.best.map(|b| b.value));
        let last_good_epoch = state.epochs_done;
        if best {
            state.best = Some(BestRecord { epoch, value });
        }
        let seconds = started.elapsed().as_secs_f64();
        let record = EpochRecord {
            epoch,
            lr,
            train,
            balcal_lambda,
            val: val_metrics,
            test: Some(test_metrics),
            best,
            seconds,
        };
        state.epochs_done = epoch;
        state.elapsed_s += seconds;
        let logs = EpochLogs {
            metrics: &log,
            theory: theory_log.as_ref(),
            events: events.as_ref(),
        };
        save_epoch(&run_dir, logs, &steps, &session, &state, &record).map_err(|cause| {
            TrainError::SaveFailed {
                epoch,
                last_good_epoch,
                cause: Box::new(cause),
            }
        })?;
        observer.epoch_finished(&record, spec.epochs);
        if stop_after_epoch == Some(epoch) && epoch < spec.epochs {
            return Ok(RunOutcome::Stopped { epoch });
        }
    }
    let summary = finish(&mut session, &run_dir, &state, observer)?;
    if let Some(replica) = &session.replica {
        replica.barrier()?;
    }
    Ok(RunOutcome::Finished(Box::new(summary)))
}

/// The training state to continue from: the checkpoint's when resuming,
/// the start otherwise; on every process of a data-parallel run, rank 0's
/// weights, buffers and optimiser state then replace the others'.
fn restore(session: &mut Session, run_dir: &RunDir, resuming: bool) -> Result<TrainState> {
    let processes = session.replica.as_ref().map_or(1, Replica::world_size);
    let state = match resuming {
        true => session.trainer.restore(run_dir)?,
        false => None,
    }
    .unwrap_or(TrainState {
        epochs_done: 0,
        global_step: 0,
        best: None,
        elapsed_s: 0.0,
        processes,
    });
    if state.processes != processes {
        return Err(TrainError::OtherProcessCount {
            dir: run_dir.root().to_path_buf(),
            trained: state.processes,
            now: processes,
        });
    }
    if let Some(replica) = &session.replica {
        replica.broadcast_variables(session.trainer.var_store())?;
        let optimizer: Vec<_> = session
            .trainer
            .optimizer_state()
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        replica.broadcast_from_first(&optimizer)?;
    }
    Ok(state)
}

/// The epoch loop of a data-parallel process other than rank 0: its part
/// of every step, in step with rank 0, which validates, tests and writes.
fn follow(training: Training, observer: &mut dyn RunObserver, rank: usize) -> Result<RunOutcome> {
    let Training {
        mut session,
        run_dir,
        resuming,
        stop_after_epoch,
        ..
    } = training;
    let mut state = restore(&mut session, &run_dir, resuming)?;
    let epochs = session.spec.epochs;
    for epoch in state.epochs_done + 1..=epochs {
        let mut steps = StepRecords::every(0);
        train_epoch(&mut session, &mut state, epoch, observer, &mut steps)?;
        state.epochs_done = epoch;
        if stop_after_epoch == Some(epoch) && epoch < epochs {
            return Ok(RunOutcome::Stopped { epoch });
        }
    }
    if let Some(replica) = &session.replica {
        replica.barrier()?;
    }
    Ok(RunOutcome::Replicated { rank })
}

/// The logs an epoch's results go to: `metrics.jsonl`, and when the run
/// keeps them `theory.jsonl` and the TensorBoard event file.
#[derive(Clone, Copy)]
struct EpochLogs<'a> {
    metrics: &'a MetricsLog,
    theory: Option<&'a TheoryLog>,
    events: Option<&'a EventWriter>,
}

/// What an epoch records of its steps besides its statistics: the theory
/// diagnostics of every perturbed step (with `track_theory`), and the
/// event file's point of every `every`-th step (0: none).
struct StepRecords {
    theory: Vec<TheoryRecord>,
    points: Vec<StepPoint>,
    every: usize,
}

impl StepRecords {
    /// None yet; a point every `every` steps.
    fn every(every: usize) -> StepRecords {
        StepRecords {
            theory: Vec::new(),
            points: Vec::new(),
            every,
        }
    }
}

/// Writes an epoch's results: the best weights when it improved, its
/// theory records when tracked, its log line, its events, then its
/// checkpoint, which commits the epoch (a run killed before that repeats it
/// on resume, see [`checkpoint`]).
fn save_epoch(
    run_dir: &RunDir,
    logs: EpochLogs<'_>,
    steps: &StepRecords,
    session: &Session,
    state: &TrainState,
    record: &EpochRecord,
) -> Result<()> {
    let weights = session.trainer.var_store();
    if record.best {
        checkpoint::save_weights(weights, &run_dir.best_model())?;
    }
    if let Some(theory_log) = logs.theory {
        theory_log.append_all(&steps.theory)?;
    }
    logs.metrics.append(record)?;
    if let Some(events) = logs.events {
        events.append_epoch(record, &steps.theory, &steps.points)?;
    }
    let optimizer = session.trainer.optimizer_state();
    checkpoint::save(run_dir, state, weights, &optimizer, &session.spec)
}

/// Refuses a resume whose spec would not continue the same run.
fn check_resume_spec(run_dir: &RunDir, spec: &RunSpec) -> Result<()> {
    let changed = spec.differences(&run_dir.saved_spec()?);
    if changed.is_empty() {
        Ok(())
    } else {
        Err(TrainError::ResumeSettings {
            config: run_dir.config(),
            changed,
        })
    }
}

fn diverged(epoch: usize, step: usize, what: &str, state: &TrainState) -> TrainError {
    TrainError::Diverged {
        epoch,
        step,
        what: what.to_string(),
        last_good_epoch: state.epochs_done,
    }
}

/// One pass over the training split. Returns the epoch's training stats and
/// its last learning rate; with `track_theory`, pushes the record of every
/// perturbed step onto `records.theory` (derived from the step's own
/// statistics: no extra forward pass), and the point of every due step
/// onto `records.points` (the loss the step read back anyway: no extra sync).
fn train_epoch(
    session: &mut Session,
    state: &mut TrainState,
    epoch: usize,
    observer: &mut dyn RunObserver,
    records: &mut StepRecords,
) -> Result<(TrainStats, f64)> {
    let spec = &session.spec;
    // Dropout and any other libtorch randomness of this epoch depend on
    // (seed, epoch) only, so a resumed epoch replays exactly.
    tch::manual_seed(epoch_seed(spec.seed, epoch));
    let steps = session.steps_per_epoch();
    observer.epoch_started(epoch, spec.epochs, steps);
    let rho = spec.optim.rule.sharpness().map_or(0.0, |s| s.rho);
    let (mut loss_sum, mut correct, mut seen) = (0.0f64, 0.0f64, 0.0f64);
    let (mut second_passes, mut steps_taken, mut skipped) = (0usize, 0usize, 0usize);
    let mut lr = 0.0;
    let shard = session
        .replica
        .as_ref()
        .map_or(Shard::WHOLE, Replica::shard);
    let TrainEpoch { order, batches } =
        session
            .data
            .train_epoch(spec, session.device, epoch as u64, shard)?;
    let trainer = &mut session.trainer;
    let examples = order
        .chunks(spec.batch_size)
        .map(|batch| &batch[shard.rows(batch.len())]);
    for (step, (batch, examples)) in batches.zip(examples).enumerate() {
        let (xs, ys) = batch?;
        lr = trainer.set_learning_rate(state.global_step);
        let stats = match trainer.step((&xs, &ys), state.global_step, examples)? {
            Ok(stats) => stats,
            Err(message) => return Err(diverged(epoch, step + 1, &message, state)),
        };
        if StepPoint::is_due(state.global_step, records.every) {
            records.points.push(StepPoint {
                global_step: state.global_step,
                loss: stats.loss,
                lr,
            });
        }
        if spec.track_theory {
            records.theory.extend(TheoryRecord::from_step(
                epoch,
                state.global_step,
                rho,
                &stats,
            ));
        }
        let batch = ys.size().first().copied().unwrap_or(0) as f64;
        loss_sum += stats.loss * batch;
        correct += stats.accuracy * batch;
        seen += batch;
        second_passes += usize::from(stats.perturbed.is_some());
        skipped += usize::from(stats.skipped);
        steps_taken += 1;
        state.global_step += 1;
        observer.step(loss_sum / seen, correct / seen);
    }
    let mut second_passes = second_passes as f64;
    if let Some(replica) = &session.replica {
        // The epoch's numbers over the global batches; every replica takes
        // the same steps, so their second passes are rank 0's.
        let sums = replica.sum(&[loss_sum, correct, seen])?;
        (loss_sum, correct, seen) = (sums[0], sums[1], sums[2]);
        second_passes = replica.agree(second_passes as i64)? as f64;
    }
    let seen = seen.max(1.0);
    Ok((
        TrainStats {
            loss: loss_sum / seen,
            accuracy: correct / seen,
            second_pass: Some(second_passes / steps_taken.max(1) as f64),
            // Every replica skips the same steps (they decide on the reduced
            // gradient).
            overflow_skipped: (spec.model.precision == Precision::Fp16).then_some(skipped),
        },
        lr,
    ))
}

/// After the last epoch: save the last weights, reload the best, write the
/// validation and test logits and the summary.
fn finish(
    session: &mut Session,
    run_dir: &RunDir,
    state: &TrainState,
    observer: &mut dyn RunObserver,
) -> Result<RunSummary> {
    let started = Instant::now();
    checkpoint::save_weights(session.trainer.var_store(), &run_dir.last_model())?;
    // Invariant: every finished epoch sets `best` on the first improvement,
    // and the first epoch always improves on None.
    let best = state.best.ok_or(TrainError::NoBestEpoch)?;
    session.trainer.load_weights(&run_dir.best_model())?;
    let val = write_predictions(session, run_dir, Split::Val)?;
    let test = write_predictions(session, run_dir, Split::Test)?;
    let spec = &session.spec;
    let summary = RunSummary {
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        seed: spec.seed,
        device: device_name(session.device),
        data: spec.data.source.to_string(),
        model: spec.model.arch.to_string(),
        optimizer: spec.optim.rule.family(),
        base_optimizer: spec.optim.base.name().to_string(),
        csam_gradient_mode: spec.optim.rule.csam_gradient_mode().map(str::to_string),
        epochs: spec.epochs,
        best_metric: spec.selection,
        best_epoch: best.epoch,
        best_value: best.value,
        wall_time_s: state.elapsed_s + started.elapsed().as_secs_f64(),
        n_train: session.data.n_train(),
        n_val: val.labels.len(),
        n_test: test.labels.len(),
        val: val.summarize(&spec.metrics)?,
        test: test.summarize(&spec.metrics)?,
    };
    let json = serde_json::to_vec_pretty(&summary).map_err(|e| TrainError::Corrupt {
        path: run_dir.summary(),
        message: e.to_string(),
    })?;
    if spec.track_theory {
        let records = theory::read_theory(run_dir.root())?;
        theory::write_theory_plots(run_dir.root(), &records)?;
        observer.theory_summary(&TheorySummary::of(&records));
    }
    super::atomic::write_atomic(&run_dir.summary(), &json)?;
    Ok(summary)
}

fn write_predictions(session: &Session, run_dir: &RunDir, split: Split) -> Result<Predictions> {
    let predictions = session.predict_split(split)?;
    predictions.write_npy(&run_dir.logits(split), &run_dir.labels(split))?;
    Ok(predictions)
}
