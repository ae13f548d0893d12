// The seam between the provider/role routes and the workspace controller. The role and
// provider routes need to ask about and act on the workspaces that use a role; the workspace
// controller (src/workspaces/) implements this and `serve` passes it in ServerDeps.
// Until it is wired, routes treat its absence as "no workspaces exist".

export interface WorkspaceControl {
  /** Workspaces using any of these roles that are not stopped or archived (provisioning, idle, busy, stopping). */
  activeCount(orgId: string, roleIds: readonly string[]): Promise<number>
  /** Issues a stop to every workspace of the role that is not already stopping, stopped or archived; returns how many. */
  stopForRole(orgId: string, roleId: string): Promise<number>
  /** Respawns the role's idle workspaces to pick up a role or pack change (`workspace_restarted` each); returns how many. */
  restartIdleForRole(orgId: string, roleId: string): Promise<number>
}
