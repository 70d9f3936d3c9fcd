import { connect as netConnect, type OnReadOpts, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import type { PinnedTarget } from './resolve.js'

/**
 * The connection to a pinned target: TCP to the checked address itself (no
 * second lookup anywhere), then TLS with the name as SNI and as the name
 * the certificate must carry (docs/SECURITY.md "Server-side request forgery").
 */

/**
 * Opens the TCP connection to an address; the default is net.connect. `onread` (a tunnel's relay, relay.ts) is
 * where its reads should go; a connector may ignore it.
 */
export type Connector = (to: {
  readonly address: string
  readonly family: 4 | 6
  readonly port: number
  readonly onread?: OnReadOpts
}) => Socket

export const directConnector: Connector = ({ address, family, port, onread }) =>
  netConnect({ host: address, family, port, noDelay: true, ...(onread && { onread }) })

export function connectPinned(
  target: PinnedTarget,
  connector: Connector = directConnector,
  onread?: OnReadOpts,
): Socket {
  const raw = connector({
    address: target.address,
    family: target.family,
    port: target.port,
    ...(onread && { onread }),
  })
  if (!target.tls) return raw
  return tlsConnect({
    socket: raw,
    host: target.hostname,
    // SNI carries names only; for an IP literal the certificate is checked against the IP
    ...(!target.literal && { servername: target.hostname }),
    ALPNProtocols: ['http/1.1'],
  })
}
