//! Pricing snapshots: the catalog's prices, frozen as an immutable, content-
//! addressed row. A request records the snapshot it was priced from, so the cost
//! it shows is the cost it is billed even if prices change while it runs.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::catalog::Catalog;
use tollgate_core::db::{Database, now_ms};

/// Stores the catalog's price list if it is new and returns its snapshot id.
/// Identical price lists share one snapshot.
pub async fn register(database: &Database, catalog: &Catalog) -> anyhow::Result<i64> {
    // Input and output only, unless a kind has a price of its own: a table
    // of plain prices keeps the digest it always had.
    let prices: BTreeMap<&str, Vec<u64>> = catalog
        .routes()
        .map(|route| {
            let price = &route.price;
            let mut row = vec![price.input.0, price.output.0];
            if price.has_kinds() {
                let kind = |p: Option<tollgate_core::money::PicoPerToken>| p.map_or(u64::MAX, |p| p.0);
                row.extend([
                    kind(price.cache_read),
                    kind(price.cache_write),
                    kind(price.reasoning),
                    price.per_request.0 as u64,
                ]);
            }
            (route.id.as_str(), row)
        })
        .collect();
    let body = serde_json::to_string(&prices)?;
    let digest = hex::encode(Sha256::digest(body.as_bytes()));
    sqlx::query("INSERT INTO pricing_snapshots (digest, prices, created_at) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING")
        .bind(&digest)
        .bind(&body)
        .bind(now_ms())
        .execute(&database.pool)
        .await?;
    let id: i64 = sqlx::query_scalar("SELECT id FROM pricing_snapshots WHERE digest = $1")
        .bind(&digest)
        .fetch_one(&database.pool)
        .await?;
    Ok(id)
}
