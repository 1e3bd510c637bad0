//! The wire between the supervisor (Rust) and a plugin host (`host/berth-host.mjs`, on Bun or
//! Node): length-prefixed JSON frames on a Unix socket that is separate from the host's
//! stdout/stderr. The handshake proves each side to the other: the supervisor speaks first
//! (`welcome`, carrying the secret it gave the host on its stdin, sent only after the peer's
//! credentials matched the spawned process), and the host answers `hello` with its own secret
//! and the connection generation; nothing else is accepted before it. Secrets never travel in
//! the environment.
//!
//! Owns: message shapes, the version, frame limits. Must not: know about plugins, SQLite or
//! tools — anything serialised here is a compatibility promise to `host/berth-host.mjs`, so
//! domain types stay out and are converted at the boundary.
//!
//! ```
//! use berth_protocol::*;
//! let frame = encode(&ToHost::Cancel { v: PROTOCOL_VERSION, cancel_id: 7 }).unwrap();
//! assert_eq!(u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4);
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};

/// 2: the supervisor's `welcome` comes first; secrets come on the host's stdin.
pub const PROTOCOL_VERSION: u32 = 2;
/// Largest frame either side accepts; checked from the length prefix before allocating.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;
/// Largest tool output (the `output` string of a tool result).
pub const MAX_TOOL_OUTPUT_BYTES: usize = 1024 * 1024;

/// What a request asks the host to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallKind {
    /// Import a standalone tool file and describe its tools.
    LoadTools,
    /// Run one tool.
    Invoke,
    /// Import a server plugin module, run its factories, and describe its contributions.
    LoadPlugin,
    /// Run one hook through the given plugin instances, in order, on one shared output.
    HookChain,
    /// Start one login method of a plugin's `auth` hook (`authorize(inputs)`).
    AuthAuthorize,
    /// Finish an OAuth login started by `auth-authorize` (`callback(code?)`).
    AuthCallback,
}

/// Supervisor → host.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ToHost {
    /// The first frame on a connection: proves to the host that it reached the supervisor that
    /// spawned it (a socket someone else put in its place does not know this secret).
    Welcome {
        v: u32,
        secret: String,
    },
    Req {
        v: u32,
        id: u64,
        /// The plugin instance (source id) the call is for.
        instance: String,
        kind: CallKind,
        /// Milliseconds the host has, from receipt.
        deadline_ms: u64,
        cancel_id: u64,
        /// `sha256:` of `body`, so both sides can log the same call without its contents.
        input_digest: String,
        body: Value,
    },
    Cancel {
        v: u32,
        cancel_id: u64,
    },
    /// The answer to an `up` call from the host.
    Down {
        v: u32,
        up: u64,
        ok: bool,
        #[serde(default)]
        value: Value,
        #[serde(default)]
        error: Option<WireError>,
    },
}

/// Host → supervisor.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FromHost {
    Hello {
        v: u32,
        secret: String,
        generation: u64,
        pid: u32,
        runtime: String,
        runtime_version: String,
    },
    /// Sent on receipt of a request, before any plugin code runs (the liveness lane).
    Ack { v: u32, id: u64 },
    Res {
        v: u32,
        id: u64,
        ok: bool,
        #[serde(default)]
        value: Value,
        #[serde(default)]
        error: Option<WireError>,
    },
    /// A message a plugin addressed to the person (`client.app.log`), for Berth's log and
    /// diagnostics. No answer is expected.
    Note {
        v: u32,
        instance: String,
        level: String,
        message: String,
    },
    /// A call from plugin code into Berth (a `client` method, `ctx.ask`, …), answered with one
    /// `down` frame carrying the same `up` id. Bounded per host by the supervisor.
    Up {
        v: u32,
        up: u64,
        /// The plugin instance (source id) the calling code belongs to, as the host knows it.
        instance: String,
        /// What is asked, e.g. `client.config.get` or `permission.ask`.
        method: String,
        #[serde(default)]
        body: Value,
    },
    /// `ctx.metadata({title, metadata})` from a running tool.
    Meta {
        v: u32,
        id: u64,
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        metadata: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub code: String,
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {0} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")]
    TooLarge(usize),
    #[error("frame is not valid JSON for this protocol: {0}")]
    Malformed(String),
    #[error("connection closed")]
    Closed,
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Serialises one frame (length prefix + JSON).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let body = serde_json::to_vec(msg).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(body.len()));
    }
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Reads one frame's bytes; the length is checked before the buffer is allocated.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge(len));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            FrameError::Closed
        } else {
            e.into()
        }
    })?;
    Ok(buf)
}

pub fn decode(bytes: &[u8]) -> Result<FromHost, FrameError> {
    serde_json::from_slice(bytes).map_err(|e| FrameError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_oversized_length_is_refused_before_allocation() {
        let mut bytes: &[u8] = &((MAX_FRAME_BYTES as u32 + 1).to_be_bytes());
        assert!(matches!(
            read_frame(&mut bytes).await,
            Err(FrameError::TooLarge(_))
        ));
    }

    #[test]
    fn unknown_fields_and_types_are_refused() {
        assert!(decode(br#"{"t":"ack","v":1,"id":1,"extra":1}"#).is_err());
        assert!(decode(br#"{"t":"shout","v":1}"#).is_err());
        assert!(matches!(
            decode(br#"{"t":"ack","v":1,"id":3}"#),
            Ok(FromHost::Ack { id: 3, .. })
        ));
    }
}
