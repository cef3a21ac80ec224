// Who is signed in and where: the session, the workspaces the caller may
// see, the selected one, and what the caller's role there allows. The
// server checks every op anyway; this only decides what the page offers.

export const state = {
  session: null,
  workspaces: [],
  workspaceId: null,
  firstKey: null,
  // The signed-in user's member entry (e-mail, name), for the header.
  me: null,
};

export function role() {
  const workspace = state.workspaces.find((w) => w.workspace_id === state.workspaceId);
  return (workspace && workspace.role) || (state.session && state.session.role) || 'viewer';
}

/** Whether the caller's role in the selected workspace has `permission`. */
export function can(permission) {
  if (!state.session) return false;
  const allowed = (state.session.roles && state.session.roles[role()]) || state.session.permissions || [];
  return allowed.includes(permission);
}

/** Params for a workspace-scoped op, in the selected workspace. */
export function scoped(params = {}) {
  return state.workspaceId ? { workspace_id: state.workspaceId, ...params } : params;
}
