import { type IncomingMessage, request } from 'node:http'
import type { Readable } from 'node:stream'
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib'
import { type Connector, connectPinned } from '../net/connect.js'
import { NetRefusal } from '../net/refusal.js'
import { type NetPolicy, type PinnedTarget, pinTarget } from '../net/resolve.js'
import { parseTarget, type WebTarget } from '../net/target.js'
import { type ContentType, isTextType, looksBinary, parseContentType } from './content-type.js'
import { FetchError } from './fetch-error.js'

/**
 * One page fetched by the server (docs/TOOLS.md "webfetch", docs/SECURITY.md
 * "Server-side request forgery"). Each hop — the first URL and every
 * redirect — is parsed, resolved once, checked and pinned (src/tools/net/)
 * before anything is sent; redirects are followed here, never by a client
 * library, up to a limit. The body is decompressed and capped by the bytes
 * it decodes to, so neither a large page nor a compression bomb fills memory;
 * the timeout covers every hop from lookup to the last byte.
 */

export interface FetchOptions {
  readonly policy: NetPolicy
  readonly connector?: Connector
  /** the body is cut at this many bytes (after decompression) */
  readonly maxBytes: number
  readonly maxRedirects: number
  /** for all hops together, not counting `beforeHop` */
  readonly timeoutMs: number
  /** cancellation of the call: aborts with its reason (rethrown as is) */
  readonly signal: AbortSignal
  readonly accept: string
  /**
   * headers for the configured service's own origin (websearch's key): sent
   * on hops to that origin only, never after a redirect elsewhere
   */
  readonly credentials?: { readonly origin: string; readonly headers: Readonly<Record<string, string>> }
  /** runs once each hop is resolved and checked, before it connects (the permission ask); outside the timeout */
  readonly beforeHop?: (target: PinnedTarget, hop: number) => Promise<void>
}

export interface Hop {
  readonly url: string
  /** the address the connection went to */
  readonly address: string
  readonly status: number
}

export interface FetchedPage {
  readonly url: string
  readonly status: number
  readonly contentType: ContentType
  readonly body: Buffer
  /** the body went past maxBytes and was cut there */
  readonly truncated: boolean
  readonly hops: readonly Hop[]
}

const REDIRECTS = new Set([301, 302, 303, 307, 308])
const USER_AGENT = 'Chronicle-webfetch/1'

export async function fetchPage(raw: string, opts: FetchOptions): Promise<FetchedPage> {
  let target = parseTarget(raw)
  const clock = new Clock(opts.timeoutMs, opts.signal)
  const hops: Hop[] = []
  for (let hop = 0; ; hop++) {
    const pinned = await clock.run(target, (signal) => untilAborted(pinTarget(target, opts.policy), signal))
    await opts.beforeHop?.(pinned, hop)
    const next = await clock.run(target, async (signal): Promise<FetchedPage | WebTarget> => {
      const res = await exchange(pinned, opts, signal)
      const status = res.statusCode ?? 0
      hops.push({ url: target.url.href, address: pinned.address, status })
      const location = res.headers.location
      if (REDIRECTS.has(status) && location) {
        res.destroy()
        if (hops.length > opts.maxRedirects)
          throw new FetchError('TOO_MANY_REDIRECTS', `more than ${opts.maxRedirects} redirects, from ${raw}`)
        return parseTarget(location, target.url)
      }
      if (status < 200 || status > 299) {
        res.destroy()
        throw new FetchError('HTTP_STATUS', `${target.url.href} answered ${status} ${res.statusMessage ?? ''}`.trim())
      }
      const contentType = parseContentType(res.headers['content-type'])
      if (contentType.mime && !isTextType(contentType.mime)) {
        res.destroy()
        throw new FetchError(
          'CONTENT_TYPE_REFUSED',
          `${target.url.href} is ${contentType.mime}, not text: webfetch reads text, HTML, JSON and XML only`,
        )
      }
      const { body, truncated } = await readBody(res, opts.maxBytes, signal)
      if (!contentType.mime && looksBinary(body))
        throw new FetchError('CONTENT_TYPE_REFUSED', `${target.url.href} has no content type and its bytes are binary`)
      return { url: target.url.href, status, contentType, body, truncated, hops }
    })
    if ('hops' in next) return next
    target = next
  }
}

/**
 * The call's timeout, spent only while the network is used: each phase gets what is left, and a
 * phase cut off by it is TIMEOUT; a cancel of the call rethrows its reason; any other failure of
 * the connection is FETCH_FAILED.
 */
class Clock {
  private remaining: number
  constructor(
    private readonly total: number,
    private readonly cancel: AbortSignal,
  ) {
    this.remaining = total
  }

  async run<T>(target: WebTarget, phase: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const started = Date.now()
    const timer = AbortSignal.timeout(Math.max(1, this.remaining))
    try {
      return await phase(AbortSignal.any([this.cancel, timer]))
    } catch (err) {
      if (this.cancel.aborted) throw this.cancel.reason
      if (timer.aborted)
        throw new FetchError('TIMEOUT', `${target.url.href} did not arrive within ${seconds(this.total)}`)
      if (err instanceof NetRefusal || err instanceof FetchError) throw err
      const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message
      throw new FetchError('FETCH_FAILED', `${target.url.href}: ${reason}`)
    } finally {
      this.remaining -= Date.now() - started
    }
  }
}

/** Sends the GET over a connection to the pinned address; resolves with the response head. */
function exchange(target: PinnedTarget, opts: FetchOptions, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({
      method: 'GET',
      host: target.hostname,
      port: target.port,
      path: `${target.url.pathname}${target.url.search}`,
      headers: {
        ...(opts.credentials && target.url.origin === opts.credentials.origin && opts.credentials.headers),
        host: target.url.host,
        accept: opts.accept,
        'accept-encoding': 'gzip, deflate, br',
        'user-agent': USER_AGENT,
      },
      // no agent: one connection per hop, to the address just checked
      createConnection: () => connectPinned(target, opts.connector),
      signal,
    })
    req.once('response', resolve)
    req.once('error', reject)
    req.end()
  })
}

/** The decoded body, up to maxBytes; past it the rest is not read (the connection is closed). */
async function readBody(
  res: IncomingMessage,
  maxBytes: number,
  signal: AbortSignal,
): Promise<{ body: Buffer; truncated: boolean }> {
  const stream = decoded(res)
  const stop = () => {
    res.destroy(signal.reason)
    stream.destroy(signal.reason)
  }
  signal.addEventListener('abort', stop, { once: true })
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (size + chunk.length > maxBytes) {
        chunks.push(chunk.subarray(0, maxBytes - size))
        return { body: Buffer.concat(chunks), truncated: true }
      }
      chunks.push(chunk)
      size += chunk.length
    }
    return { body: Buffer.concat(chunks), truncated: false }
  } finally {
    signal.removeEventListener('abort', stop)
    res.destroy()
    stream.destroy()
  }
}

function decoded(res: IncomingMessage): Readable {
  const encoding = String(res.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase()
  const decoder =
    encoding === 'gzip' || encoding === 'x-gzip'
      ? createGunzip()
      : encoding === 'deflate'
        ? createInflate()
        : encoding === 'br'
          ? createBrotliDecompress()
          : undefined
  if (!decoder) {
    if (encoding === 'identity' || encoding === '') return res
    res.destroy()
    throw new FetchError('ENCODING_REFUSED', `the body is ${encoding}-encoded, which webfetch does not decode`)
  }
  res.on('error', (err) => decoder.destroy(err))
  return res.pipe(decoder)
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort)
        resolve(v)
      },
      (e) => {
        signal.removeEventListener('abort', onAbort)
        reject(e)
      },
    )
  })
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`
}
