//! Network and sockets: TCP and UDP to listeners this test runs on 127.0.0.1, a pathname
//! UNIX socket outside the boundary, and the one listed in `sockets` — in each tier, with
//! node and bun. Every assertion checks the listener's side after the child has exited.

mod common;

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;

use berth_sandbox::{probe, Tier};
use common::{boundary, marker, path_arg, run_plan, runtimes, tiers};
use serde_json::json;

struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
    unix_outside: UnixListener,
    unix_listed: UnixListener,
    listed_path: std::path::PathBuf,
    outside_path: std::path::PathBuf,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Listeners {
    fn new() -> Listeners {
        let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind udp");
        let (a, b) = (
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
        );
        let outside_path = a.path().join("other.sock");
        let listed_path = b.path().join("berth-channel.sock");
        let unix_outside = UnixListener::bind(&outside_path).expect("bind unix");
        let unix_listed = UnixListener::bind(&listed_path).expect("bind unix");
        for nb in [
            tcp.set_nonblocking(true),
            udp.set_nonblocking(true),
            unix_outside.set_nonblocking(true),
            unix_listed.set_nonblocking(true),
        ] {
            nb.expect("nonblocking");
        }
        Listeners {
            tcp,
            udp,
            unix_outside,
            unix_listed,
            listed_path,
            outside_path,
            _dirs: (a, b),
        }
    }

    fn plan(&self) -> serde_json::Value {
        json!({"steps": [
            {"name": "tcp", "op": "tcp", "port": self.tcp.local_addr().expect("addr").port()},
            {"name": "udp", "op": "udp", "port": self.udp.local_addr().expect("addr").port()},
            {"name": "unix-outside", "op": "unix", "path": path_arg(&self.outside_path)},
            {"name": "unix-listed", "op": "unix", "path": path_arg(&self.listed_path)},
        ]})
    }

    /// What reached each listener, checked without blocking after the child exited.
    fn reached(&self) -> (bool, bool, bool, bool) {
        let tcp = accepted(self.tcp.accept().map(|_| ()));
        let mut buf = [0u8; 64];
        let udp = accepted(self.udp.recv_from(&mut buf).map(|_| ()));
        let outside = accepted(self.unix_outside.accept().map(|_| ()));
        let listed = accepted(self.unix_listed.accept().map(|_| ()));
        (tcp, udp, outside, listed)
    }
}

fn accepted(r: std::io::Result<()>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("the listener failed: {e}"),
    }
}

#[tokio::test]
async fn with_network_off_only_the_listed_socket_is_reachable() {
    for tier in tiers() {
        for rt in runtimes() {
            let l = Listeners::new();
            let mut b = boundary(tier, &marker("net-off"));
            b.sockets = vec![l.listed_path.clone()];
            let out = run_plan(&rt, &b, &l.plan()).await;
            let what = format!("{} under {tier:?}", rt.name);
            let (tcp, udp, outside, listed) = l.reached();
            assert!(!tcp && !out.ok("tcp").0, "{what}: TCP got through: {out:?}");
            assert!(!udp, "{what}: a UDP datagram got through: {out:?}");
            assert!(
                listed && out.ok("unix-listed").0,
                "{what}: the channel failed: {out:?}"
            );
            match tier {
                Tier::Bwrap => {
                    assert!(!outside && !out.ok("unix-outside").0, "{what}: {out:?}");
                }
                Tier::Landlock => {
                    // The documented limit, pinned: Landlock ABI < 9 cannot stop this.
                    assert!(outside && out.ok("unix-outside").0, "{what}: {out:?}");
                    let gaps = probe().cannot_stop(Tier::Landlock).join(" ");
                    assert!(
                        gaps.contains("connecting to pathname UNIX sockets"),
                        "{gaps}"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn with_network_on_tcp_and_udp_reach_the_loopback() {
    for tier in tiers() {
        for rt in runtimes() {
            let l = Listeners::new();
            let mut b = boundary(tier, &marker("net-on"));
            b.network = true;
            b.sockets = vec![l.listed_path.clone()];
            let out = run_plan(&rt, &b, &l.plan()).await;
            let what = format!("{} under {tier:?}", rt.name);
            let (tcp, udp, _, listed) = l.reached();
            assert!(
                tcp && out.ok("tcp").0,
                "{what}: TCP did not connect: {out:?}"
            );
            assert!(
                udp && out.ok("udp").0,
                "{what}: UDP did not arrive: {out:?}"
            );
            assert!(listed, "{what}: {out:?}");
        }
    }
}
