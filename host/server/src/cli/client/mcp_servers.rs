//! `tollgate mcp-servers add|list|remove`: a workspace's remote MCP servers
//! (docs/mcp.md, "Remote MCP servers"), over `mcp_servers.*`. A credential
//! is read from an environment variable the command names, never from the
//! command line, so it stays out of shell history and the process list; the
//! gateway seals it and never shows it again, and this module never prints it.

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

#[derive(Subcommand, Debug)]
pub enum McpServersCommand {
    /// Add a remote MCP server: its tools, prompts and resources join
    /// /v1/mcp as <NAME>__<tool>, and /v1/mcp/<NAME> serves it alone.
    /// Without --header or --oauth-token-url the gateway sends no credential.
    Add {
        /// The install name (1-48 lowercase letters, digits and single '-');
        /// shared with the workspace's installs.
        name: String,
        /// The server's MCP endpoint, e.g. https://mcp.example.com/mcp. It must
        /// pass the gateway's egress policy. (Not `url`: that is the
        /// connection's `--url`, and clap would give both one value.)
        #[arg(value_name = "URL")]
        server_url: String,
        /// How the server is reached: streamable-http, or sse for a server
        /// that serves only the older HTTP+SSE transport (the URL is then its
        /// event stream, e.g. https://mcp.example.com/sse).
        #[arg(long, value_enum, default_value_t = Transport::StreamableHttp)]
        transport: Transport,
        #[command(flatten)]
        auth: AuthArgs,
    },
    /// The workspace's remote MCP servers: URL, the credential header's name
    /// or the OAuth client, never a secret.
    List,
    /// Remove a remote MCP server; its tools leave /v1/mcp at once.
    Remove { name: String },
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Transport {
    StreamableHttp,
    Sse,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Self::StreamableHttp => "streamable-http",
            Self::Sse => "sse",
        }
    }
}

#[derive(Args, Debug)]
pub struct AuthArgs {
    /// Send a static credential in this header on every request, e.g.
    /// authorization; its value comes from --value-env.
    #[arg(
        long,
        value_name = "NAME",
        requires = "value_env",
        conflicts_with = "oauth_token_url"
    )]
    header: Option<String>,
    /// The environment variable holding the header's value (e.g. "Bearer …").
    #[arg(long, value_name = "VAR", requires = "header")]
    value_env: Option<String>,
    /// Use OAuth 2.1 client credentials: the gateway fetches and refreshes
    /// the access token from this token endpoint.
    #[arg(long, value_name = "URL", requires_all = ["client_id", "client_secret_env"])]
    oauth_token_url: Option<String>,
    /// The OAuth client id.
    #[arg(long, value_name = "ID", requires = "oauth_token_url")]
    client_id: Option<String>,
    /// The environment variable holding the OAuth client secret.
    #[arg(long, value_name = "VAR", requires = "oauth_token_url")]
    client_secret_env: Option<String>,
    /// A scope to ask for (repeatable).
    #[arg(long = "scope", value_name = "SCOPE", requires = "oauth_token_url")]
    scopes: Vec<String>,
}

impl McpServersCommand {
    /// The op and its params; a credential is read from its variable here.
    pub(super) fn op(&self) -> anyhow::Result<(&'static str, Value)> {
        Ok(match self {
            Self::Add {
                name,
                server_url,
                transport,
                auth,
            } => (
                "mcp_servers.create",
                json!({
                    "name": name,
                    "url": server_url,
                    "transport": transport.name(),
                    "auth": auth.resolve(&|var| std::env::var(var).ok())?,
                }),
            ),
            Self::List => ("mcp_servers.list", json!({})),
            Self::Remove { name } => ("mcp_servers.delete", json!({"name": name})),
        })
    }
}

impl AuthArgs {
    /// The `auth` param, with secrets taken from `env`. An error names the
    /// variable, never a value.
    fn resolve(&self, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Value> {
        let read = |var: &str| {
            env(var)
                .filter(|value| !value.is_empty())
                .with_context(|| format!("the environment variable {var} is not set (or empty)"))
        };
        if let (Some(header), Some(var)) = (&self.header, &self.value_env) {
            return Ok(json!({"header": header, "value": read(var)?}));
        }
        if let (Some(token_url), Some(client_id), Some(var)) =
            (&self.oauth_token_url, &self.client_id, &self.client_secret_env)
        {
            return Ok(json!({"client_credentials": {
                "token_url": token_url, "client_id": client_id,
                "client_secret": read(var)?, "scopes": self.scopes,
            }}));
        }
        Ok(json!("none"))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(subcommand)]
        command: McpServersCommand,
    }

    fn parse(args: &[&str]) -> Result<McpServersCommand, clap::Error> {
        let args = ["mcp-servers"].iter().chain(args).copied();
        Probe::try_parse_from(args).map(|probe| probe.command)
    }

    #[test]
    fn a_header_and_an_oauth_client_exclude_each_other_and_need_their_secret() {
        let add = ["add", "gh", "https://mcp.example.com/mcp"];
        let with = |extra: &[&str]| parse(&[&add[..], extra].concat());
        assert!(with(&["--header", "authorization"]).is_err(), "no --value-env");
        assert!(with(&["--value-env", "V"]).is_err(), "no --header");
        assert!(with(&["--oauth-token-url", "https://a.example.com/t", "--client-id", "c"]).is_err());
        let both = [
            "--header",
            "authorization",
            "--value-env",
            "V",
            "--oauth-token-url",
            "https://a.example.com/t",
            "--client-id",
            "c",
            "--client-secret-env",
            "S",
        ];
        assert!(with(&both).is_err(), "one kind of auth");
    }

    #[test]
    fn the_transport_is_streamable_http_unless_sse_is_named() {
        let transport_of = |args: &[&str]| {
            let add = parse(&[&["add", "gh", "https://mcp.example.com/sse"][..], args].concat())?;
            let (_, params) = add.op().unwrap();
            Ok::<_, clap::Error>(params["transport"].clone())
        };
        assert_eq!(transport_of(&[]).unwrap(), json!("streamable-http"));
        assert_eq!(transport_of(&["--transport", "sse"]).unwrap(), json!("sse"));
        assert!(transport_of(&["--transport", "websocket"]).is_err());
    }

    #[test]
    fn secrets_come_from_the_named_variable_and_an_unset_one_is_named_not_shown() {
        let env = |var: &str| (var == "GH_AUTH").then(|| "Bearer ghp_secret".to_string());
        let McpServersCommand::Add { auth, .. } = parse(&[
            "add",
            "gh",
            "https://mcp.example.com/mcp",
            "--header",
            "authorization",
            "--value-env",
            "GH_AUTH",
        ])
        .unwrap() else {
            panic!("not add")
        };
        assert_eq!(
            auth.resolve(&env).unwrap(),
            json!({"header": "authorization", "value": "Bearer ghp_secret"})
        );

        let McpServersCommand::Add { auth, .. } = parse(&[
            "add",
            "gh",
            "https://mcp.example.com/mcp",
            "--oauth-token-url",
            "https://auth.example.com/token",
            "--client-id",
            "tollgate",
            "--client-secret-env",
            "MISSING",
            "--scope",
            "mcp:tools",
        ])
        .unwrap() else {
            panic!("not add")
        };
        let error = auth.resolve(&env).unwrap_err().to_string();
        assert!(error.contains("MISSING") && !error.contains("ghp_secret"), "{error}");
        let env = |_: &str| Some("s3cret".to_string());
        assert_eq!(
            auth.resolve(&env).unwrap()["client_credentials"],
            json!({"token_url": "https://auth.example.com/token", "client_id": "tollgate",
                   "client_secret": "s3cret", "scopes": ["mcp:tools"]})
        );
    }
}
