//! The one role → permission table. Both planes ask it: the data plane before a
//! chat request (`Inference`), the control plane before every operation. The table
//! is documented in docs/control-plane.md; keep the two in step.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Admin,
    Developer,
    Viewer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Call the data plane (`/v1/chat/completions`, `/v1/models`).
    Inference,
    WorkspaceRead,
    WorkspaceRename,
    WorkspaceDelete,
    NamespaceRead,
    NamespaceWrite,
    MemberRead,
    MemberWrite,
    KeyRead,
    KeyWrite,
    BillingRead,
    /// Change the workspace's plan (owners only).
    BillingWrite,
    /// Set and remove spend-control budgets (owners and admins).
    BudgetWrite,
    /// Top up the workspace's wallet through the payment processor (owners
    /// and admins).
    PaymentWrite,
    UsageRead,
    /// List and show the workspace's tool-server and skill installs.
    InstallRead,
    /// Install, upgrade and uninstall tool servers and skills.
    InstallWrite,
    /// List and show actors, deployments and runs; compile actors.
    ActorRead,
    /// Publish actors and create, move and delete deployments.
    ActorWrite,
    /// Read the workspace's audit log (owners and admins).
    AuditRead,
    /// Require sign-in through an identity provider (owners).
    WorkspaceSso,
    /// Connect an identity provider's SCIM provisioning: tokens and how its
    /// groups map to roles (owners).
    ProvisioningWrite,
    /// Set the workspace's package policy, which decides what installs
    /// must be signed (owners and admins).
    PolicyWrite,
}

impl Permission {
    pub const ALL: [Permission; 23] = [
        Permission::Inference,
        Permission::WorkspaceRead,
        Permission::WorkspaceRename,
        Permission::WorkspaceDelete,
        Permission::NamespaceRead,
        Permission::NamespaceWrite,
        Permission::MemberRead,
        Permission::MemberWrite,
        Permission::KeyRead,
        Permission::KeyWrite,
        Permission::BillingRead,
        Permission::BillingWrite,
        Permission::BudgetWrite,
        Permission::PaymentWrite,
        Permission::UsageRead,
        Permission::InstallRead,
        Permission::InstallWrite,
        Permission::ActorRead,
        Permission::ActorWrite,
        Permission::AuditRead,
        Permission::WorkspaceSso,
        Permission::ProvisioningWrite,
        Permission::PolicyWrite,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Inference => "inference",
            Permission::WorkspaceRead => "workspace.read",
            Permission::WorkspaceRename => "workspace.rename",
            Permission::WorkspaceDelete => "workspace.delete",
            Permission::NamespaceRead => "namespace.read",
            Permission::NamespaceWrite => "namespace.write",
            Permission::MemberRead => "member.read",
            Permission::MemberWrite => "member.write",
            Permission::KeyRead => "key.read",
            Permission::KeyWrite => "key.write",
            Permission::BillingRead => "billing.read",
            Permission::BillingWrite => "billing.write",
            Permission::BudgetWrite => "budget.write",
            Permission::PaymentWrite => "payment.write",
            Permission::UsageRead => "usage.read",
            Permission::InstallRead => "install.read",
            Permission::InstallWrite => "install.write",
            Permission::ActorRead => "actor.read",
            Permission::ActorWrite => "actor.write",
            Permission::AuditRead => "audit.read",
            Permission::WorkspaceSso => "workspace.sso",
            Permission::ProvisioningWrite => "provisioning.write",
            Permission::PolicyWrite => "policy.write",
        }
    }
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Admin, Role::Developer, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Developer => "developer",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// The table. Owners may do everything; admins everything but deleting the
    /// workspace and changing its plan; developers use the gateway and manage keys, namespaces and
    /// installs, and publish and deploy actors;
    /// viewers only read.
    pub fn allows(self, permission: Permission) -> bool {
        use Permission::*;
        match self {
            Role::Owner => true,
            Role::Admin => !matches!(
                permission,
                WorkspaceDelete | BillingWrite | WorkspaceSso | ProvisioningWrite
            ),
            Role::Developer => matches!(
                permission,
                Inference
                    | WorkspaceRead
                    | NamespaceRead
                    | NamespaceWrite
                    | MemberRead
                    | KeyRead
                    | KeyWrite
                    | BillingRead
                    | UsageRead
                    | InstallRead
                    | InstallWrite
                    | ActorRead
                    | ActorWrite
            ),
            Role::Viewer => matches!(
                permission,
                WorkspaceRead
                    | NamespaceRead
                    | MemberRead
                    | KeyRead
                    | BillingRead
                    | UsageRead
                    | InstallRead
                    | ActorRead
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_by_what_they_allow() {
        for permission in Permission::ALL {
            let allowed: Vec<bool> = Role::ALL.iter().map(|r| r.allows(permission)).collect();
            // Each role allows a subset of the one above it.
            for pair in allowed.windows(2) {
                assert!(pair[0] || !pair[1], "{permission:?}: {allowed:?}");
            }
        }
        assert!(!Role::Viewer.allows(Permission::Inference));
        assert!(!Role::Admin.allows(Permission::WorkspaceDelete));
        assert!(!Role::Admin.allows(Permission::BillingWrite));
        assert!(Role::Owner.allows(Permission::BillingWrite));
        assert!(Role::Admin.allows(Permission::BudgetWrite));
        assert!(!Role::Developer.allows(Permission::BudgetWrite));
        assert!(Role::Developer.allows(Permission::KeyWrite));
        assert!(!Role::Developer.allows(Permission::MemberWrite));
        assert!(Role::Admin.allows(Permission::PolicyWrite));
        assert!(!Role::Developer.allows(Permission::PolicyWrite));
    }
}
