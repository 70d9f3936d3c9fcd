import { type ChildProcess, spawn as nodeSpawn, type SpawnOptions } from 'node:child_process'
import { watchLease } from '../lease-watchdog.js'
import { existsSync, statSync } from 'node:fs'
import { StringDecoder } from 'node:string_decoder'
import { dirname, isAbsolute, join } from 'node:path'
import { z } from 'zod'
import { childEnv, type ChildEnvOptions } from '../child-env.js'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import { OutputCapture } from '../output-capture.js'
import { type CallProxy, openCallProxy, type ProxyPolicy } from '../net/call-proxy.js'
import { accessPath, resolveInWorkspace } from '../paths.js'
import { simpleCommands } from '../permission/shell-split.js'
import { NO_SECRETS, type Redactor } from '../redact.js'
import { type Sandbox, unconfined } from '../sandbox.js'
import { defineTool, type ToolContext, ToolFailure, type ToolResult } from '../tool.js'
import { outputDir } from '../truncate.js'
import { drain, groupGone, signalGroup } from './process-group.js'

export const DEFAULT_TIMEOUT_MS = 120_000
export const MAX_TIMEOUT_MS = 600_000

const parameters = z.object({
  command: z.string().min(1).describe('The shell command to run (bash syntax)'),
  timeout: z
    .number()
    .int()
    .min(1)
    .max(MAX_TIMEOUT_MS)
    .optional()
    .describe(
      `Timeout in milliseconds (default ${DEFAULT_TIMEOUT_MS}, maximum ${MAX_TIMEOUT_MS}); on timeout the whole process group is killed`,
    ),
  workdir: z
    .string()
    .min(1)
    .optional()
    .describe('The directory to run in (default: the session directory); use this instead of `cd dir &&`'),
  description: z.string().max(200).optional().describe('What the command does, in 5-10 words (shown to the user)'),
})

export interface BashToolDeps {
  readonly dataDir: string
  /** roots no tool may touch (default: the data directory) */
  readonly forbidden?: readonly string[]
  /** the user's hidden credentials: a path inside one asks `credentials` (default: none) */
  readonly credentials?: CredentialPaths
  /** the environment commands' allow-listed variables come from (default process.env) */
  readonly env?: NodeJS.ProcessEnv
  /** what the user's config adds to commands' environment */
  readonly childEnv?: ChildEnvOptions
  /** where commands run (default: unconfined, as embedders and unit tests want; the server passes the detected sandbox) */
  readonly sandbox?: Sandbox
  /** the user's `sandbox.network` list: each confined command reaches only those hosts, through a proxy of its own */
  readonly network?: ProxyPolicy
  /** the server's secrets, kept out of outputs, progress and saved files */
  readonly redactor?: Redactor
  readonly shell?: string
  /** grace between SIGTERM and SIGKILL of the process group */
  readonly killGraceMs?: number
  readonly spawn?: (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess
  /** (cluster) the node's lease file: each command's group is killed when the lease runs out (../lease-watchdog.ts) */
  readonly leaseFile?: string
}

/**
 * bash: runs a command confined by the sandbox (src/tools/sandbox.ts), in its
 * own process group (detached ⇒ setsid), with an allow-listed environment.
 * Output is redacted of the server's secrets as it arrives, kept bounded in
 * memory and streamed to the saved-output file; live progress carries only
 * what is new. On timeout or cancel the WHOLE group gets SIGTERM, then SIGKILL
 * after a grace — killing only the shell would leave its children running.
 * Where the sandbox is unavailable, every command needs the user's approval.
 */
export function createBashTool(deps: BashToolDeps) {
  const shell = deps.shell ?? (existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh')
  const spawn = deps.spawn ?? nodeSpawn
  const grace = deps.killGraceMs ?? 2000
  const forbidden = deps.forbidden ?? [deps.dataDir]
  const sandbox = deps.sandbox ?? unconfined('off')
  const redactor = deps.redactor ?? NO_SECRETS
  const proxied = sandbox.kind === 'bwrap' && deps.network !== undefined
  const networkNote = proxied
    ? ', and the network is reached only through a proxy (HTTP_PROXY/HTTPS_PROXY are set) that lets through the hosts the user allows.'
    : sandbox.network
      ? '.'
      : ', and there is no network.'
  return defineTool({
    id: 'bash',
    permission: 'bash',
    writes: true,
    description: `Runs a shell command in the session directory (or workdir) and returns its combined stdout/stderr and exit code. Default timeout ${DEFAULT_TIMEOUT_MS / 1000} s; long output is truncated with the full text saved to a file. Use the read/grep/glob/list/edit tools for files rather than cat/sed/find.${
      sandbox.kind === 'bwrap'
        ? ` Commands run in a sandbox: only the session directory and /tmp are writable${networkNote}`
        : ''
    }`,
    parameters,
    // its own timeout, the kill grace, and room to read what is left and save it
    budgetMs: (args) => (args.timeout ?? DEFAULT_TIMEOUT_MS) + grace + 30_000,
    async execute(args, ctx) {
      const cwd = args.workdir
        ? (await accessPath(ctx, args.workdir, { forbidden, credentials: deps.credentials })).real
        : ctx.directory
      if (!existsSync(cwd) || !statSync(cwd).isDirectory())
        throw new ToolFailure('failed', `workdir does not exist: ${args.workdir ?? cwd}`)
      const outside = outsidePaths(args.command, cwd, ctx.directory)
      if (outside.length > 0) {
        await ctx.ask({
          permission: 'external_directory',
          patterns: outside,
          always: [...new Set(outside.map((p) => join(dirname(p), '*')))],
          metadata: { command: args.command },
        })
      }
      await ctx.ask({
        permission: 'bash',
        patterns: [args.command],
        metadata: {
          command: args.command,
          description: args.description,
          ...(sandbox.kind === 'unavailable' && { sandbox: 'unavailable' }),
        },
        // Unconfined against the user's wish (no bubblewrap here): a person approves every command.
        ...(sandbox.kind === 'unavailable' && { requireUser: true }),
      })
      if (ctx.abort.aborted) throw new ToolFailure('aborted', 'The command was cancelled before it started.')

      const timeout = args.timeout ?? DEFAULT_TIMEOUT_MS
      const proxy = proxied ? openProxy(deps.network as ProxyPolicy, ctx) : undefined
      try {
        return await run(args, ctx, cwd, timeout, proxy)
      } finally {
        // each host the command reached or was refused, one event each, before the call ends
        for (const use of (await proxy?.close()) ?? []) ctx.network?.(use)
      }
    },
  })

  async function run(
    args: z.infer<typeof parameters>,
    ctx: ToolContext,
    cwd: string,
    timeout: number,
    proxy: CallProxy | undefined,
  ): Promise<ToolResult> {
    const place = { workspace: ctx.directory, cwd, proxied: proxy !== undefined }
    const { file, args: argv } = sandbox.wrap([shell, '-c', args.command], place)
    const env = childEnv(deps.env ?? process.env, deps.childEnv)
    const child = spawn(file, argv, {
      cwd,
      env: sandbox.kind === 'bwrap' ? { ...env, TMPDIR: '/tmp' } : env,
      detached: true,
      // behind a proxy, the launcher's one message carries the listener the proxy accepts on (proxy-launcher.ts)
      stdio: proxy ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
    })
    if (deps.leaseFile && child.pid !== undefined) watchLease(child.pid, deps.leaseFile)
    if (proxy)
      child.once('message', (_message, listener) => {
        child.disconnect()
        proxy.adopt(listener)
      })
    const capture = new OutputCapture({
      savePath: join(outputDir(deps.dataDir, ctx.sessionId), `bash_${ctx.partId}.txt`),
      progress: (p) => ctx.progress({ ...p, description: args.description ?? args.command }),
    })
    const secrets = redactor.stream()
    let last = ''
    const take = (text: string) => {
      const safe = secrets.push(text)
      if (safe !== '') last = safe
      return capture.write(safe)
    }
    for (const stream of [child.stdout, child.stderr]) {
      const decoder = new StringDecoder('utf8')
      stream?.on('data', (chunk: Buffer) => {
        if (take(decoder.write(chunk))) return
        // The saved file is behind: stop reading (the pipe fills and the command waits) until it catches up.
        child.stdout?.pause()
        child.stderr?.pause()
        void capture.drained().then(() => {
          child.stdout?.resume()
          child.stderr?.resume()
        })
      })
      stream?.once('end', () => take(decoder.end()))
    }

    let ended: 'timeout' | 'abort' | undefined
    const killGroup = (why: 'timeout' | 'abort') => {
      if (ended) return
      ended = why
      signalGroup(child, 'SIGTERM')
      setTimeout(() => signalGroup(child, 'SIGKILL'), grace).unref()
    }
    const timer = setTimeout(() => killGroup('timeout'), timeout)
    const onAbort = () => killGroup('abort')
    ctx.abort.addEventListener('abort', onAbort, { once: true })

    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
      child.once('error', reject)
      child.once('exit', (code, signal) => resolve({ code, signal }))
    }).finally(() => {
      clearTimeout(timer)
      ctx.abort.removeEventListener('abort', onAbort)
    })
    // Descendants that outlived the shell may hold the pipes open: stop reading shortly after exit.
    await drain(child, 200)
    if (ended) {
      signalGroup(child, 'SIGKILL') // whatever ignored SIGTERM goes now
      await groupGone(child, 1000)
    }

    const rest = secrets.end()
    if (rest !== '') last = rest
    capture.write(rest)
    const notes: string[] = []
    if (ended === 'timeout') notes.push(`The command timed out after ${timeout} ms; its process group was killed.`)
    if (ended === 'abort') notes.push('The command was cancelled; its process group was killed.')
    notes.push(exit.code !== null ? `exit code: ${exit.code}` : `terminated by signal ${exit.signal}`)
    const captured = await capture.finish(
      `${last === '' || last.endsWith('\n') ? '' : '\n'}<bash_metadata>\n${notes.join('\n')}\n</bash_metadata>`,
    )
    if (ended === 'abort') throw new ToolFailure('aborted', captured.output)
    // the output outgrew a result and the data dir's disk: the call fails, saying so; the run goes on
    if (captured.saveError !== undefined)
      throw new ToolFailure(
        'failed',
        `The command's output could not be saved: ${captured.saveError}.\n${captured.output}`,
      )
    return {
      output: captured.output,
      title: args.description ?? args.command,
      metadata: {
        exitCode: exit.code,
        ...(exit.signal && { signal: exit.signal }),
        timedOut: ended === 'timeout',
        pid: child.pid,
        sandbox: sandbox.kind,
        truncated: captured.truncated,
        ...(captured.outputPath && { outputPath: captured.outputPath }),
      },
    }
  }
}

/** The call's own proxy: a host off the list asks `network` for it, pattern = the host (docs/SECURITY.md). */
function openProxy(policy: ProxyPolicy, ctx: ToolContext): CallProxy {
  return openCallProxy(policy, {
    ask: (host, port, signal) =>
      ctx.ask({ permission: 'network', patterns: [host], always: [host], metadata: { host, port }, signal }),
  })
}

/** Programs whose path arguments we check against the workspace (OpenCode scans the same kind). */
const FILE_COMMANDS = new Set([
  'cd',
  'ls',
  'cat',
  'head',
  'tail',
  'less',
  'more',
  'rm',
  'rmdir',
  'cp',
  'mv',
  'mkdir',
  'touch',
  'chmod',
  'chown',
  'ln',
  'tee',
  'find',
  'grep',
  'rg',
  'sed',
  'awk',
  'diff',
  'tar',
  'zip',
  'unzip',
  'source',
  '.',
])

/**
 * Path-like arguments (containing `/`, or starting with `..` or `~`) of file
 * commands that resolve outside the session directory. A best effort: the
 * command still needs the bash permission, and rules remain the boundary.
 */
export function outsidePaths(command: string, cwd: string, directory: string): string[] {
  const home = process.env['HOME'] ?? '/'
  const out = new Set<string>()
  for (const { name, args } of simpleCommands(command)) {
    if (!FILE_COMMANDS.has(name)) continue
    for (const word of args) {
      if (word.startsWith('-') || !(word.includes('/') || word.startsWith('..') || word.startsWith('~'))) continue
      const path = word.startsWith('~') ? join(home, word.slice(1)) : word
      const resolved = resolveInWorkspace(directory, isAbsolute(path) ? path : join(cwd, path))
      if (!resolved.inside) out.add(resolved.real)
    }
  }
  return [...out]
}
