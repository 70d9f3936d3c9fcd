import { lookup } from 'node:dns/promises'
import { networkInterfaces } from 'node:os'
import { addressRefusal, isSelfAddress } from './address-policy.js'
import { NetRefusal } from './refusal.js'
import type { WebTarget } from './target.js'

/**
 * Where a connection may go (docs/SECURITY.md "Server-side request
 * forgery"): the name is resolved once, every address it resolves to is
 * checked, and the caller connects to exactly the address returned here
 * (src/tools/net/connect.ts) — never resolving again, so a name that answers
 * a public address to the check and a private one to the connection
 * (DNS rebinding) gets nowhere.
 */

export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

/** Name → addresses. The default asks the system (dns.lookup, as a connection would); tests map their own names. */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>

export interface NetPolicy {
  /**
   * Host names (the user's config: `webfetch.allowHosts`) whose addresses are not checked: an
   * intranet name, or a test's own server. `*.example.com` matches the names below example.com.
   */
  readonly allowHosts: readonly string[]
  readonly resolve?: Resolver
  /** the ports this server listens on: refused on this machine's addresses even for an allowed host */
  readonly ownPorts?: () => readonly number[]
}

export interface PinnedTarget extends WebTarget {
  /** the checked address the connection must go to */
  readonly address: string
  readonly family: 4 | 6
  /** the host was allowed by name, so its address was not checked */
  readonly allowedByName: boolean
}

export const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }))

export async function pinTarget(target: WebTarget, policy: NetPolicy): Promise<PinnedTarget> {
  const allowedByName = hostAllowed(target.hostname, policy.allowHosts)
  const answers = target.literal
    ? [{ address: target.hostname, family: target.hostname.includes(':') ? 6 : 4 } as const]
    : await resolveName(target.hostname, policy.resolve ?? systemResolver)
  if (!allowedByName) {
    for (const { address } of answers) {
      const why = addressRefusal(address)
      if (why === undefined) continue
      const via = target.literal ? '' : `${target.hostname} resolves to ${address}, `
      throw new NetRefusal(
        'ADDRESS_REFUSED',
        `${target.url.href}: ${via}${target.literal ? `${address} is ` : 'which is '}${why}. Only public addresses can be fetched (a host on the user's network must be allowed by name in the server's config: webfetch.allowHosts).`,
      )
    }
  }
  const pinned = answers[0] as ResolvedAddress
  if (policy.ownPorts?.().includes(target.port) && isThisMachine(pinned.address))
    throw new NetRefusal('OWN_SERVER', `${target.url.href} is this Chronicle server itself (port ${target.port})`)
  return { ...target, address: pinned.address, family: pinned.family, allowedByName }
}

async function resolveName(hostname: string, resolve: Resolver): Promise<readonly ResolvedAddress[]> {
  let answers: readonly ResolvedAddress[]
  try {
    answers = await resolve(hostname)
  } catch (err) {
    throw new NetRefusal('DNS_FAILED', `cannot resolve ${hostname}: ${(err as NodeJS.ErrnoException).code ?? err}`)
  }
  if (answers.length === 0) throw new NetRefusal('DNS_FAILED', `${hostname} has no address`)
  return answers
}

/** `name` equals an entry, or lies below a `*.domain` entry; case-insensitive. */
export function hostAllowed(hostname: string, allowHosts: readonly string[]): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, '')
  return allowHosts.some((entry) => {
    const e = entry.toLowerCase().replace(/\.$/, '')
    return e.startsWith('*.') ? name.endsWith(e.slice(1)) && name.length > e.length - 1 : name === e
  })
}

/** Loopback, unspecified, or an address of one of this machine's interfaces. */
function isThisMachine(address: string): boolean {
  if (isSelfAddress(address)) return true
  const bare = address.toLowerCase()
  return Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address.toLowerCase() === bare))
}
