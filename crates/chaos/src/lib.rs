//! What Berth's reliability runs share (`berth-crash-loop`, `berth-soak`, `berth-load`,
//! `berth-fuzz`): their command-line flags, reading the address and token `berth serve` prints,
//! one HTTP request to it with that token; the scratch machine ([`machine`]) and /proc reads
//! ([`procs`]).
//!
//! Owns: those helpers. Must not: hold a run's checks (each binary owns its own).

pub mod machine;
pub mod procs;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

/// `--flag value` pairs of the command line.
pub struct Flags(Vec<String>);

impl Flags {
    pub fn from_env() -> Flags {
        Flags(std::env::args().collect())
    }

    /// The value after `flag`, if given.
    pub fn value(&self, flag: &str) -> Option<String> {
        self.0
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.0.get(i + 1))
            .cloned()
    }

    /// The value after `flag` parsed, else `default`.
    pub fn number<T: std::str::FromStr>(&self, flag: &str, default: T) -> T {
        self.value(flag)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// `--seed S`, else one from the clock (printed by the run, so it can be repeated).
    pub fn seed(&self) -> u64 {
        self.value("--seed")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            })
    }

    /// `--berth PATH`, else the `berth` beside this executable (the same build).
    pub fn berth(&self) -> PathBuf {
        self.value("--berth").map(PathBuf::from).unwrap_or_else(|| {
            std::env::current_exe()
                .expect("this executable")
                .with_file_name("berth")
        })
    }
}

/// The address and token a `berth serve --json` child prints (one JSON document over several
/// lines on its stdout, which must be piped).
pub fn served_address(child: &mut Child) -> (String, String) {
    let mut out = BufReader::new(child.stdout.take().expect("stdout is piped"));
    let mut text = String::new();
    loop {
        let mut line = String::new();
        let n = out
            .read_line(&mut line)
            .expect("berth serve prints its address");
        assert!(n > 0, "berth serve ended before it printed its address");
        text.push_str(&line);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            let url = v["serve"]["url"].as_str().expect("a url").to_string();
            return (
                v["serve"]["addr"].as_str().expect("an address").to_string(),
                url.split("token=").nth(1).expect("a token").to_string(),
            );
        }
    }
}

/// One request to `berth serve` at `addr` with its token (`Connection: close`, a JSON body):
/// its status and body, or `None` when it did not answer within `timeout`.
pub fn request(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).ok()?;
    let at = resp.windows(4).position(|w| w == b"\r\n\r\n")?;
    let status = String::from_utf8_lossy(&resp[..at])
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some((status, resp.split_off(at + 4)))
}
