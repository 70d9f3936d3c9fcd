import pino, { type DestinationStream, type Logger } from 'pino'
import { redactUrl } from './security.js'

/**
 * The server's pino logger. Two layers keep secrets out of logs: redaction
 * of the places they travel (auth headers, subprotocols, `?token=`, config
 * keys), and a last pass over every written line that replaces the known
 * secret values (the token, provider API keys) wherever they appear.
 */

export interface LoggerOptions {
  readonly level: string
  /** values that must never be written (empty strings are ignored) */
  readonly secrets: readonly (string | undefined)[]
  readonly destination?: DestinationStream
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
  return pino(
    {
      level: options.level,
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
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  )
}
