// Test policies name loopback upstreams that listen on ports chosen at start. A domain pattern
// without a port matches only 443/80 and the proxy refuses loopback unless a rule names the range,
// so `"127.0.0.1"` and `"localhost"` in a `domains` list become those names on each given port,
// and the rule gets `allow_private: ["127.0.0.0/8", "::1"]` (docs/policy.md "Destinations").
export function onLoopback(caps: string, ...ports: number[]): string {
  return caps.replace(/^([ \t]*(?:- )?)domains:[ \t]*\[(.*)\][ \t]*$/gm, (line, lead: string, list: string) => {
    if (!/"?(127\.0\.0\.1|localhost)"?/.test(list)) return line
    const names = list.replace(/"?\b(127\.0\.0\.1|localhost)\b"?/g, (_m, n: string) => ports.map((p) => `"${n}:${p}"`).join(', '))
    return `${lead}domains: [${names}]\n${' '.repeat(lead.length)}allow_private: ["127.0.0.0/8", "::1"]`
  })
}

/** The port of an `https://127.0.0.1:PORT` base URL. */
export function portOf(url: string): number {
  return Number(new URL(url).port)
}
