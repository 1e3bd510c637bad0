//! What Berth's reliability runs share (`berth-crash-loop`, `berth-load`, `berth-fuzz`): their
//! command-line flags, and starting `berth serve` on loopback and reading the address and token
//! it prints.
//!
//! Owns: those helpers. Must not: hold a run's checks (each binary owns its own).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Child;

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
