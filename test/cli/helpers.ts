import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** Runs the real `chronicle` bin as a child process. */

export const BIN = fileURLToPath(new URL('../../bin/chronicle.mjs', import.meta.url))

export interface Proc {
  readonly child: ChildProcessWithoutNullStreams
  stdout: string
  stderr: string
  readonly exited: Promise<number | null>
  /** resolves once stdout matches */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>
}

export function run(args: string[], env: Record<string, string>, cwd?: string): Proc {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
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
): Promise<{ code: number; stdout: string; stderr: string }> {
  const { main } = await import('../../src/cli.js')
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]))
  Object.assign(process.env, env)
  let stdout = ''
  let stderr = ''
  try {
    const code = await main(args, { write: (t) => void (stdout += t), error: (t) => void (stderr += t) })
    return { code, stdout, stderr }
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}
