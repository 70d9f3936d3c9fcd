import type { OnReadOpts, Socket } from 'node:net'

/**
 * What comes back through the proxy (docs/SECURITY.md "The network by host",
 * the cost): what the upstream socket reads goes to the client straight
 * from one buffer of the connection's own. Piping instead reads 64 KiB at a
 * time into a new buffer each and runs each through the stream machinery —
 * half the throughput or less on a loaded machine. The upstream socket is
 * created with `onread` (connect.ts); a connector that ignores it still
 * works, its 'data' events copied the same way.
 */
export interface Relay {
  /** for the upstream socket's options: its reads land in the relay's buffer and are written on at once */
  readonly onread: OnReadOpts
  /** copies what `source` reads (and its end) to the relay's destination */
  from(source: Socket): void
}

/** big enough for what a loopback or LAN socket has ready at once; a tunnel holds one */
export const RELAY_BUFFER_BYTES = 256 * 1024

export function relayTo(to: Socket, bytes = RELAY_BUFFER_BYTES): Relay {
  let source: Socket | undefined
  const resume = () => source?.resume()
  /** false: `to` holds bytes it could not write yet — they may be the buffer's, so nothing more is read into it */
  const write = (chunk: Uint8Array): boolean => {
    to.write(chunk)
    if (to.writableLength === 0) return true
    to.once('drain', resume)
    return false
  }
  return {
    onread: { buffer: Buffer.allocUnsafe(bytes), callback: (n, buffer) => write(buffer.subarray(0, n)) },
    from(upstream) {
      source = upstream
      upstream.on('data', (chunk: Buffer) => {
        if (!write(chunk)) upstream.pause()
      })
      upstream.once('end', () => to.end())
    },
  }
}
