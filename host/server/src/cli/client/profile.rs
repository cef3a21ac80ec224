//! Where the client's URL and key come from: flags, then the environment,
//! then a profile file. The file holds a key, so it is written owner-only.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

const DEFAULT_URL: &str = "http://127.0.0.1:8080";

#[derive(Args, Debug)]
pub struct Connection {
    /// Gateway URL (default: the profile's, else http://127.0.0.1:8080).
    #[arg(long, env = "TOLLGATE_URL", global = true)]
    url: Option<String>,
    /// API key (default: the profile's).
    #[arg(long, env = "TOLLGATE_API_KEY", global = true, hide_env_values = true)]
    api_key: Option<String>,
    /// Profile in the profile file (`~/.config/tollgate/profiles.toml`, or
    /// `TOLLGATE_PROFILE_FILE`).
    #[arg(long, env = "TOLLGATE_PROFILE", global = true, default_value = "default")]
    pub(super) profile: String,
    /// Act on this workspace instead of the key's own.
    #[arg(long, global = true)]
    pub(super) workspace: Option<String>,
    /// Print the raw JSON result (for scripts).
    #[arg(long, global = true)]
    pub(super) json: bool,
}

impl Connection {
    /// The gateway URL and key: flags, then the environment, then the profile.
    pub fn resolve(&self) -> anyhow::Result<(String, Option<String>)> {
        let profile = read_profile(&self.profile)?;
        let url = self
            .url
            .clone()
            .or_else(|| profile.get("url").and_then(|v| v.as_str()).map(str::to_string))
            .unwrap_or_else(|| DEFAULT_URL.to_string());
        let api_key = self
            .api_key
            .clone()
            .or_else(|| profile.get("api_key").and_then(|v| v.as_str()).map(str::to_string));
        Ok((url.trim_end_matches('/').to_string(), api_key))
    }

    pub fn workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    pub fn json(&self) -> bool {
        self.json
    }
}

fn profile_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOLLGATE_PROFILE_FILE") {
        return Some(PathBuf::from(path));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("tollgate").join("profiles.toml"))
}

fn read_profiles() -> anyhow::Result<toml::Table> {
    let Some(path) = profile_path().filter(|p| p.is_file()) else {
        return Ok(toml::Table::new());
    };
    let text = std::fs::read_to_string(&path)?;
    text.parse()
        .with_context(|| format!("invalid profile file {}", path.display()))
}

fn read_profile(name: &str) -> anyhow::Result<toml::Table> {
    Ok(match read_profiles()?.remove(name) {
        Some(toml::Value::Table(table)) => table,
        _ => toml::Table::new(),
    })
}

pub(super) fn save_profile(name: &str, url: &str, api_key: &str) -> anyhow::Result<()> {
    let path = profile_path().context("no profile file location: set TOLLGATE_PROFILE_FILE or HOME")?;
    let mut profiles = read_profiles()?;
    let mut profile = toml::Table::new();
    profile.insert("url".into(), url.into());
    profile.insert("api_key".into(), api_key.into());
    profiles.insert(name.to_string(), toml::Value::Table(profile));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, toml::to_string(&profiles)?)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    eprintln!("saved profile '{name}' in {}", path.display());
    Ok(())
}
