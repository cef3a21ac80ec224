//! The audit log on the operator's side: `tollgate admin audit-verify`, and
//! the rows the operator's own `tollgate admin …` changes leave (actor
//! `operator`: whoever can run the binary against the database).

use clap::Args;
use serde_json::Value;

use super::ConfigArgs;
use tollgate_audit::{Actor, ActorKind, AuditLog, Change};
use tollgate_core::db::Database;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Walks the chain from its anchor (the last archived row) to its head;
/// exits non-zero at the first row that does not match.
pub async fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    let database = super::open_database(&args.config).await?;
    let verification = AuditLog::new(database).verify().await?;
    if args.json {
        println!("{}", serde_json::to_string(&verification)?);
    }
    match &verification.broken {
        None => {
            if !args.json {
                println!(
                    "audit log verified: rows {} to {} chain to head {}",
                    verification.anchor_seq + 1,
                    verification.head_seq,
                    verification.head_hash
                );
            }
            Ok(())
        }
        Some(broken) => anyhow::bail!("audit log broken at row {}: {}", broken.seq, broken.reason),
    }
}

/// Records one of the operator's changes to `workspace_id`.
pub async fn operator_change(database: &Database, op: &str, workspace_id: &str, after: Value) {
    let change = Change::new(op, Actor::of_kind(ActorKind::Operator))
        .workspace(workspace_id)
        .target(serde_json::json!({ "workspace_id": workspace_id }))
        .after(after);
    AuditLog::new(database.clone()).record(change).await;
}
