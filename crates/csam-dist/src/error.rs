//! What can go wrong joining a group or running a collective.

/// An error of the distributed layer.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// The launcher's environment is missing a variable or holds a bad value.
    #[error("distributed launch: {0}")]
    Environment(String),
    /// The rendezvous failed: the store could not be reached or served,
    /// or not every rank arrived within the timeout.
    #[error(
        "could not join the process group of {world_size} at {address} as rank {rank}: {message}"
    )]
    Connect {
        address: String,
        rank: usize,
        world_size: usize,
        message: String,
    },
    /// A collective failed: another rank died or closed its connection, or
    /// the collective outlasted the group's timeout.
    #[error(
        "{operation} across the process group failed (rank {rank} of {world_size}): {message}"
    )]
    Collective {
        operation: &'static str,
        rank: usize,
        world_size: usize,
        message: String,
    },
    /// A collective was given a tensor Gloo cannot take.
    #[error("{0}")]
    Tensor(String),
}
