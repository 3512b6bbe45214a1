//! `csam launch`: start a data-parallel job's processes on this machine, as
//! `torchrun --nproc-per-node N` does: the same csam command N times, each
//! with `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` and `MASTER_PORT`
//! set; when one fails, the others are stopped and its exit status is
//! returned. The processes die with the launcher, however it dies (see
//! [`super::child`]).

use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use csam_dist::rendezvous::{LOCAL_RANK, MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE};

use super::child::die_with_parent;

/// Flags of `csam launch`.
#[derive(Debug, Args)]
pub struct LaunchArgs {
    /// Processes to start (one rank each), e.g. one per GPU or a few per CPU socket.
    #[arg(long, visible_alias = "nproc-per-node", value_name = "N")]
    nproc: usize,
    /// Port of rank 0's rendezvous store on 127.0.0.1 (default: a free port).
    #[arg(long, value_name = "PORT")]
    master_port: Option<u16>,
    /// The csam command every process runs, after `--`, e.g.
    /// `csam launch --nproc 2 -- train --out runs/dp --threads 1`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

/// How often the launcher looks at its processes.
const POLL: Duration = Duration::from_millis(100);

/// Runs `csam launch`.
pub fn run(args: LaunchArgs) -> anyhow::Result<()> {
    if args.nproc == 0 {
        anyhow::bail!("--nproc 0: a job needs at least one process");
    }
    let port = match args.master_port {
        Some(0) => anyhow::bail!("--master-port 0: choose a port in 1-65535, or leave it out"),
        Some(port) => port,
        None => free_port()?,
    };
    let exe = std::env::current_exe().context("finding the csam executable")?;
    let mut children = Vec::with_capacity(args.nproc);
    for rank in 0..args.nproc {
        let mut command = Command::new(&exe);
        let child = die_with_parent(&mut command)
            .args(&args.command)
            .env(RANK, rank.to_string())
            .env(LOCAL_RANK, rank.to_string())
            .env(WORLD_SIZE, args.nproc.to_string())
            .env(MASTER_ADDR, "127.0.0.1")
            .env(MASTER_PORT, port.to_string())
            .spawn();
        match child {
            Ok(child) => children.push(Some(child)),
            Err(e) => {
                stop(&mut children);
                return Err(e).with_context(|| format!("starting rank {rank}"));
            }
        }
    }
    match wait_all(&mut children)? {
        None => Ok(()),
        Some((rank, status)) => {
            stop(&mut children);
            anyhow::bail!(
                "rank {rank} of {} failed ({status}); stopped the other processes",
                args.nproc
            )
        }
    }
}

/// Waits until every process has exited successfully (None) or one has
/// failed (its rank and status).
fn wait_all(children: &mut [Option<Child>]) -> anyhow::Result<Option<(usize, ExitStatus)>> {
    while children.iter().any(Option::is_some) {
        for (rank, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            let Some(status) = child
                .try_wait()
                .with_context(|| format!("waiting for rank {rank}"))?
            else {
                continue;
            };
            *slot = None;
            if !status.success() {
                return Ok(Some((rank, status)));
            }
        }
        std::thread::sleep(POLL);
    }
    Ok(None)
}

/// Kills the processes still running and reaps them.
fn stop(children: &mut [Option<Child>]) {
    for child in children.iter_mut().flatten() {
        // A process that exited meanwhile cannot be killed; wait reaps it either way.
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A loopback port nobody listens on now (the OS's choice).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .context("finding a free port for the rendezvous")?;
    Ok(listener.local_addr()?.port())
}
