import { describe, expect, it } from 'vitest'
import { addressRefusal } from '../../../src/tools/net/address-policy.js'
import { hostAllowed } from '../../../src/tools/net/resolve.js'
import { parseTarget } from '../../../src/tools/net/target.js'

/**
 * The address rule webfetch (and later a sandbox proxy) connects by: only
 * global unicast addresses, every special range refused with its name
 * (docs/SECURITY.md "Server-side request forgery").
 */
describe('addressRefusal', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.1.2.3', 'private (RFC 1918)'],
    ['172.16.0.1', 'private (RFC 1918)'],
    ['172.31.255.255', 'private (RFC 1918)'],
    ['192.168.0.1', 'private (RFC 1918)'],
    ['100.64.0.1', 'carrier-grade NAT (100.64.0.0/10)'],
    ['100.100.100.200', 'carrier-grade NAT (100.64.0.0/10)'],
    ['169.254.169.254', 'the cloud metadata address'],
    ['169.254.1.1', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'link-local'],
    ['fc00::1', 'unique local (fc00::/7)'],
    ['fd12:3456::1', 'unique local (fc00::/7)'],
    ['fd00:ec2::254', 'the cloud metadata address'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'an IPv6 form of 127.0.0.1 (loopback), which is not connected to as such'],
    ['::ffff:7f00:1', 'an IPv6 form of 127.0.0.1 (loopback), which is not connected to as such'],
    [
      '::ffff:169.254.169.254',
      'an IPv6 form of 169.254.169.254 (the cloud metadata address), which is not connected to as such',
    ],
    ['::ffff:10.0.0.1', 'an IPv6 form of 10.0.0.1 (private (RFC 1918)), which is not connected to as such'],
    ['::127.0.0.1', 'an IPv6 form of 127.0.0.1 (loopback), which is not connected to as such'],
    ['::ffff:0:127.0.0.1', 'an IPv6 form of 127.0.0.1 (loopback), which is not connected to as such'],
    // even a public IPv4 address is connected to in its own form only
    ['::ffff:8.8.8.8', 'an IPv6 form of 8.8.8.8, which is not connected to as such'],
    ['64:ff9b::7f00:1', 'a special-purpose range (rfc6052)'],
    ['2002:7f00:1::', 'a special-purpose range (6to4)'],
    ['2001:db8::1', 'reserved'],
    ['not-an-ip', 'not an IP address'],
  ])('%s is refused: %s', (address, why) => {
    expect(addressRefusal(address)).toBe(why)
  })

  it.each(['8.8.8.8', '93.184.215.14', '1.1.1.1', '2606:4700:4700::1111', '2a00:1450:4001:80b::200e'])(
    '%s, a public unicast address, is allowed',
    (address) => {
      expect(addressRefusal(address)).toBeUndefined()
    },
  )
})

describe('parseTarget: what the WHATWG parser makes of address tricks', () => {
  it.each([
    ['http://2130706433/', '127.0.0.1'],
    ['http://0x7f.1/', '127.0.0.1'],
    ['http://127.1/', '127.0.0.1'],
    ['http://0177.0.0.1/', '127.0.0.1'],
    ['http://[::ffff:127.0.0.1]/', '::ffff:7f00:1'],
    ['HTTP://LOCALHOST./', 'localhost.'],
  ])('%s names %s', (url, hostname) => {
    expect(parseTarget(url).hostname).toBe(hostname)
  })

  it.each([
    ['file:///etc/passwd', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not file:'],
    ['ftp://example.com/x', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not ftp:'],
    ['data:text/plain,hello', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not data:'],
    ['gopher://example.com/', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not gopher:'],
    ['javascript:alert(1)', 'SCHEME_REFUSED: only http: and https: URLs can be fetched, not javascript:'],
    [
      'http://example.com@127.0.0.1/',
      'URL_CREDENTIALS: a URL with user-info (user:password@ before the host) is refused: it names 127.0.0.1, whatever comes before the @',
    ],
    ['not a url', 'URL_INVALID: not a valid URL: "not a url"'],
  ])('%s is refused', (url, message) => {
    expect(() => parseTarget(url)).toThrow(message)
  })
})

describe('hostAllowed', () => {
  it('matches a name exactly or below a *. entry, never the apex by the wildcard or a lookalike', () => {
    const allow = ['intranet.corp', '*.internal.example']
    expect(hostAllowed('intranet.corp', allow)).toBe(true)
    expect(hostAllowed('INTRANET.corp.', allow)).toBe(true)
    expect(hostAllowed('a.internal.example', allow)).toBe(true)
    expect(hostAllowed('internal.example', allow)).toBe(false)
    expect(hostAllowed('evilinternal.example', allow)).toBe(false)
    expect(hostAllowed('intranet.corp.evil.com', allow)).toBe(false)
  })
})
