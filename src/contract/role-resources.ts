// A role's `resources` (a documented addition to the spec's Agent role, docs/roles.md "Resources"):
// Kubernetes requests and limits of the workspace's agent container — cpu, memory,
// ephemeral-storage as Kubernetes quantities. The API validates them here; the Kubernetes driver
// merges them over the server's defaults (docs/kubernetes.md "Runtime: workspaces as pods").

export const RESOURCE_NAMES = ['cpu', 'memory', 'ephemeral-storage'] as const
export type ResourceName = (typeof RESOURCE_NAMES)[number]
export type ResourceList = Partial<Record<ResourceName, string>>

export interface RoleResources {
  requests?: ResourceList
  limits?: ResourceList
}

/** A Kubernetes quantity as corral accepts it: a decimal number with an optional suffix (`500m`, `2Gi`, `1.5`). */
export const QUANTITY_PATTERN = '^[0-9]+(\\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$'
const QUANTITY = new RegExp(QUANTITY_PATTERN)
const FACTOR: Record<string, number> = { '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 }

/** A quantity's value (cores, bytes), or undefined when it is not one. */
export function quantityValue(q: string): number | undefined {
  if (!QUANTITY.test(q)) return undefined
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(q)!
  return Number(m[1]) * FACTOR[m[2]!]!
}

/** The first request above its limit in the same resources, as a field path and message; undefined when none. */
export function requestOverLimit(r: RoleResources): { field: string; message: string } | undefined {
  for (const name of RESOURCE_NAMES) {
    const request = r.requests?.[name]
    const limit = r.limits?.[name]
    if (request === undefined || limit === undefined) continue
    if ((quantityValue(request) ?? 0) > (quantityValue(limit) ?? Infinity)) return { field: `resources.requests.${name}`, message: `must not exceed resources.limits.${name} (${limit})` }
  }
  return undefined
}
