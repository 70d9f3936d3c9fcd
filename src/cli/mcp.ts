import { createServer, type Server } from 'node:http'
import { loadConfig } from '../config.js'
import { ChronicleError } from '../events/errors.js'
import type { McpServerConfig } from '../tools/mcp/config.js'
import { finishMcpSignIn, McpOAuthError, mcpOAuthRedirectUrl, type RemoteMcpServerConfig } from '../tools/mcp/oauth.js'
import { createMcpOAuthStore } from '../tools/mcp/oauth-store.js'
import { connectMcpServer } from '../tools/mcp/server.js'
import { flag, UsageError, type Args } from './args.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle mcp list | login <server> | logout <server>` (docs/TOOLS.md
 * "Signing in to remote MCP servers"), from the config and the data dir's
 * sign-in file, with the server stopped or not. The redirect URL the client
 * registered is the server's port: `login` serves the OAuth callback there
 * itself when the port is free, and otherwise leaves it to the running
 * server's own callback, which reads the same sign-in file, and waits for
 * the tokens to appear in it.
 */

/** how long `mcp login` waits for the browser */
const LOGIN_WAIT_MS = 5 * 60_000

export async function mcpCommand(args: Args, out: Terminal): Promise<number> {
  const [sub, name] = args.positionals
  const configPath = flag(args, 'config')
  const config = loadConfig({ ...(configPath && { configPath }) })
  const store = createMcpOAuthStore(config.dataDir)
  const find = (verb: string): McpServerConfig => {
    if (!name) throw new UsageError(`mcp ${verb} needs a server name (chronicle mcp list)`)
    const server = config.mcp.find((s) => s.name === name)
    if (!server) throw new UsageError(`no MCP server "${name}" in the config (chronicle mcp list)`)
    return server
  }
  switch (sub) {
    case 'list': {
      if (config.mcp.length === 0) out.line('(no MCP servers configured)')
      for (const s of config.mcp) {
        const where = s.type === 'local' ? s.command.join(' ') : s.url
        out.line(`${s.name}  ${s.type}  ${where}  ${s.type === 'remote' ? signInState(s, store) : ''}`.trimEnd())
      }
      return 0
    }
    case 'logout': {
      const server = find('logout')
      const removed = store.remove(server.name)
      out.line(
        removed
          ? `signed out of ${server.name}: its stored sign-in is deleted`
          : `${server.name} had no stored sign-in`,
      )
      return 0
    }
    case 'login': {
      const server = find('login')
      if (server.type !== 'remote') throw new UsageError(`${server.name} is a local server: it has no sign-in`)
      if (server.oauth === false) throw new UsageError(`${server.name} has sign-in turned off (oauth: false)`)
      return login(server, config.dataDir, config.port, out)
    }
    default:
      throw new UsageError('mcp needs list, login <server> or logout <server>')
  }
}

function signInState(s: RemoteMcpServerConfig, store: ReturnType<typeof createMcpOAuthStore>): string {
  if (s.oauth === false) return 'sign-in off'
  if (s.oauth?.grant === 'client_credentials') return 'client credentials'
  const record = store.get(s.name, s.url)
  if (record.tokens) return 'signed in'
  if (record.pending?.authorizationUrl) return 'sign-in waiting'
  return 'not signed in'
}

async function login(server: RemoteMcpServerConfig, dataDir: string, port: number, out: Terminal): Promise<number> {
  const redirectUrl = mcpOAuthRedirectUrl(port)
  const opts = { dataDir, oauthRedirectUrl: redirectUrl }
  const first = await connectMcpServer(server, opts)
  const status = first.status()
  await first.close()
  if (status.state === 'connected') {
    out.line(`${server.name} is signed in already (${toolCount(status.tools)})`)
    return 0
  }
  if (status.state !== 'needs-auth' || !status.authorizationUrl)
    throw new ChronicleError('BAD_REQUEST', `${server.name} cannot be signed in to: ${status.error ?? status.state}`)
  const callback = await listenForCallback(port)
  const show = () => {
    out.line(`open this URL in a browser to sign in to ${server.name}:`)
    out.write(`${status.authorizationUrl}\n`) // unwrapped: it is copied or clicked whole
  }
  if (callback === 'in use') {
    show()
    out.line(`(port ${port} is in use, by chronicle serve it seems: its callback completes the sign-in)`)
    await tokensStored(server, dataDir)
  } else {
    try {
      show()
      const { code, state } = await callback.received
      await finishMcpSignIn(server, { dataDir, redirectUrl }, { code, state }).catch((err: unknown) => {
        throw err instanceof McpOAuthError ? new ChronicleError('BAD_REQUEST', `${err.code}: ${err.message}`) : err
      })
    } finally {
      await callback.close()
    }
  }
  const signedIn = await connectMcpServer(server, opts)
  const after = signedIn.status()
  await signedIn.close()
  if (after.state !== 'connected')
    throw new ChronicleError(
      'BAD_REQUEST',
      `signed in, but ${server.name} still refuses: ${after.error ?? after.state}`,
    )
  out.line(`signed in to ${server.name} (${toolCount(after.tools)})`)
  return 0
}

/** Resolves once the sign-in file holds the server's tokens (the running server's callback wrote them). */
async function tokensStored(server: RemoteMcpServerConfig, dataDir: string): Promise<void> {
  const store = createMcpOAuthStore(dataDir)
  for (const deadline = Date.now() + LOGIN_WAIT_MS; Date.now() < deadline; ) {
    if (store.get(server.name, server.url).tokens) return
    await new Promise((r) => setTimeout(r, 250))
  }
  throw new ChronicleError('BAD_REQUEST', `no sign-in within ${LOGIN_WAIT_MS / 60_000} minutes`)
}

/**
 * One GET /mcp/oauth/callback on 127.0.0.1:port, answered with a line for the
 * browser tab; `in use` when something (a running chronicle serve) holds the port.
 */
async function listenForCallback(port: number) {
  let resolve!: (v: { code: string; state: string | null }) => void
  let reject!: (e: Error) => void
  const received = new Promise<{ code: string; state: string | null }>((res, rej) => {
    resolve = res
    reject = rej
  })
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://127.0.0.1:${port}`)
    if (req.method !== 'GET' || url.pathname !== '/mcp/oauth/callback') {
      res.writeHead(404).end()
      return
    }
    const code = url.searchParams.get('code')
    const error = url.searchParams.get('error')
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' })
    res.end(
      code ? 'Signed in: you can close this tab and go back to Chronicle.' : `Sign-in failed: ${error ?? 'no code'}`,
    )
    if (code) resolve({ code, state: url.searchParams.get('state') })
    else reject(new ChronicleError('BAD_REQUEST', `the authorization server answered ${error ?? 'without a code'}`))
  })
  const listening = await new Promise<boolean>((ok, fail) => {
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? ok(false) : fail(err)))
    server.listen(port, '127.0.0.1', () => ok(true))
  })
  if (!listening) return 'in use' as const
  const timer = setTimeout(
    () => reject(new ChronicleError('BAD_REQUEST', `no sign-in within ${LOGIN_WAIT_MS / 60_000} minutes`)),
    LOGIN_WAIT_MS,
  )
  return {
    received,
    close: async () => {
      clearTimeout(timer)
      server.closeAllConnections()
      await new Promise<void>((ok) => server.close(() => ok()))
    },
  }
}

const toolCount = (n: number) => (n === 1 ? '1 tool' : `${n} tools`)
