// `allow_private` entries: an address range written as CIDR (`10.0.0.0/8`, `fd00::/8`) or a
// single address (`127.0.0.1`, taken as /32 or /128). Normalized to `address/prefix` with the
// address as Node prints it; the proxy turns the list into a net.BlockList.
import { isIP } from 'node:net'

export type CidrResult = { ok: true; cidr: string; family: 4 | 6; prefix: number } | { ok: false; message: string }

export function parseCidr(text: string): CidrResult {
  const s = text.trim()
  const slash = s.indexOf('/')
  const addr = (slash < 0 ? s : s.slice(0, slash)).toLowerCase()
  const family = isIP(addr)
  if (family === 0) return { ok: false, message: `"${text}" is not an IP address or CIDR range (names are not allowed: allow_private names addresses)` }
  const max = family === 4 ? 32 : 128
  const p = slash < 0 ? String(max) : s.slice(slash + 1)
  if (!/^\d{1,3}$/.test(p) || Number(p) > max) return { ok: false, message: `"${text}" has an invalid prefix length (0–${max})` }
  return { ok: true, cidr: `${addr}/${Number(p)}`, family: family === 4 ? 4 : 6, prefix: Number(p) }
}
