import ipaddr from 'ipaddr.js'

/**
 * Which addresses the server may connect to on a model's behalf
 * (docs/SECURITY.md "Server-side request forgery"). Only global unicast:
 * everything ipaddr.js names a special range — loopback, RFC 1918 private,
 * CGNAT 100.64/10, link-local (169.254/16 with the cloud metadata address,
 * fe80::/10), unique-local fc00::/7, multicast, unspecified, broadcast,
 * reserved and documentation ranges, and IPv6 forms that carry an IPv4
 * address (mapped ::ffff:0:0/96, NAT64, 6to4, Teredo) — is refused. An
 * IPv4-compatible form (::a.b.c.d, deprecated, not a range of its own) is
 * refused too. Kept apart from any tool so a network proxy for the sandbox
 * can apply the same rule.
 */

/** The address cloud providers answer instance credentials on (AWS, GCP, Azure, …); IPv6: AWS's. */
const METADATA = new Set(['169.254.169.254', 'fd00:ec2::254'])

const RANGE_NAMES: Record<string, string> = {
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT (100.64.0.0/10)',
  private: 'private (RFC 1918)',
  uniqueLocal: 'unique local (fc00::/7)',
  reserved: 'reserved',
}

/** Why `address` (an IP literal) is refused, or undefined when it is a public unicast address. */
export function addressRefusal(address: string): string | undefined {
  let ip: ipaddr.IPv4 | ipaddr.IPv6
  try {
    ip = ipaddr.parse(address.replace(/^\[|\]$/g, ''))
  } catch {
    return 'not an IP address'
  }
  if (ip.kind() === 'ipv6') {
    const v6 = ip as ipaddr.IPv6
    const embedded = embeddedIPv4(v6)
    if (embedded) {
      const inner = addressRefusal(embedded)
      return `an IPv6 form of ${embedded}${inner ? ` (${inner})` : ''}, which is not connected to as such`
    }
  }
  const normal = ip.toNormalizedString()
  if (METADATA.has(normal) || METADATA.has(ip.toString())) return 'the cloud metadata address'
  const range = ip.range()
  if (range === 'unicast') return undefined
  return RANGE_NAMES[range] ?? `a special-purpose range (${range})`
}

/** Whether `address` is one that reaches this machine itself (loopback or unspecified, in any form). */
export function isSelfAddress(address: string): boolean {
  try {
    const ip = ipaddr.process(address.replace(/^\[|\]$/g, ''))
    const range = ip.range()
    return range === 'loopback' || range === 'unspecified'
  } catch {
    return false
  }
}

/** The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d), -translated or -compatible (::a.b.c.d) IPv6 address. */
function embeddedIPv4(ip: ipaddr.IPv6): string | undefined {
  const parts = ip.parts
  const zerosBefore = (n: number) => parts.slice(0, n).every((p) => p === 0)
  const tail = () => `${parts[6]! >> 8}.${parts[6]! & 0xff}.${parts[7]! >> 8}.${parts[7]! & 0xff}`
  if (zerosBefore(5) && parts[5] === 0xffff) return tail() // ::ffff:0:0/96, mapped
  if (zerosBefore(4) && parts[4] === 0xffff && parts[5] === 0) return tail() // ::ffff:0:0:0/96, translated
  // ::/96, compatible — but not :: and ::1, which are ranges of their own
  if (zerosBefore(6) && (parts[6] !== 0 || (parts[7] ?? 0) > 1)) return tail()
  return undefined
}
