//! Who this process is in a data-parallel job, and where the job meets: the
//! environment variables of PyTorch's `env://` initialisation, which
//! `torchrun`, `csam launch` and Slurm scripts set.

use std::time::Duration;

use crate::DistError;

/// This process's place in the job and the job's meeting point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendezvous {
    /// This process's rank, `0..world_size`; rank 0 serves the store.
    pub rank: usize,
    /// Number of processes in the job.
    pub world_size: usize,
    /// This process's rank on its machine (which device it would use).
    pub local_rank: usize,
    /// Host of rank 0's store (`MASTER_ADDR`).
    pub master_addr: String,
    /// Port of rank 0's store (`MASTER_PORT`).
    pub master_port: u16,
    /// How long the rendezvous and every collective may take before they
    /// fail (a rank that died mid-epoch is usually seen at once, by its closed
    /// connection; the timeout bounds the rest).
    pub timeout: Duration,
}

/// The environment variables a launcher sets, by name.
pub const RANK: &str = "RANK";
/// See [`RANK`].
pub const WORLD_SIZE: &str = "WORLD_SIZE";
/// See [`RANK`].
pub const LOCAL_RANK: &str = "LOCAL_RANK";
/// See [`RANK`].
pub const MASTER_ADDR: &str = "MASTER_ADDR";
/// See [`RANK`].
pub const MASTER_PORT: &str = "MASTER_PORT";

impl Rendezvous {
    /// The job this process was launched into, from `var` (the environment
    /// in production): `None` when `WORLD_SIZE` is unset, else every
    /// variable checked. `LOCAL_RANK` defaults to `RANK`, `MASTER_ADDR` to
    /// `127.0.0.1` and `MASTER_PORT` to 29500, torchrun's defaults.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        timeout: Duration,
    ) -> Result<Option<Rendezvous>, DistError> {
        let Some(world) = var(WORLD_SIZE) else {
            return Ok(None);
        };
        let number = |name: &str, value: &str| {
            value.trim().parse::<usize>().map_err(|_| {
                DistError::Environment(format!("{name}={value:?} is not a non-negative integer"))
            })
        };
        let world_size = number(WORLD_SIZE, &world)?;
        if world_size == 0 {
            return Err(DistError::Environment(format!(
                "{WORLD_SIZE}=0: a job has at least one process"
            )));
        }
        let rank = match var(RANK) {
            Some(rank) => number(RANK, &rank)?,
            None => {
                return Err(DistError::Environment(format!(
                    "{WORLD_SIZE} is set but {RANK} is not: a launcher sets both"
                )))
            }
        };
        if rank >= world_size {
            return Err(DistError::Environment(format!(
                "{RANK}={rank} is not below {WORLD_SIZE}={world_size}"
            )));
        }
        let local_rank = match var(LOCAL_RANK) {
            Some(local) => number(LOCAL_RANK, &local)?,
            None => rank,
        };
        let master_addr = var(MASTER_ADDR).unwrap_or_else(|| "127.0.0.1".to_string());
        let master_port = match var(MASTER_PORT) {
            Some(port) => port
                .trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| {
                    DistError::Environment(format!(
                        "{MASTER_PORT}={port:?} is not a port (1-65535)"
                    ))
                })?,
            None => 29500,
        };
        Ok(Some(Rendezvous {
            rank,
            world_size,
            local_rank,
            master_addr,
            master_port,
            timeout,
        }))
    }

    /// [`Rendezvous::from_vars`] on this process's environment.
    pub fn from_env(timeout: Duration) -> Result<Option<Rendezvous>, DistError> {
        Rendezvous::from_vars(|name| std::env::var(name).ok(), timeout)
    }

    /// `host:port` of the store.
    pub fn address(&self) -> String {
        format!("{}:{}", self.master_addr, self.master_port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Option<Rendezvous>, DistError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Rendezvous::from_vars(
            |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            Duration::from_secs(5),
        )
    }

    #[test]
    fn no_world_size_is_no_job() {
        assert_eq!(read(&[("RANK", "1")]).unwrap(), None);
    }

    #[test]
    fn torchrun_defaults_fill_the_rest() {
        let job = read(&[("WORLD_SIZE", "2"), ("RANK", "1")])
            .unwrap()
            .unwrap();
        assert_eq!((job.rank, job.world_size, job.local_rank), (1, 2, 1));
        assert_eq!(job.address(), "127.0.0.1:29500");
        let job = read(&[
            ("WORLD_SIZE", "4"),
            ("RANK", "3"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node7"),
            ("MASTER_PORT", "1234"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((job.local_rank, job.address().as_str()), (1, "node7:1234"));
    }

    #[test]
    fn bad_values_are_named() {
        let cases: [(&[(&str, &str)], &str); 5] = [
            (
                &[("WORLD_SIZE", "two"), ("RANK", "0")],
                "WORLD_SIZE=\"two\"",
            ),
            (&[("WORLD_SIZE", "0"), ("RANK", "0")], "WORLD_SIZE=0"),
            (&[("WORLD_SIZE", "2")], "RANK is not"),
            (&[("WORLD_SIZE", "2"), ("RANK", "2")], "RANK=2 is not below"),
            (
                &[("WORLD_SIZE", "2"), ("RANK", "0"), ("MASTER_PORT", "0")],
                "MASTER_PORT=\"0\"",
            ),
        ];
        for (vars, expected) in cases {
            let message = read(vars).unwrap_err().to_string();
            assert!(message.contains(expected), "{message} lacks {expected}");
        }
    }
}
