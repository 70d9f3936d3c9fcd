import { isIP } from 'node:net'
import { hostAllowed } from './resolve.js'

/**
 * The hosts a confined command may reach through the sandbox's proxy (the
 * user's `sandbox.network` list, docs/SECURITY.md "The network by host"):
 * `example.org`, `*.example.org` (the names below it, not example.org
 * itself), either with `:port` (`api.example.com:443`) to allow that port
 * only, or `[2001:db8::1]:443` for an IPv6 literal. Names match
 * case-insensitively and a trailing dot is ignored, as webfetch's
 * `allowHosts` do (one matcher: resolve.ts hostAllowed).
 */
export interface HostPattern {
  /** lower-case name, `*.domain`, or IP literal (no brackets) */
  readonly host: string
  /** the one port allowed; absent: any */
  readonly port?: number
}

/** The entry as a pattern, or a sentence saying what is wrong with it. */
export function parseHostPattern(entry: string): HostPattern | string {
  if (entry.includes('://')) return 'is a URL: name the host only (`example.org`, `*.example.org`, `example.org:443`)'
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry)
  const [host, port] = bracketed
    ? [bracketed[1] as string, bracketed[2]]
    : isIP(entry) === 6
      ? [entry, undefined]
      : (() => {
          const at = entry.lastIndexOf(':')
          return at < 0 ? [entry, undefined] : [entry.slice(0, at), entry.slice(at + 1)]
        })()
  if (bracketed && isIP(host) !== 6) return 'has brackets around something that is not an IPv6 address'
  if (port !== undefined && !/^\d{1,5}$/.test(port)) return `has a port that is not a number: ${JSON.stringify(port)}`
  const portNumber = port === undefined ? undefined : Number(port)
  if (portNumber !== undefined && (portNumber < 1 || portNumber > 65535)) return 'has a port outside 1-65535'
  const name = host.toLowerCase().replace(/\.$/, '')
  if (isIP(name) === 0 && !/^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(name))
    return 'is not a host name, `*.domain`, or an IP address (with an optional :port)'
  return portNumber === undefined ? { host: name } : { host: name, port: portNumber }
}

/** `host` (a name or IP literal) on `port` is on the list. */
export function hostListed(host: string, port: number, list: readonly HostPattern[]): boolean {
  return list.some((p) => (p.port === undefined || p.port === port) && hostAllowed(host, [p.host]))
}
