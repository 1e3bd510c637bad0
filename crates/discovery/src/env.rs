//! The part of the process environment OpenCode 1.18.4 reads to find its configuration,
//! captured once so a scan is a pure function of (environment, files).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// OpenCode's view of the environment. Build it with [`OpencodeEnv::from_process`] or, in
/// tests, field by field.
#[derive(Debug, Clone, Default)]
pub struct OpencodeEnv {
    pub home: PathBuf,
    pub xdg_config_home: Option<PathBuf>,
    pub xdg_data_home: Option<PathBuf>,
    pub xdg_cache_home: Option<PathBuf>,
    /// `OPENCODE_CONFIG`: one more config file.
    pub opencode_config: Option<PathBuf>,
    /// `OPENCODE_CONFIG_DIR`: one more config directory (last in the list).
    pub opencode_config_dir: Option<PathBuf>,
    /// `OPENCODE_CONFIG_CONTENT`: inline JSON, scope local.
    pub opencode_config_content: Option<String>,
    /// `OPENCODE_DISABLE_PROJECT_CONFIG`, raw.
    pub disable_project_config: Option<String>,
    /// `OPENCODE_PURE`, raw.
    pub pure_env: Option<String>,
    /// `--pure` on Berth's own command line.
    pub pure_flag: bool,
    /// Where the administrator's managed config lives (`/etc/opencode` on Linux).
    pub managed_config_dir: PathBuf,
    /// The process working directory: inline configs resolve relative plugin paths against it.
    pub cwd: PathBuf,
}

/// A boolean switch as Berth applies it, with the values it could not interpret kept visible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "raw")]
pub enum Switch {
    Off,
    On,
    /// A value that is neither clearly on nor clearly off.
    Unrecognised(String),
}

impl Switch {
    /// OpenCode's common flag reader (`OPENCODE_DISABLE_PROJECT_CONFIG` and most flags): the
    /// lowercased value `"true"` or `"1"` is on, anything else off. Values that are neither
    /// clearly on nor clearly off are kept visible as unrecognised (still read as off).
    pub fn parse(raw: Option<&str>) -> Switch {
        match raw.map(|v| v.trim().to_ascii_lowercase()) {
            None => Switch::Off,
            Some(v) if v.is_empty() || v == "0" || v == "false" => Switch::Off,
            Some(v) if v == "1" || v == "true" => Switch::On,
            Some(_) => Switch::Unrecognised(raw.unwrap_or_default().to_string()),
        }
    }

    /// OpenCode's strict reader used for `OPENCODE_PURE` by the plugin loader: exactly `true
    /// yes on 1 y` is on, `false no off 0 n` is off (case-sensitive); anything else — `TRUE`,
    /// `2`, an empty string — makes OpenCode exit, and stops Berth's external plugins.
    pub fn parse_strict(raw: Option<&str>) -> Switch {
        match raw {
            None => Switch::Off,
            Some("true" | "yes" | "on" | "1" | "y") => Switch::On,
            Some("false" | "no" | "off" | "0" | "n") => Switch::Off,
            Some(other) => Switch::Unrecognised(other.to_string()),
        }
    }

    /// Whether OpenCode treats the value as on (for the common reader).
    pub fn opencode_reads_as_on(&self) -> bool {
        matches!(self, Switch::On)
    }
}

impl OpencodeEnv {
    /// Captures the variables from this process's environment.
    pub fn from_process() -> OpencodeEnv {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let home = var("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        let cwd = std::env::current_dir().unwrap_or_else(|_| home.clone());
        OpencodeEnv {
            xdg_config_home: var("XDG_CONFIG_HOME").map(PathBuf::from),
            xdg_data_home: var("XDG_DATA_HOME").map(PathBuf::from),
            xdg_cache_home: var("XDG_CACHE_HOME").map(PathBuf::from),
            opencode_config: var("OPENCODE_CONFIG").map(|p| absolute(&cwd, Path::new(&p))),
            opencode_config_dir: var("OPENCODE_CONFIG_DIR").map(|p| absolute(&cwd, Path::new(&p))),
            opencode_config_content: std::env::var("OPENCODE_CONFIG_CONTENT")
                .ok()
                .filter(|v| !v.is_empty()),
            disable_project_config: std::env::var("OPENCODE_DISABLE_PROJECT_CONFIG").ok(),
            pure_env: std::env::var("OPENCODE_PURE").ok(),
            pure_flag: false,
            // OpenCode's own override (its tests use it); empty means unset, as in OpenCode.
            managed_config_dir: var("OPENCODE_TEST_MANAGED_CONFIG_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(default_managed_dir),
            home,
            cwd,
        }
    }

    /// `$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`.
    pub fn global_config_dir(&self) -> PathBuf {
        self.xdg_config_home
            .clone()
            .unwrap_or_else(|| self.home.join(".config"))
            .join("opencode")
    }

    pub fn data_home(&self) -> PathBuf {
        self.xdg_data_home
            .clone()
            .unwrap_or_else(|| self.home.join(".local").join("share"))
    }

    pub fn cache_home(&self) -> PathBuf {
        self.xdg_cache_home
            .clone()
            .unwrap_or_else(|| self.home.join(".cache"))
    }

    /// The pure switch as Berth applies it: `--pure` wins; otherwise `OPENCODE_PURE`.
    pub fn pure(&self) -> Switch {
        if self.pure_flag {
            Switch::On
        } else {
            Switch::parse_strict(self.pure_env.as_deref())
        }
    }

    pub fn project_config_disabled(&self) -> Switch {
        Switch::parse(self.disable_project_config.as_deref())
    }
}

fn default_managed_dir() -> PathBuf {
    if cfg!(windows) {
        std::env::var_os("ProgramData")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("C:\\ProgramData"))
            .join("opencode")
    } else if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/opencode")
    } else {
        PathBuf::from("/etc/opencode")
    }
}

pub(crate) fn absolute(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::Switch;

    #[test]
    fn switches_read_like_opencode_and_flag_what_they_cannot_read() {
        assert_eq!(Switch::parse(None), Switch::Off);
        assert_eq!(Switch::parse(Some("1")), Switch::On);
        assert_eq!(Switch::parse(Some("TRUE")), Switch::On);
        assert_eq!(Switch::parse(Some("0")), Switch::Off);
        assert_eq!(
            Switch::parse(Some("yes")),
            Switch::Unrecognised("yes".into())
        );
        assert!(!Switch::parse(Some("yes")).opencode_reads_as_on());
        // The pure switch: OpenCode's strict reader.
        assert_eq!(Switch::parse_strict(Some("yes")), Switch::On);
        assert_eq!(Switch::parse_strict(Some("n")), Switch::Off);
        assert_eq!(
            Switch::parse_strict(Some("TRUE")),
            Switch::Unrecognised("TRUE".into())
        );
        assert_eq!(
            Switch::parse_strict(Some("")),
            Switch::Unrecognised("".into())
        );
    }
}
