import { isIP } from 'node:net'
import { NetRefusal } from './refusal.js'

/**
 * A URL the server may be asked to open: http: or https: only, no user-info.
 * The WHATWG parser already turns the numeric spellings of an IPv4 address
 * (`2130706433`, `0x7f.1`, `127.1`, `0177.0.0.1`) into the dotted form, so
 * the address checks see the address the connection would use.
 */
export interface WebTarget {
  readonly url: URL
  /** lower-case name or IP literal, without IPv6 brackets */
  readonly hostname: string
  readonly port: number
  readonly tls: boolean
  /** the hostname is an IP literal (no DNS) */
  readonly literal: boolean
}

export function parseTarget(raw: string, base?: URL): WebTarget {
  let url: URL
  try {
    url = new URL(raw, base)
  } catch {
    throw new NetRefusal('URL_INVALID', `not a valid URL: ${JSON.stringify(raw.slice(0, 200))}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new NetRefusal('SCHEME_REFUSED', `only http: and https: URLs can be fetched, not ${url.protocol}`)
  if (url.username || url.password)
    throw new NetRefusal(
      'URL_CREDENTIALS',
      `a URL with user-info (user:password@ before the host) is refused: it names ${url.hostname}, whatever comes before the @`,
    )
  const hostname = url.hostname.replace(/^\[|\]$/g, '').toLowerCase()
  if (!hostname) throw new NetRefusal('URL_INVALID', `the URL has no host: ${url.href}`)
  const tls = url.protocol === 'https:'
  return {
    url,
    hostname,
    port: url.port ? Number(url.port) : tls ? 443 : 80,
    tls,
    literal: isIP(hostname) !== 0,
  }
}
