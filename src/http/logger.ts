import { isatty } from 'node:tty'
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify'
import pino, { type DestinationStream, type Logger } from 'pino'
import { prettyFactory } from 'pino-pretty'
import type { TraceFields } from '../observability/inbound.js'
import { redactUrl } from './security.js'

/**
 * The server's pino logger. Two layers keep secrets out of logs: redaction
 * of the places they travel (auth headers, subprotocols, `?token=`, config
 * keys), and a last pass over every written line that replaces the known
 * secret values (the token, provider API keys) wherever they appear.
 *
 * Format: JSON lines, except on a terminal (or with `format: 'pretty'`,
 * `CHRONICLE_LOG_FORMAT=pretty`), where each line is formatted by pino-pretty
 * in-process, after the secret pass and in the same write — no worker thread,
 * so nothing is lost on exit and the scrub holds for pretty lines too.
 */

export interface LoggerOptions {
  readonly level: string
  /** values that must never be written (empty strings are ignored) */
  readonly secrets: readonly (string | undefined)[]
  /** where lines go; default stdout */
  readonly destination?: DestinationStream
  /** `json` or `pretty`; unset: pretty when the destination is a terminal */
  readonly format?: 'json' | 'pretty' | undefined
  /** with traces on: the trace and span of a session's open run, added to a line that names the session (`sessionId`) */
  readonly traceFieldsOf?: (sessionId: string) => TraceFields | undefined
}

const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["sec-websocket-protocol"]',
  'headers.authorization',
  'headers["sec-websocket-protocol"]',
  'token',
  '*.token',
  'apiKey',
  '*.apiKey',
  '*.*.apiKey',
  'openaiApiKey',
  '*.openaiApiKey',
]

export function createLogger(options: LoggerOptions): Logger {
  const secrets = options.secrets.filter((s): s is string => typeof s === 'string' && s.length >= 8)
  const escaped = secrets.map((s) => JSON.stringify(s).slice(1, -1))
  const destination = options.destination ?? pino.destination({ dest: 1, sync: false })
  const terminal = terminalOf(destination)
  const pretty = options.format === 'pretty' || (options.format === undefined && terminal.tty)
  const { traceFieldsOf } = options
  return pino(
    {
      level: options.level,
      ...(traceFieldsOf && {
        mixin: (merge: object) => {
          const { sessionId, trace_id } = merge as { sessionId?: unknown; trace_id?: unknown }
          return (typeof sessionId === 'string' && trace_id === undefined && traceFieldsOf(sessionId)) || {}
        },
      }),
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      serializers: {
        req: (req: { method?: string; url?: string; hostname?: string; ip?: string }) => ({
          method: req.method,
          url: req.url && redactUrl(req.url),
          host: req.hostname,
          remoteAddress: req.ip,
        }),
        err: pino.stdSerializers.err,
      },
      hooks: {
        streamWrite: (line) => {
          let out = line
          for (const s of [...secrets, ...escaped]) if (out.includes(s)) out = out.split(s).join('[REDACTED]')
          return out
        },
      },
    },
    pretty ? prettyDestination(destination, terminal.colors) : destination,
  )
}

/**
 * pino-pretty as a destination: each (already scrubbed) JSON line is formatted and written
 * to `destination` in the same call; flushing flushes the destination.
 */
type Flushable = DestinationStream & { flush?: (cb?: (err?: Error) => void) => void }

function prettyDestination(destination: DestinationStream, colorize: boolean): Flushable {
  const format = prettyFactory({ colorize, translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname' })
  const flushable: Flushable = destination
  const write = (line: string) => destination.write(format(line))
  if (typeof flushable.flush !== 'function') return { write }
  return { write, flush: (cb?: (err?: Error) => void) => flushable.flush?.(cb) }
}

/** Whether a destination is a terminal, and one that shows colours: a TTY stream answers itself; else its descriptor. */
function terminalOf(destination: DestinationStream): { tty: boolean; colors: boolean } {
  const d = destination as { isTTY?: unknown; hasColors?: unknown; fd?: unknown }
  const colorsOf = (s: { hasColors?: unknown }) => typeof s.hasColors === 'function' && s.hasColors() === true
  if (typeof d.isTTY === 'boolean') return { tty: d.isTTY, colors: d.isTTY && colorsOf(d) }
  if (typeof d.fd !== 'number' || !isatty(d.fd)) return { tty: false, colors: false }
  const std = d.fd === 1 ? process.stdout : d.fd === 2 ? process.stderr : undefined
  return { tty: true, colors: std !== undefined && colorsOf(std) }
}

const isHealthProbe = (request: FastifyRequest) => request.url === '/health' || request.url.startsWith('/health?')

/**
 * Request logging (fastify's `logController`): every request at info, as fastify does, except the
 * supervisors' `/health` probes, which come every few seconds: those at debug.
 */
export class RequestLogController extends LogController {
  override incomingRequest(request: FastifyRequest, reply: FastifyReply, metadata?: Record<string, unknown>): void {
    if (isHealthProbe(request)) request.log.debug({ req: request }, 'incoming request')
    else super.incomingRequest(request, reply, metadata)
  }

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
    metadata?: Record<string, unknown>,
  ): void {
    if (isHealthProbe(request) && !error)
      reply.log.debug({ res: reply, responseTime: reply.elapsedTime }, 'request completed')
    else super.requestCompleted(error, request, reply, metadata)
  }
}
