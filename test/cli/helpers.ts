import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createRequire } from 'node:module'
import { Readable } from 'node:stream'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { painter, type Terminal } from '../../src/cli/terminal.js'

/**
 * Runs `chronicle` as a child process: src/cli.ts through tsx, so a test sees
 * the source as it is now — no build first, never a stale dist/. The real bin
 * (bin/chronicle.mjs → dist/cli.js) is run on the packed and installed
 * package by pack.test.ts.
 */

export const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url))

/** tsx's loader as a file URL: a bare `--import tsx` is looked up from the child's working directory */
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href

/** node's arguments for `chronicle <args>` */
export const cliArgs = (args: readonly string[]): string[] => ['--import', TSX, CLI, ...args]

export interface Proc {
  readonly child: ChildProcessWithoutNullStreams
  stdout: string
  stderr: string
  readonly exited: Promise<number | null>
  /** resolves once stdout matches */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
}

export function run(args: string[], env: Record<string, string>, cwd?: string): Proc {
  const child = spawn(process.execPath, cliArgs(args), {
    // CHRONICLE_CLI: run main(), as bin/chronicle.mjs asks
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', CHRONICLE_CLI: '1', ...env },
    ...(cwd && { cwd }),
  })
  const proc: Proc = {
    child,
    stdout: '',
    stderr: '',
    exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
    waitFor(pattern, timeoutMs = 20_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = proc.stdout.match(pattern)
          if (m) {
            clearTimeout(timer)
            child.stdout.off('data', check)
            resolve(m)
          }
        }
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for ${pattern}; stdout: ${proc.stdout}\nstderr: ${proc.stderr}`)),
          timeoutMs,
        )
        child.stdout.on('data', check)
        check()
      })
    },
  }
  child.stdout.setEncoding('utf8')
  child.stderr.setEncoding('utf8')
  child.stdout.on('data', (d: string) => (proc.stdout += d))
  child.stderr.on('data', (d: string) => (proc.stderr += d))
  return proc
}

/** Runs a command to completion. */
export async function runToEnd(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const p = run(args, env)
  const code = await p.exited
  return { code, stdout: p.stdout, stderr: p.stderr }
}

/** Runs a client command in this process (as the bin would), capturing its output; env is applied for the call. */
export async function runInProcess(
  args: string[],
  env: Record<string, string> = {},
  stdin = '',
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { main } = await import('../../src/cli.js')
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]))
  Object.assign(process.env, env)
  let stdout = ''
  let stderr = ''
  try {
    const code = await main(args, {
      stdout: textTerminal((t) => void (stdout += t)),
      stderr: textTerminal((t) => void (stderr += t)),
      stdin: Readable.from(stdin === '' ? [] : [Buffer.from(stdin)]),
    })
    return { code, stdout, stderr }
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}

/** A terminal that is a pipe: plain text, no wrapping. */
export function textTerminal(write: (text: string) => void): Terminal {
  return { write, line: (text = '') => write(`${text}\n`), paint: painter(false), width: undefined }
}

/** `chronicle serve` as a child process in a temp directory, with the scripted model playing `script`. */
export interface ScriptedServer {
  readonly dir: string
  /** what a client command needs: the data dir (its token) and CHRONICLE_URL */
  readonly env: Record<string, string>
  readonly url: string
  readonly server: Proc
  stop(): Promise<void>
}

export async function serveScripted(prefix: string, script: unknown): Promise<ScriptedServer> {
  const dir = mkdtempSync(join(tmpdir(), `chronicle-${prefix}-`))
  writeFileSync(join(dir, 'script.json'), JSON.stringify(script))
  const base = {
    CHRONICLE_DATA_DIR: join(dir, 'data'),
    CHRONICLE_PORT: '0',
    CHRONICLE_MODEL: `scripted:${join(dir, 'script.json')}`,
    CHRONICLE_LOG_LEVEL: 'warn',
  }
  const server = run(['serve'], base, dir)
  const url = (await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/))[1] as string
  return {
    dir,
    env: { ...base, CHRONICLE_URL: url },
    url,
    server,
    async stop() {
      server.child.kill('SIGTERM')
      await server.exited
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
