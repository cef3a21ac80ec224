//! Plans and their limits (docs/billing.md): which plan a workspace is on
//! (the label `workspaces.plan`, read through the accounts API), what that
//! plan allows, and the monthly request counter of limited plans
//! (`quota.rs`, owner of `plan_usage`). The data plane asks [`Billing::admit`]
//! before it reserves; members and deployments ask for the plan's seat and
//! endpoint limits, which their owners enforce inside their own transactions.
//!
//! A workspace's plan is cached for [`PLAN_TTL`], so an unlimited plan costs
//! a request no I/O; a limited one is admitted from this gateway's slice of
//! the month's requests, and costs a conditional upsert only when the slice
//! runs out (`quota.rs`). Spend controls (budgets) are held at reservation
//! through [`Admitted::hold_budgets`] (`budgets.rs`).
//!
//! Through a database outage (docs/billing.md, "When the database is
//! unreachable"): an expired plan or budget list is still read again first,
//! and only when the database cannot answer is the last known one used
//! (`tollgate_core::outage`). Slices already claimed are spent from memory as
//! usual; a request that needs a new claim is refused (the data plane answers
//! 503 `ledger_unavailable`), never admitted past a limit.

// One test reads the thread's CPU clock through libc; nothing else is unsafe.
#![deny(unsafe_code)]

pub mod budgets;
mod leased;
pub mod payments;
pub mod plans;
pub mod quota;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{Datelike, TimeZone, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use budgets::{Budget, BudgetError, BudgetHold, Budgets};
use plans::{Plan, PlanConfig, Plans};
use quota::{Clock, FileClock, Quota, SystemClock};
use tollgate_core::db::Database;
use tollgate_core::outage::{self, Outage};
use tollgate_identity::accounts::Accounts;

/// How long a workspace's plan is trusted before it is read again: a plan
/// changed on another gateway (or by `tollgate admin plan set`) applies here
/// within this long.
const PLAN_TTL: Duration = Duration::from_secs(1);

/// `[billing]`: the plans.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BillingConfig {
    /// Plans by id, over the built-in `free`, `pro`, `team`, `business` and
    /// `enterprise`; a table here replaces the built-in plan of its id whole.
    pub plans: BTreeMap<String, PlanConfig>,
    /// For tests only: a file holding the current time (RFC 3339), read on
    /// every request to choose the month. Never set it in production.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_clock_file: Option<PathBuf>,
    /// Stripe Checkout for top-ups and paid plans; off until its
    /// `secret_key` is set.
    pub stripe: payments::StripeConfig,
    /// Bounds on one wallet top-up.
    pub topups: payments::TopupConfig,
}

#[derive(Debug, thiserror::Error)]
pub enum BillingError {
    #[error(
        "Plan limit reached: this workspace is on the '{plan}' plan, which allows {limit} model requests per calendar month (UTC), and all of {month}'s are used. Move to a plan with more requests (`billing.plans.list`, then `billing.plan.change` or an operator's `tollgate admin plan set`), or wait for the next month."
    )]
    LimitReached { plan: String, limit: u64, month: String },
    #[error(
        "workspace '{workspace_id}' is on plan '{plan}', which this gateway does not define; add [billing.plans.{plan}] to the configuration or move the workspace to one of: {known}"
    )]
    UnknownPlan {
        workspace_id: String,
        plan: String,
        known: String,
    },
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// A request admitted under its workspace's plan.
pub struct Admitted {
    pub plan: Arc<Plan>,
    /// Where it was counted, when the plan has a monthly limit.
    counted: Option<(Quota, String, String)>,
    /// The budgets that apply to it (its workspace's and its key's).
    budgets: Vec<Arc<Budget>>,
    spend: Budgets,
}

impl Admitted {
    /// Holds the request's worst case against its budgets (none: no I/O).
    pub async fn hold_budgets(&self, worst_case: tollgate_core::money::Nanos) -> Result<BudgetHold, BudgetError> {
        self.spend.hold(&self.budgets, worst_case).await
    }

    /// Uncounts the request: it was refused after all (the wallet was short).
    pub fn give_back(self) {
        if let Some((quota, workspace_id, period)) = self.counted {
            quota.give_back(&workspace_id, &period);
        }
    }
}

/// What a workspace used this month, against its plan.
#[derive(Serialize, JsonSchema)]
pub struct MonthUsage {
    pub workspace_id: String,
    pub plan: String,
    /// The calendar month (UTC), `YYYY-MM`.
    pub month: String,
    /// Model requests this month: on a plan with a monthly limit, the requests
    /// it admitted; otherwise the model requests in the request log.
    pub requests: u64,
    /// The plan's monthly limit; null: unlimited.
    pub monthly_requests: Option<u64>,
    /// Requests left this month; null: unlimited.
    pub remaining: Option<u64>,
    /// Everything billed this month (provider cost plus fees), exact USD.
    pub spend_usd: String,
    /// The gateway fees within `spend_usd`, exact USD.
    pub fee_usd: String,
}

/// The billing concern's state.
pub struct Billing {
    plans: Plans,
    accounts: Accounts,
    quota: Quota,
    database: Database,
    clock: Arc<dyn Clock>,
    cache: Mutex<HashMap<String, (Arc<Plan>, Instant)>>,
    /// Whether the database answers plan reads, and the outage's warnings.
    plans_outage: Outage,
    budgets: Budgets,
    payments: Option<payments::Payments>,
}

impl Billing {
    pub fn new(config: &BillingConfig, accounts: Accounts, database: Database) -> anyhow::Result<Self> {
        let clock: Arc<dyn Clock> = match &config.test_clock_file {
            Some(path) => Arc::new(FileClock(path.clone())),
            None => Arc::new(SystemClock),
        };
        Ok(Self {
            plans: Plans::build(&config.plans)?,
            accounts,
            quota: Quota::new(database.clone()),
            budgets: Budgets::new(database.clone(), clock.clone()),
            payments: payments::Payments::new(&config.stripe, &config.topups, database.clone())?,
            database,
            clock,
            cache: Mutex::new(HashMap::new()),
            plans_outage: Outage::new("workspace plans"),
        })
    }

    /// Fails when a workspace is on a plan this configuration does not
    /// define, so a gateway never starts unable to serve one.
    pub async fn check_plans_in_use(&self) -> anyhow::Result<()> {
        for (workspace_id, plan) in self.accounts.plans_in_use().await? {
            if self.plans.get(&plan).is_none() {
                return Err(self.unknown(&workspace_id, &plan).into());
            }
        }
        Ok(())
    }

    pub fn plans(&self) -> &Plans {
        &self.plans
    }

    /// The audit log, where what a payment changed is recorded.
    pub fn audit(&self) -> tollgate_audit::AuditLog {
        tollgate_audit::AuditLog::new(self.database.clone())
    }

    /// Spend controls.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Payments, when a processor is configured.
    pub fn payments(&self) -> Option<&payments::Payments> {
        self.payments.as_ref()
    }

    /// The workspace's top-ups and plan checkouts, newest first (also on a
    /// gateway without a processor: they are in the database).
    pub async fn checkouts(
        &self,
        workspace_id: &str,
        limit: u32,
    ) -> Result<Vec<payments::CheckoutShown>, payments::PaymentError> {
        payments::list(&self.database, workspace_id, limit).await
    }

    /// Why the workspace's top-ups are held (a disputed payment), if they are;
    /// an operator lifts it (`tollgate admin payments release`).
    pub async fn topup_hold(&self, workspace_id: &str) -> sqlx::Result<Option<String>> {
        payments::held(&self.database, workspace_id).await
    }

    /// Drops the cached plan of a workspace whose plan changed here.
    pub fn forget_plan(&self, workspace_id: &str) {
        self.cache.lock().expect("plan cache poisoned").remove(workspace_id);
    }

    fn unknown(&self, workspace_id: &str, plan: &str) -> BillingError {
        BillingError::UnknownPlan {
            workspace_id: workspace_id.to_string(),
            plan: plan.to_string(),
            known: self.plans.ids(),
        }
    }

    /// The workspace's plan, read at most every [`PLAN_TTL`]; the last one
    /// read while the database cannot answer.
    pub async fn plan_of(&self, workspace_id: &str) -> Result<Arc<Plan>, BillingError> {
        let last_known = match self.cache.lock().expect("plan cache poisoned").get(workspace_id) {
            Some((plan, read)) if read.elapsed() < PLAN_TTL => return Ok(plan.clone()),
            cached => cached.map(|(plan, _)| plan.clone()),
        };
        let read = match &last_known {
            Some(_) => self.plans_outage.revalidate(self.accounts.plan(workspace_id)).await,
            None => self.plans_outage.ask(self.accounts.plan(workspace_id)).await,
        };
        let id = match read {
            Ok(id) => id,
            Err(error) if outage::unreachable(&error) => {
                self.plans_outage.note(last_known.is_some(), &error);
                return last_known.ok_or(BillingError::Database(error));
            }
            Err(error) => return Err(error.into()),
        };
        let plan = self
            .plans
            .get(&id)
            .cloned()
            .ok_or_else(|| self.unknown(workspace_id, &id))?;
        self.cache
            .lock()
            .expect("plan cache poisoned")
            .insert(workspace_id.to_string(), (plan.clone(), Instant::now()));
        Ok(plan)
    }

    /// Admits one model request of the workspace's key `key_id` under its
    /// plan, counting it when the plan limits requests per month, with the
    /// budgets that apply to it.
    pub async fn admit(&self, workspace_id: &str, key_id: &str) -> Result<Admitted, BillingError> {
        let plan = self.plan_of(workspace_id).await?;
        let budgets = self.budgets.applying(workspace_id, key_id).await?;
        let spend = self.budgets.clone();
        let Some(limit) = plan.monthly_requests else {
            return Ok(Admitted {
                plan,
                counted: None,
                budgets,
                spend,
            });
        };
        let month = quota::period(self.clock.now());
        if !self.quota.take(workspace_id, &month, limit).await? {
            return Err(BillingError::LimitReached {
                plan: plan.id.clone(),
                limit,
                month,
            });
        }
        Ok(Admitted {
            plan,
            counted: Some((self.quota.clone(), workspace_id.to_string(), month)),
            budgets,
            spend,
        })
    }

    /// Hands back slices of the month's requests left unused for
    /// [`quota::IDLE`], checking as often; for the life of the runtime.
    pub fn return_idle_slices(&self) {
        let quota = self.quota.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(quota::IDLE / 4);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                quota.return_slices(Some(quota::IDLE)).await;
            }
        });
    }

    /// Hands back every unused slice (of the month's requests and of
    /// budgets) and records the budgets' settled spend: call it once
    /// requests have drained.
    pub async fn release_slices(&self) {
        self.quota.return_slices(None).await;
        self.budgets.shutdown().await;
    }

    /// Puts the workspace on `plan_id` (which must be defined).
    pub async fn set_plan(&self, workspace_id: &str, plan_id: &str) -> Result<Arc<Plan>, BillingError> {
        let Some(plan) = self.plans.get(plan_id).cloned() else {
            return Err(anyhow::anyhow!("no plan '{plan_id}'; the plans are: {}", self.plans.ids()).into());
        };
        if !self.accounts.set_plan(workspace_id, plan_id).await? {
            return Err(anyhow::anyhow!("no workspace '{workspace_id}'").into());
        }
        self.forget_plan(workspace_id);
        Ok(plan)
    }

    /// This month's requests and spend against the plan.
    pub async fn month_usage(&self, workspace_id: &str) -> Result<MonthUsage, BillingError> {
        let plan = self.plan_of(workspace_id).await?;
        let now = self.clock.now();
        let month = quota::period(now);
        let start = Utc
            .with_ymd_and_hms(now.year(), now.month(), 1, 0, 0, 0)
            .single()
            .expect("the first of a month exists");
        let end = start + chrono::Months::new(1);
        let spend = tollgate_ledger::spend(
            &self.database,
            workspace_id,
            start.timestamp_millis(),
            end.timestamp_millis(),
        )
        .await?;
        let requests = match plan.monthly_requests {
            Some(_) => self.quota.counted(workspace_id, &month).await?,
            None => spend.requests,
        };
        Ok(MonthUsage {
            workspace_id: workspace_id.to_string(),
            plan: plan.id.clone(),
            month,
            requests,
            monthly_requests: plan.monthly_requests,
            remaining: plan.monthly_requests.map(|limit| limit.saturating_sub(requests)),
            spend_usd: spend.cost.usd_string(),
            fee_usd: spend.fee.usd_string(),
        })
    }
}

/// A plan's limit on a count (seats, endpoints) and the operator's own cap,
/// whichever is lower.
pub fn lower_limit(plan: Option<u32>, operator: Option<u32>) -> Option<u32> {
    match (plan, operator) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_plan_once_read_stands_while_the_database_cannot_answer() {
        let dir = tempfile::tempdir().unwrap();
        let url = tollgate_core::db::sqlite_url(&dir.path().join("p.db"));
        let database = Database::open(&url, Default::default()).await.unwrap();
        let keys = tollgate_identity::auth::KeyResolver::new(database.pool.clone());
        let accounts = Accounts::new(database.clone(), keys);
        let created = accounts
            .signup("outage", None, tollgate_core::money::Nanos::ZERO)
            .await
            .unwrap();
        let other = accounts
            .signup("never read", None, tollgate_core::money::Nanos::ZERO)
            .await
            .unwrap();
        let billing = Billing::new(&BillingConfig::default(), accounts, database.clone()).unwrap();
        assert_eq!(billing.plan_of(&created.workspace_id).await.unwrap().id, "free");

        let rename = |from: &str, to: &str| format!("ALTER TABLE {from} RENAME TO {to}");
        sqlx::query(sqlx::AssertSqlSafe(rename("workspaces", "workspaces_away")))
            .execute(&database.pool)
            .await
            .unwrap();
        tokio::time::sleep(PLAN_TTL).await;
        assert_eq!(
            billing.plan_of(&created.workspace_id).await.unwrap().id,
            "free",
            "the plan last read"
        );
        assert!(
            matches!(
                billing.plan_of(&other.workspace_id).await,
                Err(BillingError::Database(_))
            ),
            "a plan never read is not guessed"
        );

        // Back, and changed meanwhile: the new plan is read.
        sqlx::query(sqlx::AssertSqlSafe(rename("workspaces_away", "workspaces")))
            .execute(&database.pool)
            .await
            .unwrap();
        billing.accounts.set_plan(&created.workspace_id, "pro").await.unwrap();
        tokio::time::sleep(outage::RETRY_AFTER).await;
        assert_eq!(billing.plan_of(&created.workspace_id).await.unwrap().id, "pro");
    }
}
