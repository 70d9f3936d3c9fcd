import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { exportSession } from '../../src/projections/transfer/export.js'
import { openStore } from '../../src/projections/open.js'
import type { ScriptStep } from '../../src/runtime/model/scripted-model.js'
import { run, type Proc } from '../cli/helpers.js'

/**
 * A real Chronicle server process, started the way a user starts it (`chronicle
 * serve` with HOME set: the data dir and config file are the per-user XDG
 * ones), driven by the scripted model — the one part that plays the hostile
 * model — in a real workspace directory. The security specs read what came of
 * it: the events, the files, the raw bytes of the database and an export.
 */

export interface HostileServer {
  readonly url: string
  readonly token: string
  readonly workspace: string
  readonly home: string
  readonly dataDir: string
  readonly pid: number
  /** runs one prompt to its end in a new session; resolves with the session id */
  prompt(text: string): Promise<string>
  /** one request to the server's HTTP API with the token (throws on an error status) */
  api(method: string, path: string, body?: unknown): Promise<Record<string, unknown>>
  events(sessionId: string): Promise<{ seq: number; type: string; at: string; data: Record<string, unknown> }[]>
  health(): Promise<number>
  /** stops the server; then the raw database bytes (db + WAL) and an export of each session */
  stop(): Promise<{ bytes: Buffer; exported: string }>
}

export interface HostileOptions {
  /** the model's script; given the server's paths when it needs them */
  readonly steps:
    | readonly ScriptStep[]
    | ((paths: { home: string; workspace: string; dataDir: string }) => readonly ScriptStep[])
  /** the user's own config file ($XDG_CONFIG_HOME/chronicle/chronicle.json) */
  readonly config?: Record<string, unknown>
  /** the server's environment, beyond HOME and the port */
  readonly env?: Record<string, string>
  /** files in the workspace: relative path → content */
  readonly files?: Record<string, string>
  /** where the server's home and workspace are made (default the OS temp dir; the sandbox mounts its own /tmp) */
  readonly under?: string
}

export async function startHostile(options: HostileOptions): Promise<HostileServer> {
  const root = realpathSync(mkdtempSync(join(options.under ?? tmpdir(), 'chronicle-hostile-')))
  const home = join(root, 'home')
  const workspace = join(root, 'workspace')
  mkdirSync(join(home, '.config', 'chronicle'), { recursive: true })
  mkdirSync(workspace)
  for (const [path, content] of Object.entries(options.files ?? {})) {
    mkdirSync(join(workspace, path, '..'), { recursive: true })
    writeFileSync(join(workspace, path), content)
  }
  const configFile = join(home, '.config', 'chronicle', 'chronicle.json')
  if (options.config) writeFileSync(configFile, JSON.stringify(options.config))
  const expectedDataDir = join(home, '.local', 'share', 'chronicle') // where `npm start` keeps its data for this HOME
  const steps =
    typeof options.steps === 'function' ? options.steps({ home, workspace, dataDir: expectedDataDir }) : options.steps
  const script = join(root, 'script.json')
  writeFileSync(script, JSON.stringify({ chunkSize: 64, uniqueCallIds: true, steps }))
  // `--config` names the user's file explicitly (the XDG default would find it too): older servers read it the same way
  const args = ['serve', ...(options.config ? ['--config', configFile] : [])]
  const proc: Proc = run(
    args,
    { HOME: home, CHRONICLE_PORT: '0', CHRONICLE_MODEL: `scripted:${script}`, ...options.env },
    workspace,
  )
  const [, url, tokenFile] = (await proc.waitFor(
    /listening on (http:\/\/\S+) — .*(?:stored in|token in) (\S+)/,
  )) as RegExpMatchArray
  // the data dir is wherever the server says its token is (so these specs also run against older servers)
  const dataDir = dirname(tokenFile as string)
  const token = readFileSync(tokenFile as string, 'utf8').trim()
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method,
      headers,
      ...(body !== undefined && { body: JSON.stringify(body) }),
    })
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
    return (await res.json()) as Record<string, unknown>
  }
  const sessions: string[] = []
  return {
    url: url as string,
    token,
    workspace,
    home,
    dataDir,
    pid: proc.child.pid as number,
    api: call,
    async prompt(text) {
      const { session } = (await call('POST', '/sessions', { directory: workspace })) as { session: { id: string } }
      sessions.push(session.id)
      await call('POST', `/sessions/${session.id}/inputs?wait=true`, { parts: [{ type: 'text', text }] })
      return session.id
    },
    async events(sessionId) {
      const out: { seq: number; type: string; at: string; data: Record<string, unknown> }[] = []
      for (let after = 0; ; ) {
        const page = (await call('GET', `/sessions/${sessionId}/events?after=${after}&limit=1000`)) as {
          events: typeof out
        }
        out.push(...page.events)
        if (page.events.length < 1000) return out
        after = page.events.at(-1)?.seq as number
      }
    },
    async health() {
      const started = performance.now()
      await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) })
      return performance.now() - started
    },
    async stop() {
      proc.child.kill('SIGTERM')
      await proc.exited
      const db = join(dataDir, 'chronicle.db')
      const bytes = Buffer.concat([db, `${db}-wal`].filter(existsSync).map((f) => readFileSync(f)))
      const store = openStore(db)
      try {
        return { bytes, exported: sessions.map((s) => exportSession(store, s)).join('') }
      } finally {
        store.close()
      }
    },
  }
}

/** Polls /health every 100 ms while `work` runs; resolves with the work's result and the slowest answer (ms). */
export async function whileHealthy<T>(
  server: HostileServer,
  work: () => Promise<T>,
): Promise<{ result: T; slowestMs: number }> {
  let slowestMs = 0
  let done = false
  const probe = (async () => {
    while (!done) {
      slowestMs = Math.max(slowestMs, await server.health().catch(() => Number.POSITIVE_INFINITY))
      await new Promise((r) => setTimeout(r, 100))
    }
  })()
  try {
    const result = await work()
    return { result, slowestMs }
  } finally {
    done = true
    await probe
  }
}

type Call = { name: string; input: Record<string, unknown> }

/** A script for several rows on one server: a prompt naming a row plays that row's tool calls, then "done". */
export function rows(byPrompt: Record<string, readonly Call[]>): ScriptStep[] {
  return [
    ...Object.entries(byPrompt).map(([prompt, toolCalls]) => ({
      when: { userContains: prompt, afterToolResult: false },
      toolCalls: toolCalls.map((c, i) => ({ id: `call_${i}`, ...c })),
    })),
    { when: { afterToolResult: true }, text: 'done' },
  ]
}

/** A script in which the model makes the given tool calls, then answers "done". */
export function calls(...toolCalls: { name: string; input: Record<string, unknown> }[]): ScriptStep[] {
  return [
    { when: { afterToolResult: false }, toolCalls: toolCalls.map((c, i) => ({ id: `call_${i}`, ...c })) },
    { when: { afterToolResult: true }, text: 'done' },
  ]
}

/** Every tool result the model was sent (completed output or failure message), in order. */
export function results(events: { type: string; data: Record<string, unknown> }[]): string[] {
  return events.flatMap((e) =>
    e.type === 'tool.completed'
      ? [String(e.data.output)]
      : e.type === 'tool.failed'
        ? [`${(e.data.error as { kind: string }).kind}: ${(e.data.error as { message: string }).message}`]
        : [],
  )
}
