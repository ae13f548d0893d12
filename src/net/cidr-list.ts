// An operator's list of address ranges from an environment variable (`10.0.0.0/8,::1`): each a
// CIDR or a single address (/32 or /128). A bad entry refuses the start, naming the variable.
import { isIP } from 'node:net'

export function cidrList(raw: string | undefined, name: string): string[] {
  const out: string[] = []
  for (const entry of (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    const slash = entry.indexOf('/')
    const address = (slash < 0 ? entry : entry.slice(0, slash)).toLowerCase()
    const family = isIP(address)
    const max = family === 6 ? 128 : 32
    const prefix = slash < 0 ? String(max) : entry.slice(slash + 1)
    if (family === 0 || !/^\d{1,3}$/.test(prefix) || Number(prefix) > max) {
      throw new Error(`${name} must list IP addresses or CIDR ranges separated by commas (e.g. 10.0.0.0/8,::1), got ${JSON.stringify(entry)}`)
    }
    out.push(`${address}/${Number(prefix)}`)
  }
  return out
}
