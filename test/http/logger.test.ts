import Fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { createLogger, RequestLogController } from '../../src/http/logger.js'

/**
 * The server's log (src/http/logger.ts): pino-pretty lines on a terminal, JSON
 * lines elsewhere (CHRONICLE_LOG_FORMAT overrides), the known secrets scrubbed
 * from both; /health probes logged at debug, other requests at info.
 */

const SECRET = 'tok_0123456789abcdef-secret'

/** A destination that says it is a terminal, as process.stdout does on one. */
function terminal(colors = false) {
  const lines: string[] = []
  return { lines, isTTY: true, hasColors: () => colors, write: (line: string) => void lines.push(line) }
}

/** A destination that is a pipe or a file. */
function pipe() {
  const lines: string[] = []
  return { lines, write: (line: string) => void lines.push(line) }
}

const isJson = (line: string) => {
  try {
    JSON.parse(line)
    return true
  } catch {
    return false
  }
}

describe('the log format', () => {
  it('on a terminal: pretty lines (time, level, message; no pid or hostname), the secret scrubbed', () => {
    const out = terminal()
    const log = createLogger({ level: 'info', secrets: [SECRET], destination: out })
    log.info({ presented: `Bearer ${SECRET}`, session: 'ses_1' }, `started with ${SECRET}`)
    expect(out.lines).toHaveLength(1)
    const line = out.lines[0] as string
    expect(isJson(line)).toBe(false)
    expect(line).toMatch(/^\[\d\d:\d\d:\d\d\] INFO: started with \[REDACTED\]\n/)
    expect(line).toContain('presented: "Bearer [REDACTED]"')
    expect(line).toContain('session: "ses_1"')
    expect(line).not.toContain(SECRET)
    expect(line).not.toMatch(/pid|hostname/)
    expect(line).not.toContain('\u001b[') // this terminal shows no colours
  })

  it('colours when the terminal shows them', () => {
    const out = terminal(true)
    createLogger({ level: 'info', secrets: [], destination: out }).warn('careful')
    expect(out.lines[0]).toContain('\u001b[')
  })

  it('elsewhere: one JSON object per line, the secret scrubbed', () => {
    const out = pipe()
    const log = createLogger({ level: 'info', secrets: [SECRET], destination: out })
    log.info({ presented: SECRET }, `started with ${SECRET}`)
    expect(out.lines).toHaveLength(1)
    const line = out.lines[0] as string
    expect(JSON.parse(line)).toMatchObject({ level: 30, msg: 'started with [REDACTED]', presented: '[REDACTED]' })
    expect(line).not.toContain(SECRET)
  })

  it('an explicit format wins over the guess', () => {
    const tty = terminal()
    createLogger({ level: 'info', secrets: [], destination: tty, format: 'json' }).info('as json')
    expect(JSON.parse(tty.lines[0] as string)).toMatchObject({ msg: 'as json' })
    const file = pipe()
    createLogger({ level: 'info', secrets: [SECRET], destination: file, format: 'pretty' }).info(`pretty ${SECRET}`)
    expect(file.lines[0]).toMatch(/INFO: pretty \[REDACTED\]\n$/)
  })

  it('CHRONICLE_LOG_FORMAT sets it: json or pretty, anything else is a configuration error', () => {
    const env = { CHRONICLE_DATA_DIR: '/tmp/unused-chronicle' }
    expect(loadConfig({ env, configPath: false }).logFormat).toBeUndefined()
    expect(loadConfig({ env: { ...env, CHRONICLE_LOG_FORMAT: 'pretty' }, configPath: false }).logFormat).toBe('pretty')
    expect(loadConfig({ env: { ...env, CHRONICLE_LOG_FORMAT: 'json' }, configPath: false }).logFormat).toBe('json')
    expect(() => loadConfig({ env: { ...env, CHRONICLE_LOG_FORMAT: 'xml' }, configPath: false })).toThrow(
      /CHRONICLE_LOG_FORMAT/,
    )
  })
})

describe('request logging', () => {
  let app: ReturnType<typeof Fastify> | undefined
  afterEach(async () => {
    await app?.close()
    app = undefined
  })

  async function serve(level: string) {
    const out = pipe()
    app = Fastify({
      loggerInstance: createLogger({ level, secrets: [], destination: out }),
      logController: new RequestLogController(),
    })
    app.get('/health', async () => ({ status: 'ok' }))
    app.get('/sessions', async () => ({ sessions: [] }))
    await app.inject({ url: '/health' })
    await app.inject({ url: '/sessions' })
    return out.lines.map((l) => JSON.parse(l) as { level: number; msg: string; req?: { url: string } })
  }

  it('/health probes at debug, every other request at info', async () => {
    const lines = await serve('debug')
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [20, 'incoming request'],
      [20, 'request completed'],
      [30, 'incoming request'],
      [30, 'request completed'],
    ])
    expect(lines.filter((l) => l.req).map((l) => l.req?.url)).toEqual(['/health', '/sessions'])
  })

  it('at the default level (info) the probes are not logged at all', async () => {
    const lines = await serve('info')
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [30, 'incoming request'],
      [30, 'request completed'],
    ])
  })
})
