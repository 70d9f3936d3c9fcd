import { type AddressInfo, connect, createServer, type Server } from 'node:net'
import { describe, expect, it } from 'vitest'
import { openCallProxy, type ProxyPolicy } from '../../../src/tools/net/call-proxy.js'

/**
 * The call proxy takes the listener the launcher made inside the sandbox
 * (src/tools/net/call-proxy.ts `adopt`, proxy-launcher.ts): it accepts on
 * that one, and closes any other it is handed — a second, one that came
 * after the call ended, one not on 127.0.0.1. Real listeners on this
 * machine stand in for the sandbox's.
 */

const refuseAll: ProxyPolicy = { hosts: [], unlisted: 'refuse', net: { allowHosts: [] } }
const nobody = { ask: async () => Promise.reject(new Error('not asked')) }

const listening = (host: string) =>
  new Promise<Server>((resolve) => {
    const server = createServer()
    server.listen(0, host, () => resolve(server))
  })

const closed = (server: Server) =>
  new Promise<void>((resolve) => (server.listening ? server.once('close', resolve) : resolve()))

/** One CONNECT through the proxy's port; resolves with the answer's status line. */
const connectThrough = (port: number, authority: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`),
    )
    let answer = ''
    socket.on('data', (d: Buffer) => {
      answer += d
      if (answer.includes('\r\n')) {
        resolve(answer.split('\r\n')[0] as string)
        socket.destroy()
      }
    })
    socket.on('error', reject)
  })

describe("the call proxy and the launcher's listener", () => {
  it('accepts on the listener it adopts, and decides there: an unlisted host is refused and on the record', async () => {
    const proxy = openCallProxy(refuseAll, nobody)
    const listener = await listening('127.0.0.1')
    const { port } = listener.address() as AddressInfo
    proxy.adopt(listener)
    expect(await connectThrough(port, 'elsewhere.test:443')).toBe('HTTP/1.1 403 Forbidden')
    expect(await proxy.close()).toEqual([
      {
        host: 'elsewhere.test',
        port: 443,
        allowed: false,
        connections: 1,
        bytesIn: 0,
        bytesOut: 0,
        reason: 'HOST_NOT_LISTED',
      },
    ])
  })

  it('takes one listener: a second, one after the call ended and one not on 127.0.0.1 are closed', async () => {
    const proxy = openCallProxy(refuseAll, nobody)
    const [first, second, elsewhere] = await Promise.all([
      listening('127.0.0.1'),
      listening('127.0.0.1'),
      listening('::1').catch(() => listening('0.0.0.0')),
    ])
    proxy.adopt(elsewhere)
    await closed(elsewhere)
    proxy.adopt(first)
    proxy.adopt(second)
    await closed(second)
    // anything but a listener is ignored
    proxy.adopt(undefined)
    proxy.adopt({ address: () => ({ address: '127.0.0.1' }) })
    const { port } = first.address() as AddressInfo
    expect(await connectThrough(port, 'elsewhere.test:443')).toBe('HTTP/1.1 403 Forbidden')
    await proxy.close()
    // the adopted listener closed with the proxy
    await expect(connectThrough(port, 'elsewhere.test:443')).rejects.toThrow(/ECONNREFUSED/)
    const late = await listening('127.0.0.1')
    proxy.adopt(late)
    await closed(late)
    expect([second, elsewhere, late].map((s) => s.listening)).toEqual([false, false, false])
  })
})
