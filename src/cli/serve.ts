import pino from 'pino'
import { loadConfig } from '../config.js'
import { createChronicle, VERSION } from '../main.js'
import { flag, type Args } from './args.js'
import { recordServer } from './server-record.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle serve [--config file] [--host h] [--port p]`: runs the server
 * until SIGINT/SIGTERM, then shuts down gracefully. Prints on start one
 * line with the URL and where the token is, and — unless the web page is
 * off — a second with a one-time link that logs a browser into the page as
 * the owner (`open http://127.0.0.1:<port>/login#<code>`, valid 10 minutes);
 * logs go to stderr.
 */
export async function serve(args: Args, { line: out }: Terminal): Promise<number> {
  const env = { ...process.env }
  const host = flag(args, 'host')
  const port = flag(args, 'port')
  if (host) env.CHRONICLE_HOST = host
  if (port) env.CHRONICLE_PORT = port
  const configPath = flag(args, 'config')
  const config = loadConfig({ env, ...(configPath && { configPath }) })
  const chronicle = await createChronicle(config, { logDestination: pino.destination({ dest: 2, sync: false }) })
  let url: string
  try {
    url = await chronicle.start()
  } catch (err) {
    await chronicle.stop()
    const code = (err as { code?: string }).code
    if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
      process.stderr.write(`chronicle: cannot listen on ${config.host}:${config.port} (${code})\n`)
      return 1
    }
    throw err
  }
  const { token } = chronicle
  const where =
    token.source === 'environment'
      ? 'token from CHRONICLE_TOKEN'
      : token.source === 'config'
        ? `token from ${config.configFile ?? 'the config file'}`
        : token.generated
          ? `token (shown once) ${token.token} stored in ${token.file}`
          : `token in ${token.file}`
  // where `chronicle restore` finds it, whatever port it took (src/cli/server-record.ts)
  const unrecord = recordServer(config.dataDir, { pid: process.pid, url })
  // Signals are handled before the URL is printed: a SIGTERM sent as soon as it is read stops the server cleanly.
  const stopped = new Promise<number>((resolve) => {
    let signals = 0
    const shutdown = (signal: NodeJS.Signals) => {
      if (++signals > 1) {
        process.stderr.write(`${signal} again: exiting without a clean shutdown\n`)
        resolve(1)
        return
      }
      chronicle.logger.info({ signal }, 'shutting down')
      chronicle.stop().then(
        () => {
          unrecord()
          resolve(0)
        },
        (err: unknown) => {
          unrecord()
          process.stderr.write(`shutdown failed: ${String(err)}\n`)
          resolve(1)
        },
      )
    }
    process.on('SIGINT', shutdown)
    process.on('SIGTERM', shutdown)
  })
  out(`Chronicle ${VERSION} listening on ${url} — ${where}`)
  if (config.web.enabled) out(`open ${chronicle.loginLink().url}`)
  if (chronicle.sandbox.kind === 'unavailable') {
    process.stderr.write(
      `chronicle: ${chronicle.sandbox.reason}. Every bash command will need your approval. ` +
        'Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or set "sandbox": "off" in your config to run commands unconfined.\n',
    )
  }

  return stopped
}
