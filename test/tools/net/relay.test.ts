import { createHash, randomBytes } from 'node:crypto'
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { relayTo } from '../../../src/tools/net/relay.js'

/**
 * The bulk direction of a proxy tunnel (src/tools/net/relay.ts): what the
 * upstream socket reads reaches the client whole and in order, through one
 * reused buffer — so a client slower than the upstream must hold the reads
 * back rather than see the buffer overwritten under bytes still waiting to
 * be written. Real sockets on 127.0.0.1, a reader that stalls now and then.
 */

const servers: Server[] = []
afterEach(() => {
  for (const server of servers.splice(0)) server.close()
})

const listen = (server: Server) =>
  new Promise<number>((resolve) => {
    servers.push(server)
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port))
  })

/** An upstream that sends `payload` and ends. */
const origin = (payload: Buffer) => listen(createServer((socket) => socket.end(payload)))

/** A client that reads in bursts, stopping for a few ms every 256 KiB; resolves with what it got. */
function slowClient(): Promise<{ port: number; received: Promise<Buffer> }> {
  let deliver: (b: Buffer) => void = () => undefined
  const received = new Promise<Buffer>((resolve) => {
    deliver = resolve
  })
  const server = createServer((socket) => {
    const chunks: Buffer[] = []
    let since = 0
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      since += chunk.length
      if (since < 256 * 1024) return
      since = 0
      socket.pause()
      setTimeout(() => socket.resume(), 5)
    })
    socket.on('end', () => deliver(Buffer.concat(chunks)))
  })
  return listen(server).then((port) => ({ port, received }))
}

async function relayed(payload: Buffer, mode: 'onread' | 'data', bytes?: number) {
  const originPort = await origin(payload)
  const client = await slowClient()
  const to = connect(client.port, '127.0.0.1')
  await new Promise((resolve) => to.once('connect', resolve))
  const relay = relayTo(to, bytes)
  const upstream: Socket = connect({
    port: originPort,
    host: '127.0.0.1',
    ...(mode === 'onread' && { onread: relay.onread }),
  })
  upstream.once('connect', () => relay.from(upstream))
  const got = await client.received
  return { got, read: upstream.bytesRead }
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')

describe('relayTo', () => {
  it.each(['onread', 'data'] as const)(
    'delivers 16 MiB whole and in order to a reader that keeps stalling (%s)',
    async (mode) => {
      const payload = randomBytes(16 * 1024 * 1024)
      const { got, read } = await relayed(payload, mode)
      expect(got.length).toBe(payload.length)
      expect(sha(got)).toBe(sha(payload))
      expect(read).toBe(payload.length)
    },
  )

  it('with a buffer smaller than what each read could bring, the same', async () => {
    const payload = randomBytes(4 * 1024 * 1024)
    const { got } = await relayed(payload, 'onread', 4096)
    expect(sha(got)).toBe(sha(payload))
  })
})
