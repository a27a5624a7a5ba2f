//! The seccomp filter every jailed program runs under, generated in Rust and
//! handed to bubblewrap (`--seccomp FD`) as raw BPF.
//!
//! It is two parts. A short prelude written here by hand, because
//! seccompiler matches whole syscall numbers under one action:
//! - a foreign architecture (i386 through `int 0x80`) kills the process;
//! - x32 numbers (`nr | __X32_SYSCALL_BIT`) fail with EPERM: they would
//!   otherwise miss every rule below, which names x86-64 numbers;
//! - `socket`/`socketpair` work for `AF_UNIX`, `AF_INET`, `AF_INET6` and
//!   `AF_NETLINK` with `NETLINK_ROUTE` only. Other families (`AF_VSOCK`,
//!   `AF_ALG`, `AF_PACKET`, ...) fail with EAFNOSUPPORT, other netlink
//!   protocols (netfilter, audit, uevents, sock_diag...) with
//!   EPROTONOSUPPORT. `NETLINK_ROUTE` stays because glibc uses it for
//!   `if_nameindex`, `getifaddrs` and `getaddrinfo(AI_ADDRCONFIG)` (node's
//!   `dns.lookup`, `os.networkInterfaces()`); in the jail's own network
//!   namespace and without capabilities it can only read about `lo`.
//!
//! Then seccompiler's filter: the deny list below, EPERM.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// System calls no program in the jail has a use for: mounting, namespaces,
/// tracing, kernel keyrings, BPF, performance counters, io_uring, kernel
/// modules, clocks, reboot and friends. They fail with EPERM.
const DENIED: &[libc::c_long] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_perf_event_open,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_userfaultfd,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_syslog,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_quotactl,
    libc::SYS_lookup_dcookie,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_personality,
];

#[derive(Debug, thiserror::Error)]
#[error("cannot build the seccomp filter: {0}")]
pub struct SeccompBuildError(String);

/// The filter as the bytes bubblewrap reads: `struct sock_filter` in native
/// byte order, one after another.
pub fn filter_bytes() -> Result<Vec<u8>, SeccompBuildError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| SeccompBuildError(format!("{e:?}")))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    // clone(2) asking for a new namespace (one rule a flag: rules OR together).
    // Namespaces are already out of reach (no capabilities, user namespaces
    // disabled by bubblewrap); this is the second wall. clone3 passes its flags
    // in memory a filter cannot read and stays covered by the first.
    let namespace_flags = [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];
    let clone_rules = namespace_flags
        .iter()
        .map(|&flag| {
            let flag = u64::try_from(flag).unwrap_or_default();
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(|e| SeccompBuildError(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_clone, clone_rules);
    // TIOCSTI pushes characters into a terminal's input queue.
    let tiocsti = SeccompRule::new(vec![
        SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::TIOCSTI)
            .map_err(|e| SeccompBuildError(e.to_string()))?,
    ])
    .map_err(|e| SeccompBuildError(e.to_string()))?;
    rules.insert(libc::SYS_ioctl, vec![tiocsti]);

    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| SeccompBuildError(e.to_string()))?;
    let rules: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompBuildError(e.to_string()))?;
    // Jumps in BPF are relative, so the rules work unchanged after the prelude.
    let mut program = prelude(audit_arch(arch));
    program.extend(rules);
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    Ok(bytes)
}

// Classic BPF opcodes (linux/filter.h).
/// BPF_LD | BPF_W | BPF_ABS (the first two are 0).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JSET_K: u16 = 0x05 | 0x40;
const BPF_RET_K: u16 = 0x06;
// Offsets in `struct seccomp_data`: nr, arch, then ip and six u64 args. The
// low 32 bits of an argument come first on little-endian machines; socket's
// domain and protocol are `int`s, which the kernel reads from those bits.
const NR: u32 = 0;
const ARCH: u32 = 4;
#[cfg(target_endian = "little")]
const ARG0: u32 = 16;
#[cfg(target_endian = "big")]
const ARG0: u32 = 20;
const ARG2: u32 = ARG0 + 16;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
/// `__X32_SYSCALL_BIT`.
const X32_BIT: u32 = 0x4000_0000;
/// `NETLINK_ROUTE`.
const NETLINK_ROUTE: u32 = 0;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn audit_arch(arch: TargetArch) -> u32 {
    match arch {
        TargetArch::x86_64 => 0xC000_003E,
        TargetArch::aarch64 => 0xC000_00B7,
        TargetArch::riscv64 => 0xC000_00F3,
    }
}

fn as_u32(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// The hand-written checks that run before the rules (see the module notes).
/// Every path either returns or falls through to the instruction after it.
fn prelude(arch: u32) -> Vec<sock_filter> {
    let errno = |e: i32| stmt(BPF_RET_K, RET_ERRNO | as_u32(e.into()));
    let af = |family: i32| as_u32(family.into());
    let mut program = vec![
        stmt(BPF_LD_W_ABS, ARCH),
        jump(BPF_JEQ_K, arch, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, NR),
    ];
    // x32 exists only on x86-64; elsewhere the bit is an ordinary number bit.
    if arch == audit_arch(TargetArch::x86_64) {
        program.extend([jump(BPF_JSET_K, X32_BIT, 0, 1), errno(libc::EPERM)]);
    }
    program.extend([
        // socket or socketpair? Otherwise on to the rules (9 ahead).
        jump(BPF_JEQ_K, as_u32(libc::SYS_socket), 1, 0),
        jump(BPF_JEQ_K, as_u32(libc::SYS_socketpair), 0, 9),
        stmt(BPF_LD_W_ABS, ARG0),
        jump(BPF_JEQ_K, af(libc::AF_UNIX), 7, 0),
        jump(BPF_JEQ_K, af(libc::AF_INET), 6, 0),
        jump(BPF_JEQ_K, af(libc::AF_INET6), 5, 0),
        jump(BPF_JEQ_K, af(libc::AF_NETLINK), 1, 0),
        errno(libc::EAFNOSUPPORT),
        stmt(BPF_LD_W_ABS, ARG2),
        jump(BPF_JEQ_K, NETLINK_ROUTE, 1, 0),
        errno(libc::EPROTONOSUPPORT),
        // The rules start here.
    ]);
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_builds_into_whole_instructions() {
        let bytes = filter_bytes().unwrap();
        assert!(!bytes.is_empty());
        assert_eq!(bytes.len() % 8, 0);
    }

    /// A tiny interpreter for the prelude: what it does with one call.
    #[derive(Debug, PartialEq)]
    enum Verdict {
        Return(u32),
        Rules,
    }

    fn run(program: &[sock_filter], nr: u32, arch: u32, arg0: u32, arg2: u32) -> Verdict {
        let mut acc = 0;
        let mut pc = 0;
        while pc < program.len() {
            let i = &program[pc];
            pc += 1;
            match i.code {
                BPF_LD_W_ABS => {
                    acc = match i.k {
                        NR => nr,
                        ARCH => arch,
                        ARG0 => arg0,
                        ARG2 => arg2,
                        other => panic!("unexpected load at {other}"),
                    }
                }
                BPF_JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                BPF_JSET_K => pc += usize::from(if acc & i.k != 0 { i.jt } else { i.jf }),
                BPF_RET_K => return Verdict::Return(i.k),
                other => panic!("unexpected opcode {other}"),
            }
        }
        assert_eq!(pc, program.len(), "jumped past the end");
        Verdict::Rules
    }

    #[test]
    fn the_prelude_refuses_foreign_arches_x32_and_odd_socket_families() {
        let x86 = audit_arch(TargetArch::x86_64);
        let p = prelude(x86);
        let socket = as_u32(libc::SYS_socket);
        let pair = as_u32(libc::SYS_socketpair);
        let eperm = RET_ERRNO | as_u32(libc::EPERM.into());
        let eafno = RET_ERRNO | as_u32(libc::EAFNOSUPPORT.into());
        let eproto = RET_ERRNO | as_u32(libc::EPROTONOSUPPORT.into());
        let af = |f: i32| as_u32(f.into());
        assert_eq!(
            run(&p, 39, 0x4000_0003, 0, 0),
            Verdict::Return(RET_KILL_PROCESS)
        );
        assert_eq!(run(&p, 39, x86, 0, 0), Verdict::Rules);
        assert_eq!(run(&p, X32_BIT | 39, x86, 0, 0), Verdict::Return(eperm));
        assert_eq!(run(&p, X32_BIT | socket, x86, 1, 0), Verdict::Return(eperm));
        for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6] {
            assert_eq!(run(&p, socket, x86, af(family), 0), Verdict::Rules);
            assert_eq!(run(&p, pair, x86, af(family), 0), Verdict::Rules);
        }
        assert_eq!(
            run(&p, socket, x86, af(libc::AF_NETLINK), 0),
            Verdict::Rules
        );
        assert_eq!(
            run(&p, socket, x86, af(libc::AF_NETLINK), 12),
            Verdict::Return(eproto)
        );
        for family in [
            libc::AF_VSOCK,
            libc::AF_ALG,
            libc::AF_PACKET,
            libc::AF_BLUETOOTH,
            0xFFFF,
        ] {
            assert_eq!(run(&p, socket, x86, af(family), 0), Verdict::Return(eafno));
            assert_eq!(run(&p, pair, x86, af(family), 0), Verdict::Return(eafno));
        }
        // Another syscall whose first argument looks like a family is untouched.
        assert_eq!(run(&p, 0, x86, af(libc::AF_VSOCK), 0), Verdict::Rules);
    }
}
