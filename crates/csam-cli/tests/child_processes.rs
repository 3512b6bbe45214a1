//! The processes csam starts die with it: `csam compare --jobs 2` and `csam
//! launch --nproc 2`, killed with SIGKILL (no cleanup runs), leave no child
//! training on; compare's temporary files live in its output directory, not
//! in the system's temporary directory. Every wait has a deadline.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csam_testkit::deadline::within;

/// How long the children may take to die after their parent.
const DEATH: Duration = Duration::from_secs(10);

/// The live (not zombie) processes whose parent is `parent`, from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if matches!(stat(pid), Some((ppid, state)) if ppid == parent && state != 'Z') {
            children.push(pid);
        }
    }
    children
}

/// The parent pid and state of `pid`, None once it is gone.
fn stat(pid: u32) -> Option<(u32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
    let mut fields = text.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((fields.next()?.parse().ok()?, state))
}

fn alive(pid: u32) -> bool {
    matches!(stat(pid), Some((_, state)) if state != 'Z')
}

/// Starts `csam` with `args`, waits until it has `n` children, kills it with
/// SIGKILL and asserts that its children are gone within [`DEATH`]. Returns
/// its pid.
fn killed_parent_takes_its_children(args: Vec<String>, n: usize) -> u32 {
    let mut parent: Child = Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = parent.id();
    let started = Instant::now();
    let mut children = children_of(pid);
    while children.len() < n && started.elapsed() < Duration::from_secs(60) {
        if parent.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        children = children_of(pid);
    }
    parent.kill().unwrap(); // SIGKILL, or nothing when it has exited
    let status = parent.wait().unwrap();
    let killed = Instant::now();
    while children.iter().any(|&child| alive(child)) && killed.elapsed() < DEATH {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = children.iter().copied().filter(|&c| alive(c)).collect();
    for &child in &left {
        // Not to leave them behind when the assertion fails. SAFETY: kill
        // takes no pointer.
        unsafe { libc::kill(child as libc::pid_t, libc::SIGKILL) };
    }
    assert_eq!(children.len(), n, "csam ({status}) started {children:?}");
    assert!(
        left.is_empty(),
        "children {left:?} outlived csam by {DEATH:?}"
    );
    pid
}

fn words(args: &[&str], out: &Path) -> Vec<String> {
    let mut words: Vec<String> = args.iter().map(|word| word.to_string()).collect();
    words.extend(["--out".to_string(), out.display().to_string()]);
    words
}

#[test]
fn a_killed_compare_takes_its_training_processes_and_keeps_no_temporary_elsewhere() {
    within(Duration::from_secs(120), "killing compare", || {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("cmp");
        #[rustfmt::skip]
        let args = [
            "compare", "--data", "digits", "--epochs", "1000", "--seeds", "0",
            "--methods", "sgd,sam", "--jobs", "2", "--threads", "1", "--device", "cpu",
            "--no-tensorboard", "--quiet",
        ];
        let pid = killed_parent_takes_its_children(words(&args, &out), 2);
        let prefix = format!("csam-{pid}-");
        let elsewhere: Vec<String> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(&prefix))
            .collect();
        assert!(elsewhere.is_empty(), "{elsewhere:?}");
        let kept: Vec<String> = std::fs::read_dir(out.join(".jobs"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept.len(), 4, "a spec and a log per process: {kept:?}");
    });
}

#[test]
fn a_killed_launch_takes_its_ranks() {
    within(Duration::from_secs(120), "killing launch", || {
        let root = tempfile::tempdir().unwrap();
        #[rustfmt::skip]
        let args = [
            "launch", "--nproc", "2", "--", "train", "--data", "digits", "--epochs", "1000",
            "--threads", "1", "--device", "cpu", "--no-tensorboard", "--quiet",
        ];
        killed_parent_takes_its_children(words(&args, &root.path().join("run")), 2);
    });
}
