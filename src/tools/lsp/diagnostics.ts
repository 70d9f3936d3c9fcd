import { spawn } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { extname } from 'node:path'
import { pathToFileURL } from 'node:url'
import { watchLease } from '../lease-watchdog.js'
import { childEnv } from '../child-env.js'
import type { Sandbox } from '../sandbox.js'
import { LspConnection } from './connection.js'
import type { LspServerSpec } from './servers.js'

/**
 * Language-server diagnostics after an edit (docs/TOOLS.md "Diagnostics"). A server is started lazily
 * per session directory and server, in the same sandbox as bash, and reused; one that died is started
 * again at the next edit. A changed file is sent whole (didOpen, then didChange), and its diagnostics are
 * awaited — published by the server, or asked of it where it can answer at once (typescript-language-server:
 * servers.ts `diagnostics`) — never past the deadline: the tool then says they were not ready. Only errors
 * are reported. A file that is read starts its server (`warm`; tsserver also loads its project): an edit
 * needs a read first, so the cold start overlaps the model's step instead of following the edit.
 */

export interface Diagnostic {
  readonly line: number
  readonly character: number
  readonly message: string
  readonly source?: string
  readonly code?: string | number
}

export interface FileDiagnostics {
  readonly path: string
  readonly errors: readonly Diagnostic[]
}

export interface DiagnosticsReport {
  readonly files: readonly FileDiagnostics[]
  /** files whose server did not answer in time (or could not start) */
  readonly notReady: readonly string[]
}

export interface DiagnosticsService {
  /** the errors of `files` (real paths inside `directory`) after they changed */
  after(directory: string, files: readonly string[], signal?: AbortSignal): Promise<DiagnosticsReport>
  /**
   * Starts the server that takes `file` (a real path inside `directory`, outside node_modules) — tsserver also
   * loads the file's project — without waiting for it. Nothing for a file no server takes.
   */
  warm(directory: string, file: string): void
  close(): void
}

export interface DiagnosticsOptions {
  readonly servers: readonly LspServerSpec[]
  readonly sandbox: Sandbox
  /** how long a tool waits for diagnostics (default 3 s) */
  readonly deadlineMs?: number
  /** (cluster) the node's lease file: each server is killed by a watchdog once the lease is over (src/tools/lease-watchdog.ts) */
  readonly leaseFile?: string
}

export const DEFAULT_DIAGNOSTICS_DEADLINE_MS = 3000
/** After a file's first report, further ones within this window replace it (syntax, then semantic errors). */
const SETTLE_MS = 150

interface Published {
  count: number
  errors: Diagnostic[]
}

interface Running {
  readonly connection: LspConnection
  readonly ready: Promise<unknown>
  readonly versions: Map<string, number>
  readonly published: Map<string, Published>
  readonly listeners: Set<() => void>
  readonly kill: () => void
}

export function createDiagnostics(options: DiagnosticsOptions): DiagnosticsService {
  const deadlineMs = options.deadlineMs ?? DEFAULT_DIAGNOSTICS_DEADLINE_MS
  const running = new Map<string, Running>()

  function serverFor(path: string): LspServerSpec | undefined {
    const ext = extname(path).toLowerCase()
    return options.servers.find((s) => s.extensions.includes(ext))
  }

  function start(spec: LspServerSpec, directory: string): Running {
    const { file, args } = options.sandbox.wrap(spec.command, { workspace: directory, cwd: directory })
    const child = spawn(file, args, { cwd: directory, env: childEnv(process.env), stdio: 'pipe' })
    child.stderr.resume() // never read, never allowed to fill
    if (options.leaseFile && child.pid !== undefined) watchLease(child.pid, options.leaseFile, 'process')
    const connection = new LspConnection(child)
    const published = new Map<string, Published>()
    const listeners = new Set<() => void>()
    connection.on('textDocument/publishDiagnostics', (params) => {
      const p = params as {
        uri?: string
        diagnostics?: {
          severity?: number
          message?: string
          range?: { start?: { line?: number; character?: number } }
          source?: string
          code?: string | number
        }[]
      }
      if (typeof p.uri !== 'string' || !Array.isArray(p.diagnostics)) return
      const errors = p.diagnostics
        .filter((d) => (d.severity ?? 1) === 1 && typeof d.message === 'string')
        .map((d) => ({
          line: (d.range?.start?.line ?? 0) + 1,
          character: (d.range?.start?.character ?? 0) + 1,
          message: String(d.message),
          ...(typeof d.source === 'string' && { source: d.source }),
          ...((typeof d.code === 'string' || typeof d.code === 'number') && { code: d.code }),
        }))
      const before = published.get(p.uri)
      published.set(p.uri, { count: (before?.count ?? 0) + 1, errors })
      for (const listener of listeners) listener()
    })
    const root = pathToFileURL(directory).href
    const ready = connection
      .request('initialize', {
        processId: null, // its PID namespace (the sandbox) has no such process: a server watching it would stop
        rootUri: root,
        workspaceFolders: [{ uri: root, name: 'workspace' }],
        capabilities: { textDocument: { publishDiagnostics: {}, synchronization: { didSave: false } } },
        ...(spec.initializationOptions && { initializationOptions: spec.initializationOptions }),
      })
      .then(() => connection.notify('initialized', {}))
      .then(() => unwatch(connection, spec, directory))
    ready.catch(() => undefined) // a failed start is reported per call (notReady), and retried at the next one
    return { connection, ready, versions: new Map(), published, listeners, kill: () => child.kill('SIGKILL') }
  }

  function serverOf(spec: LspServerSpec, directory: string): Running {
    const key = `${spec.name}\u0000${directory}`
    const found = running.get(key)
    if (found && !found.connection.closed) return found
    const fresh = start(spec, directory)
    running.set(key, fresh)
    return fresh
  }

  /** Sends the file's text to its server: opened the first time, changed after. */
  function send(server: Running, spec: LspServerSpec, path: string, text: string): void {
    const uri = pathToFileURL(path).href
    const version = (server.versions.get(uri) ?? 0) + 1
    server.versions.set(uri, version)
    if (version === 1)
      server.connection.notify('textDocument/didOpen', {
        textDocument: { uri, languageId: spec.languageId(path), version, text },
      })
    else
      server.connection.notify('textDocument/didChange', {
        textDocument: { uri, version },
        contentChanges: [{ text }],
      })
  }

  /**
   * Has tsserver load the file's project (opening the file does; its syntactic errors are answered once it is
   * loaded), then closes the file again: until an edit opens it, tsserver reads it from disk and watches it, so a
   * change made meanwhile by other means (bash) is seen. An edit that opened it first keeps it open.
   */
  async function load(server: Running, spec: LspServerSpec, path: string): Promise<void> {
    const uri = pathToFileURL(path).href
    const text = await readFile(path, 'utf8')
    await server.ready
    if (server.versions.has(uri)) return
    send(server, spec, path, text)
    await askTsserver(server.connection, uri, ['syntacticDiagnosticsSync'])
    if (server.versions.get(uri) !== 1) return
    server.versions.delete(uri)
    server.connection.notify('textDocument/didClose', { textDocument: { uri } })
  }

  /** The file's errors once its server reported after this change (and the report settled), or undefined at the deadline. */
  async function diagnose(spec: LspServerSpec, directory: string, path: string, until: number, signal?: AbortSignal) {
    const server = serverOf(spec, directory)
    const text = await readFile(path, 'utf8')
    await withDeadline(server.ready, until, signal)
    const uri = pathToFileURL(path).href
    const seen = server.published.get(uri)?.count ?? 0
    send(server, spec, path, text)
    if (spec.diagnostics === 'tsserver') return await withDeadline(askTsserver(server.connection, uri), until, signal)
    await waitFor(server, () => (server.published.get(uri)?.count ?? 0) > seen, until, signal)
    // later reports for the same change (semantic after syntactic) within a short window win
    let count = server.published.get(uri)?.count ?? 0
    for (;;) {
      const settled = Math.min(until, Date.now() + SETTLE_MS)
      const more = await waitFor(server, () => (server.published.get(uri)?.count ?? 0) > count, settled, signal).then(
        () => true,
        () => false,
      )
      if (!more) break
      count = server.published.get(uri)?.count ?? 0
    }
    return server.published.get(uri)?.errors ?? []
  }

  return {
    async after(directory, files, signal) {
      const until = Date.now() + deadlineMs
      const results = await Promise.all(
        files.map(async (path) => {
          const spec = serverFor(path)
          if (!spec) return undefined
          try {
            return { path, errors: await diagnose(spec, directory, path, until, signal) }
          } catch {
            return { path, errors: undefined }
          }
        }),
      )
      const report = results.filter((r): r is NonNullable<typeof r> => r !== undefined)
      return {
        files: report.flatMap((r) => (r.errors ? [{ path: r.path, errors: r.errors }] : [])),
        notReady: report.flatMap((r) => (r.errors ? [] : [r.path])),
      }
    },
    warm(directory, file) {
      const spec = serverFor(file)
      if (!spec || !file.startsWith(`${directory}/`) || file.includes('/node_modules/')) return
      const server = serverOf(spec, directory)
      // tsserver can say when the project is loaded; another server is only started
      if (spec.diagnostics === 'tsserver') load(server, spec, file).catch(() => undefined)
    },
    close() {
      for (const server of running.values()) server.kill()
      running.clear()
    },
  }
}

/**
 * Tells tsserver not to watch the server's own installation (servers.ts `unwatched`) before the first file opens its
 * project — except a directory that holds the workspace or lies inside it, whose packages change (`npm install`), or
 * one a glob would read wider (`*`, `?`). A server that refuses is only slower.
 */
async function unwatch(connection: LspConnection, spec: LspServerSpec, directory: string): Promise<void> {
  const overlaps = (dir: string) =>
    dir === directory || dir.startsWith(`${directory}/`) || directory.startsWith(`${dir}/`)
  const excludeDirectories = (spec.unwatched ?? []).filter((dir) => !overlaps(dir) && !/[*?]/.test(dir))
  if (spec.diagnostics !== 'tsserver' || excludeDirectories.length === 0) return
  await connection
    .request('workspace/executeCommand', {
      command: 'typescript.tsserverRequest',
      arguments: ['configure', { watchOptions: { excludeDirectories } }],
    })
    .catch(() => undefined)
}

/**
 * A file's errors asked of typescript-language-server's tsserver (syntactic, then semantic; tsserver answers in
 * order, once the file's project is loaded). The answers come from a process in the sandbox: read defensively.
 */
async function askTsserver(
  connection: LspConnection,
  uri: string,
  commands = ['syntacticDiagnosticsSync', 'semanticDiagnosticsSync'],
): Promise<Diagnostic[]> {
  const ask = (command: string) =>
    connection.request('workspace/executeCommand', {
      command: 'typescript.tsserverRequest',
      arguments: [command, { file: uri }],
    })
  const answers = await Promise.all(commands.map(ask))
  return answers.flatMap((answer) => {
    const body = (answer as { body?: unknown } | null)?.body
    if (!Array.isArray(body)) throw new Error('tsserver answered without diagnostics')
    return (body as TsDiagnostic[]).flatMap((d) =>
      // typescript-language-server's own mapping: warnings and suggestions are not errors, anything else is
      typeof d?.text !== 'string' || d.category === 'warning' || d.category === 'suggestion'
        ? []
        : [
            {
              line: Number(d.start?.line) || 1,
              character: Number(d.start?.offset) || 1,
              message: d.text,
              source: typeof d.source === 'string' ? d.source : 'typescript',
              ...((typeof d.code === 'string' || typeof d.code === 'number') && { code: d.code }),
            },
          ],
    )
  })
}

/** One diagnostic as tsserver answers it (1-based line and offset). */
interface TsDiagnostic {
  readonly text?: unknown
  readonly category?: unknown
  readonly start?: { readonly line?: unknown; readonly offset?: unknown }
  readonly source?: unknown
  readonly code?: unknown
}

function waitFor(server: Running, done: () => boolean, until: number, signal?: AbortSignal): Promise<void> {
  if (done()) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const finish = (err?: Error) => {
      clearTimeout(timer)
      server.listeners.delete(listener)
      signal?.removeEventListener('abort', aborted)
      if (err) reject(err)
      else resolve()
    }
    const listener = () => {
      if (done()) finish()
      else if (server.connection.closed) finish(new Error('the language server exited'))
    }
    const aborted = () => finish(new Error('aborted'))
    const timer = setTimeout(() => finish(new Error('deadline')), Math.max(0, until - Date.now()))
    server.listeners.add(listener)
    signal?.addEventListener('abort', aborted, { once: true })
  })
}

function withDeadline<T>(promise: Promise<T>, until: number, signal?: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('deadline')), Math.max(0, until - Date.now()))
    const aborted = () => reject(new Error('aborted'))
    signal?.addEventListener('abort', aborted, { once: true })
    promise.then(resolve, reject).finally(() => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', aborted)
    })
  })
}
