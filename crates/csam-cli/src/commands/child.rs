//! Child processes that die with their parent: the `csam train` processes of
//! `--jobs N` and the ranks of `csam launch`. A parent killed with SIGKILL
//! runs no cleanup, so without this its children would train on, unowned,
//! holding their run directories' locks and the machine's cores. The kernel
//! sends each child SIGKILL when the thread that started it exits
//! (`PR_SET_PDEATHSIG`, Linux); csam starts them from its main thread.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the process that `command` starts get SIGKILL when this one dies.
/// A parent that dies between the fork and the child's `prctl` would never
/// signal it, so the child checks its parent afterwards and exits when it
/// has been re-parented.
pub fn die_with_parent(command: &mut Command) -> &mut Command {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the hook runs in the child between fork and exec; it calls
    // only async-signal-safe functions (prctl, getppid, _exit) and neither
    // allocates nor takes a lock.
    unsafe {
        command.pre_exec(move || {
            let signal = libc::SIGKILL as libc::c_ulong;
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        })
    }
}
