//! Idle kernels that share what they hold alike.
//!
//! An idle Python kernel holds about 26 MiB of its own memory, nearly all
//! of it the interpreter's modules (ipykernel, IPython, zmq, tornado...:
//! some 470 of them) unmarshalled into its heap. Every kernel loads them
//! the same way, so their pages are alike but for the addresses in them.
//! Kernels start with their address layout fixed (`ADDR_NO_RANDOMIZE`:
//! no randomisation inside the jail, where the program runs code of its
//! choosing anyway) and their memory open to the kernel's same-page merging
//! (`PR_SET_MEMORY_MERGE`, Linux 6.4 on; kept across `exec`, as measured on
//! 6.18), which
//! merges pages that are byte for byte the same, copy-on-write. Measured on
//! 5 idle kernels: 29 MB of proportional memory each before, 18.5 after.
//!
//! What it trades (SECURITY.md): a merged page is written a little more
//! slowly the first time (it is copied), which a program can time to learn
//! whether another kernel holds a page identical to one of its own, and
//! merged pages are one physical copy. It is on by default and
//! `sandbox.share_kernel_memory = false` turns it off.

use std::path::Path;

/// Where the kernel's same-page merging is switched on and off.
const KSM_RUN: &str = "/sys/kernel/mm/ksm/run";

/// `prctl` option: every mapping of the process is mergeable (Linux 6.4).
const PR_SET_MEMORY_MERGE: libc::c_int = 67;

/// Turns the kernel's same-page merging on if it is off, or says why it
/// cannot be used.
pub(super) fn enable() -> Result<(), String> {
    enable_at(Path::new(KSM_RUN))
}

fn enable_at(run: &Path) -> Result<(), String> {
    let state = std::fs::read_to_string(run).map_err(|e| {
        format!(
            "{} cannot be read ({e}): no same-page merging",
            run.display()
        )
    })?;
    match state.trim() {
        "1" => Ok(()),
        // Off: on, for the pages that ask for it (only kernels', here).
        "0" => std::fs::write(run, "1")
            .map_err(|e| format!("{} cannot be written: {e}", run.display())),
        // 2: an operator unmerging everything; left as it is.
        other => Err(format!(
            "{} is {other}: left as the host has it",
            run.display()
        )),
    }
}

/// Run in a kernel jail's first process between fork and exec: its
/// address layout fixed and its memory mergeable, both kept by the
/// processes it starts. Failures are ignored: this is a saving, not a
/// confinement.
///
/// # Safety
/// Only async-signal-safe calls: two system calls on constants.
#[allow(unsafe_code)]
pub(super) unsafe fn open_to_merging() {
    // SAFETY: `personality` and `prctl` are plain system calls, allowed
    // between fork and exec; they take no pointers.
    unsafe {
        let current = libc::personality(0xffff_ffff);
        if current != -1 {
            libc::personality(
                (current as libc::c_ulong) | libc::ADDR_NO_RANDOMIZE as libc::c_ulong,
            );
        }
        libc::prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_is_turned_on_when_off_and_an_operators_setting_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::write(&run, "0\n").unwrap();
        enable_at(&run).unwrap();
        assert_eq!(std::fs::read_to_string(&run).unwrap(), "1");
        enable_at(&run).unwrap();
        std::fs::write(&run, "2\n").unwrap();
        assert!(enable_at(&run).unwrap_err().contains("is 2"));
        assert_eq!(std::fs::read_to_string(&run).unwrap(), "2\n");
        assert!(enable_at(&dir.path().join("missing")).is_err());
    }
}
