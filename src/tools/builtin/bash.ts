import { type ChildProcess, spawn as nodeSpawn, type SpawnOptions } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { z } from 'zod'
import { dirname, isAbsolute, join } from 'node:path'
import { accessPath, resolveInWorkspace } from '../paths.js'
import { drain, groupGone, signalGroup } from './process-group.js'
import { shellWords, splitShellCommand } from '../permission/shell-split.js'
import { scrubEnv } from '../scrub-env.js'
import { defineTool, ToolFailure } from '../tool.js'
import { truncateOutput } from '../truncate.js'

export const DEFAULT_TIMEOUT_MS = 120_000
export const MAX_TIMEOUT_MS = 600_000
const PREVIEW_CHARS = 30_000
const PROGRESS_EVERY_MS = 250

const parameters = z.object({
  command: z.string().min(1).describe('The shell command to run (bash syntax)'),
  timeout: z
    .number()
    .int()
    .min(1)
    .max(MAX_TIMEOUT_MS)
    .optional()
    .describe(`Timeout in milliseconds (default ${DEFAULT_TIMEOUT_MS}, maximum ${MAX_TIMEOUT_MS}); on timeout the whole process group is killed`),
  workdir: z.string().min(1).optional().describe('The directory to run in (default: the session directory); use this instead of `cd dir &&`'),
  description: z.string().max(200).optional().describe('What the command does, in 5-10 words (shown to the user)'),
})

export interface BashToolDeps {
  readonly dataDir: string
  /** roots no tool may touch (default: the data directory) */
  readonly forbidden?: readonly string[]
  /** the environment commands start from, before scrubbing (default process.env) */
  readonly env?: NodeJS.ProcessEnv
  readonly shell?: string
  /** grace between SIGTERM and SIGKILL of the process group */
  readonly killGraceMs?: number
  readonly spawn?: (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess
}

/**
 * bash: runs a command in its own process group (detached ⇒ setsid), with a
 * scrubbed environment. Live output is reported as progress; on timeout or
 * cancel the WHOLE group gets SIGTERM, then SIGKILL after a grace — killing
 * only the shell would leave its children running.
 */
export function createBashTool(deps: BashToolDeps) {
  const shell = deps.shell ?? (existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh')
  const spawn = deps.spawn ?? nodeSpawn
  const grace = deps.killGraceMs ?? 2000
  const forbidden = deps.forbidden ?? [deps.dataDir]
  return defineTool({
    id: 'bash',
    permission: 'bash',
    description: `Runs a shell command in the session directory (or workdir) and returns its combined stdout/stderr and exit code. Default timeout ${DEFAULT_TIMEOUT_MS / 1000} s; long output is truncated with the full text saved to a file. Use the read/grep/glob/list/edit tools for files rather than cat/sed/find.`,
    parameters,
    async execute(args, ctx) {
      const cwd = args.workdir ? (await accessPath(ctx, args.workdir, { forbidden })).real : ctx.directory
      if (!existsSync(cwd) || !statSync(cwd).isDirectory()) throw new ToolFailure('failed', `workdir does not exist: ${args.workdir ?? cwd}`)
      const outside = outsidePaths(args.command, cwd, ctx.directory)
      if (outside.length > 0) {
        await ctx.ask({
          permission: 'external_directory',
          patterns: outside,
          always: [...new Set(outside.map((p) => join(dirname(p), '*')))],
          metadata: { command: args.command },
        })
      }
      await ctx.ask({ permission: 'bash', patterns: [args.command], metadata: { command: args.command, description: args.description } })
      if (ctx.abort.aborted) throw new ToolFailure('aborted', 'The command was cancelled before it started.')

      const timeout = args.timeout ?? DEFAULT_TIMEOUT_MS
      const child = spawn(shell, ['-c', args.command], {
        cwd,
        env: scrubEnv(deps.env ?? process.env),
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      let output = ''
      let lastProgress = 0
      let progressTimer: NodeJS.Timeout | undefined
      const report = () => {
        progressTimer = undefined
        lastProgress = Date.now()
        ctx.progress({ output: output.slice(-PREVIEW_CHARS), description: args.description ?? args.command })
      }
      const onData = (chunk: Buffer) => {
        output += chunk.toString('utf8')
        if (progressTimer) return
        const wait = Math.max(0, PROGRESS_EVERY_MS - (Date.now() - lastProgress))
        progressTimer = setTimeout(report, wait)
      }
      child.stdout?.on('data', onData)
      child.stderr?.on('data', onData)

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
      if (progressTimer) {
        clearTimeout(progressTimer)
        report() // the live view gets the final output before the result
      }
      if (ended) {
        signalGroup(child, 'SIGKILL') // whatever ignored SIGTERM goes now
        await groupGone(child, 1000)
      }

      const notes: string[] = []
      if (ended === 'timeout') notes.push(`The command timed out after ${timeout} ms; its process group was killed.`)
      if (ended === 'abort') notes.push('The command was cancelled; its process group was killed.')
      notes.push(exit.code !== null ? `exit code: ${exit.code}` : `terminated by signal ${exit.signal}`)
      const full = `${output}${output.endsWith('\n') || output === '' ? '' : '\n'}<bash_metadata>\n${notes.join('\n')}\n</bash_metadata>`
      const truncated = truncateOutput(full, { dataDir: deps.dataDir, sessionId: ctx.sessionId, name: `bash_${ctx.partId}`, keep: "tail" })
      if (ended === 'abort') throw new ToolFailure('aborted', truncated.output)
      return {
        output: truncated.output,
        title: args.description ?? args.command,
        metadata: {
          exitCode: exit.code,
          ...(exit.signal && { signal: exit.signal }),
          timedOut: ended === 'timeout',
          pid: child.pid,
          truncated: truncated.truncated,
          ...(truncated.outputPath && { outputPath: truncated.outputPath }),
        },
      }
    },
  })
}

/** Programs whose path arguments we check against the workspace (OpenCode scans the same kind). */
const FILE_COMMANDS = new Set([
  'cd', 'ls', 'cat', 'head', 'tail', 'less', 'more', 'rm', 'rmdir', 'cp', 'mv', 'mkdir', 'touch', 'chmod', 'chown', 'ln',
  'tee', 'find', 'grep', 'rg', 'sed', 'awk', 'diff', 'tar', 'zip', 'unzip', 'source', '.',
])

/**
 * Path-like arguments (containing `/`, or starting with `..` or `~`) of file
 * commands that resolve outside the session directory. A best effort: the
 * command still needs the bash permission, and rules remain the boundary.
 */
export function outsidePaths(command: string, cwd: string, directory: string): string[] {
  const home = process.env['HOME'] ?? '/'
  const out = new Set<string>()
  for (const sub of splitShellCommand(command).commands) {
    const words = shellWords(sub)
    if (!words) continue
    const start = words.findIndex((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w))
    const program = (words[start] ?? '').split('/').at(-1) ?? ''
    if (!FILE_COMMANDS.has(program)) continue
    for (const word of words.slice(start + 1)) {
      if (word.startsWith('-') || !(word.includes('/') || word.startsWith('..') || word.startsWith('~'))) continue
      const path = word.startsWith('~') ? join(home, word.slice(1)) : word
      const resolved = resolveInWorkspace(directory, isAbsolute(path) ? path : join(cwd, path))
      if (!resolved.inside) out.add(resolved.real)
    }
  }
  return [...out]
}

