//! The seccomp filter both tiers load: a hand-written classic BPF program that makes the
//! kernel answer `EPERM` to system calls a plugin never needs and that widen what it can
//! reach (io_uring, ptrace, kernel keyrings, BPF, mounts and namespaces, module loading), to
//! non-`AF_UNIX` sockets when the network is off, and `ENOSYS` to `clone3` (so libc falls back
//! to `clone`, whose namespace flags the filter can see).
//!
//! Owns: building the program (in the parent, before fork) and loading it (in the child,
//! async-signal-safe). Must not: allocate or lock in `load`, or decide which tier runs.

use std::io;

use libc::{c_long, sock_filter, sock_fprog};

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = libc::SECCOMP_RET_ERRNO;
const DENY: u32 = RET_ERRNO | libc::EPERM as u32;
const NO_SUCH_CALL: u32 = RET_ERRNO | libc::ENOSYS as u32;

const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
#[cfg(target_arch = "x86_64")]
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Offsets in `struct seccomp_data`: nr, arch, then the low 32 bits of args[0] (both
/// supported architectures are little-endian).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0_LOW: u32 = 16;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("berth-sandbox's seccomp filter knows only x86_64 and aarch64");

/// The x32 ABI bit on x86_64: such calls have other numbers, so they are all denied.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `clone` flags that make a new namespace.
const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32
    | 0x80; // CLONE_NEWTIME

/// Calls denied in every tier, whatever the boundary says.
/// Calls whose arguments decide (the filter looks at them below).
const GATED: [c_long; 4] = [
    libc::SYS_clone3,
    libc::SYS_clone,
    libc::SYS_socket,
    libc::SYS_socketpair,
];

/// Calls a plugin host makes on every request (its event loop, its channel, its threads):
/// allowed before anything else is compared.
const HOT: &[c_long] = &[
    libc::SYS_futex,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_ctl,
    libc::SYS_recvfrom,
    libc::SYS_sendto,
    libc::SYS_recvmsg,
    libc::SYS_sendmsg,
    libc::SYS_getrandom,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_wait,
];

const ALWAYS_DENIED: &[c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// The names of the denied calls, for reports.
pub const ALWAYS_DENIED_NAMES: &str = "io_uring_*, ptrace, process_vm_*, kexec_*, bpf, \
    perf_event_open, userfaultfd, keyctl, add_key, request_key, mount and the new mount API, \
    umount2, pivot_root, chroot, unshare, setns, clone with namespace flags, \
    open_by_handle_at, module loading, reboot, swapon/off, acct, quotactl";

/// A compiled filter, ready to load or to hand to bubblewrap.
#[derive(Debug, Clone)]
pub struct Filter {
    program: Vec<sock_filter>,
}

impl Filter {
    /// The filter for a child; `network == false` also denies every non-`AF_UNIX` socket.
    pub fn build(network: bool) -> Filter {
        let mut p = vec![
            load(ARCH),
            jump(JEQ_K, AUDIT_ARCH, 1, 0),
            ret(DENY),
            load(NR),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            p.push(jump(JGE_K, X32_SYSCALL_BIT, 0, 1));
            p.push(ret(DENY));
        }
        // Fast path: every call numbered below the lowest one checked, and the calls a host
        // makes all the time, are allowed at once — none of the checks below could match them
        // (the filter runs on every system call; this keeps a round trip's cost down).
        let checked: Vec<u32> = ALWAYS_DENIED
            .iter()
            .copied()
            .chain(GATED)
            .map(|n| n as u32)
            .collect();
        let lowest = checked.iter().copied().min().unwrap_or(0);
        p.push(jump(JGE_K, lowest, 1, 0));
        p.push(ret(RET_ALLOW));
        for nr in HOT
            .iter()
            .map(|&n| n as u32)
            .filter(|n| !checked.contains(n))
        {
            p.push(jump(JEQ_K, nr, 0, 1));
            p.push(ret(RET_ALLOW));
        }
        for &nr in ALWAYS_DENIED {
            p.push(jump(JEQ_K, nr as u32, 0, 1));
            p.push(ret(DENY));
        }
        p.push(jump(JEQ_K, libc::SYS_clone3 as u32, 0, 1));
        p.push(ret(NO_SUCH_CALL));
        // clone: deny when args[0] has any namespace flag.
        p.extend(arg0_gate(
            libc::SYS_clone,
            jump(JSET_K, NAMESPACE_FLAGS, 0, 1),
        ));
        if !network {
            for nr in [libc::SYS_socket, libc::SYS_socketpair] {
                // socket/socketpair: allow only when the domain (args[0]) is AF_UNIX.
                p.extend(arg0_gate(nr, jump(JEQ_K, libc::AF_UNIX as u32, 1, 0)));
            }
        }
        p.push(ret(RET_ALLOW));
        Filter { program: p }
    }

    /// The program as bytes, the format bubblewrap's `--seccomp FD` reads.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.program.len() * 8);
        for ins in &self.program {
            out.extend_from_slice(&ins.code.to_ne_bytes());
            out.push(ins.jt);
            out.push(ins.jf);
            out.extend_from_slice(&ins.k.to_ne_bytes());
        }
        out
    }

    /// Loads the filter into the calling thread. Async-signal-safe: meant for a forked child
    /// before exec, after `PR_SET_NO_NEW_PRIVS`.
    ///
    /// # Safety
    /// Only raw syscalls; safe to call after fork in a multi-threaded parent.
    pub unsafe fn load(&self) -> io::Result<()> {
        let prog = sock_fprog {
            len: self.program.len() as u16,
            filter: self.program.as_ptr() as *mut sock_filter,
        };
        let rc = libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &prog as *const sock_fprog as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// `if nr == call { load args[0]; test → deny (jt = 0) or allow (skip 1) }`.
fn arg0_gate(call: c_long, test: sock_filter) -> [sock_filter; 5] {
    [
        jump(JEQ_K, call as u32, 0, 4),
        load(ARG0_LOW),
        test,
        ret(DENY),
        ret(RET_ALLOW),
    ]
}

fn load(offset: u32) -> sock_filter {
    sock_filter {
        code: LD_W_ABS,
        jt: 0,
        jf: 0,
        k: offset,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn ret(k: u32) -> sock_filter {
    sock_filter {
        code: RET_K,
        jt: 0,
        jf: 0,
        k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_checks_the_arch_first_and_ends_in_allow() {
        let f = Filter::build(false);
        assert_eq!(f.program[0].k, ARCH);
        assert_eq!(f.program[1].k, AUDIT_ARCH);
        assert_eq!(f.program[2].k, DENY);
        assert_eq!(f.program.last().map(|i| i.k), Some(RET_ALLOW));
        assert_eq!(f.to_bytes().len(), f.program.len() * 8);
    }

    #[test]
    fn the_fast_path_lets_through_no_call_a_check_is_for() {
        for hot in HOT {
            assert!(
                !ALWAYS_DENIED.contains(hot) && !GATED.contains(hot),
                "{hot}"
            );
        }
        let lowest = ALWAYS_DENIED
            .iter()
            .chain(&GATED)
            .min()
            .copied()
            .unwrap_or(0);
        // Every checked call is at or above the bound below which all calls pass.
        assert!(ALWAYS_DENIED.iter().chain(&GATED).all(|n| *n >= lowest));
        let f = Filter::build(false);
        let bound = f
            .program
            .iter()
            .position(|i| i.code == JGE_K && i.k == lowest as u32)
            .expect("the fast path's bound");
        assert_eq!(f.program[bound + 1].k, RET_ALLOW);
    }

    #[test]
    fn network_off_adds_the_socket_gates() {
        let len = |network| Filter::build(network).program.len();
        assert_eq!(len(false), len(true) + 10);
    }
}
