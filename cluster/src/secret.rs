//! The cluster's shared secret: who may use a scheduler and an executor. A process bound to an
//! address other machines reach runs the SQL of whoever reaches its port, so it must be given a
//! secret (a file, or the environment variable `COMMDB_CLUSTER_SECRET`; never an argument that
//! `ps` shows), and every client and executor presents it. On loopback a secret is optional.
//!
//! Every connection of a Ballista cluster is opened through one hook, the gRPC endpoint it
//! connects with (client to scheduler, client and executors to an executor's shuffle files,
//! executors to the scheduler): commdb sets there a user agent carrying a token derived from
//! the secret (BLAKE3's key derivation, so the secret itself never travels), and the scheduler's
//! gRPC service and each executor's Arrow Flight service refuse a request without it
//! (`Unauthenticated`, with what to do). The token keeps out whoever lacks the secret; it does
//! not encrypt: on a network others can listen to, run the cluster inside a VPN or an SSH
//! tunnel.

use std::path::Path;
use std::sync::Arc;

use ballista_core::extension::EndpointOverrideFn;

use crate::Error;

/// The environment variable a secret may come from.
pub const VARIABLE: &str = "COMMDB_CLUSTER_SECRET";

/// What the token is derived for (BLAKE3's context string: a token for anything else differs).
const CONTEXT: &str = "commdb 2026-11 cluster secret: the token a client presents";

/// The word before the token in the user agent.
const PREFIX: &str = "commdb-secret/";

/// A cluster's shared secret, kept only as the token derived from it.
#[derive(Clone)]
pub struct Secret {
    token: blake3::Hash,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The secret in `file` when given (its first line, which must be at least 16 characters;
    /// the file must not be readable by others), else in `COMMDB_CLUSTER_SECRET`, else none.
    pub fn find(file: Option<&Path>) -> crate::Result<Option<Secret>> {
        if let Some(file) = file {
            return read_file(file).map(Some);
        }
        match std::env::var(VARIABLE) {
            Ok(text) => from_text(&text, VARIABLE).map(Some),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(e) => Err(Error::Usage(format!("{VARIABLE}: {e}"))),
        }
    }

    fn user_agent(&self) -> String {
        format!("{PREFIX}{}", self.token.to_hex())
    }

    /// The hook through which every connection this process opens presents the secret.
    pub fn endpoint(&self) -> EndpointOverrideFn {
        let agent = self.user_agent();
        Arc::new(move |endpoint| Ok(endpoint.user_agent(agent.clone())?))
    }

    /// A gRPC interceptor letting through only requests that present the secret.
    pub fn gate(&self, process: &str) -> Gate {
        Gate { token: self.token, process: process.to_string() }
    }
}

/// Checks each request a server takes for the cluster's secret.
#[derive(Clone)]
pub struct Gate {
    token: blake3::Hash,
    process: String,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate").field("process", &self.process).finish_non_exhaustive()
    }
}

impl tonic::service::Interceptor for Gate {
    fn call(&mut self, request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let presented = request
            .metadata()
            .get("user-agent")
            .and_then(|v| v.to_str().ok())
            .and_then(|agent| agent.split_whitespace().find_map(|word| word.strip_prefix(PREFIX)))
            .and_then(|hex| blake3::Hash::from_hex(hex).ok());
        match presented {
            // blake3::Hash compares in constant time.
            Some(token) if token == self.token => Ok(request),
            Some(_) => Err(tonic::Status::unauthenticated(format!(
                "{} refused the cluster's secret this process gave: it differs from the one the cluster was started with",
                self.process
            ))),
            None => Err(tonic::Status::unauthenticated(format!(
                "{} needs the cluster's secret: give it in {VARIABLE} or with --secret-file FILE",
                self.process
            ))),
        }
    }
}

/// The secret held in `file`.
fn read_file(file: &Path) -> crate::Result<Secret> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(file).map_err(|e| Error::Usage(format!("secret file {}: {e}", file.display())))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Error::Usage(format!(
                "secret file {}: others may read it (mode {mode:o}): `chmod 600 {}`",
                file.display(),
                file.display()
            )));
        }
    }
    let text =
        std::fs::read_to_string(file).map_err(|e| Error::Usage(format!("secret file {}: {e}", file.display())))?;
    from_text(text.lines().next().unwrap_or_default(), &format!("secret file {}", file.display()))
}

/// The secret `text` (from `source`), at least 16 characters.
fn from_text(text: &str, source: &str) -> crate::Result<Secret> {
    let text = text.trim();
    if text.chars().count() < 16 {
        return Err(Error::Usage(format!(
            "{source}: a cluster's secret must be at least 16 characters (e.g. `openssl rand -hex 32`)"
        )));
    }
    Ok(Secret { token: blake3::derive_key(CONTEXT, text.as_bytes()).into() })
}

/// Whether the scheduler at `address` lets in a process presenting `secret`; its refusal,
/// which names it and says what to do, otherwise.
pub async fn admitted(address: std::net::SocketAddr, secret: Option<&Secret>) -> crate::Result<()> {
    let present = |endpoint: tonic::transport::Endpoint| match secret {
        Some(secret) => endpoint.user_agent(secret.user_agent()).map_err(|e| e.to_string()),
        None => Ok(endpoint),
    };
    match crate::ask_scheduler(address, std::time::Duration::from_secs(10), present).await {
        Err(e) => Err(Error::Cluster(format!("cannot reach the scheduler at {address}: {e}"))),
        Ok(Err(status)) if status.code() == tonic::Code::Unauthenticated => {
            Err(Error::Cluster(status.message().to_string()))
        }
        Ok(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor;

    fn request(agent: Option<&str>) -> tonic::Request<()> {
        let mut r = tonic::Request::new(());
        if let Some(a) = agent {
            r.metadata_mut().insert("user-agent", a.parse().unwrap());
        }
        r
    }

    #[test]
    fn only_the_token_of_the_same_secret_passes() {
        let secret = from_text("correct horse battery staple", "test").unwrap();
        let other = from_text("correct horse battery stapler", "test").unwrap();
        let mut gate = secret.gate("scheduler 127.0.0.1:1");
        let agent = format!("{} tonic/0.14", secret.user_agent());
        assert!(gate.call(request(Some(&agent))).is_ok());
        let wrong = gate.call(request(Some(&other.user_agent()))).unwrap_err();
        assert!(wrong.message().contains("differs"), "{}", wrong.message());
        let none = gate.call(request(None)).unwrap_err();
        assert!(none.message().contains(VARIABLE), "{}", none.message());
        assert!(gate.call(request(Some("tonic/0.14"))).is_err());
        // The secret itself is not in what travels.
        assert!(!agent.contains("horse"));
        assert!(from_text("short", "test").is_err());
    }
}
