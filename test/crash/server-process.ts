import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/**
 * The real server as a child process (`node --import tsx test/crash/server.ts`,
 * the composition root configured from the environment), started and killed
 * with SIGKILL — no shutdown hook runs, exactly like a crash.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const ENTRY = fileURLToPath(new URL('./server.ts', import.meta.url))

export interface ServerProcess {
  readonly url: string
  readonly recovered: { resumed?: number; cancelled?: number; failed?: number; woken?: number }
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  /** stderr so far (shown when something goes wrong) */
  stderr(): string
  kill(signal: 'SIGKILL' | 'SIGTERM'): Promise<number | null>
}

export async function startServer(env: Record<string, string>, timeoutMs = 60_000): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', ENTRY], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let err = ''
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-20_000)
  })
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code, signal) => resolve(signal ? null : code)),
  )
  const line = await new Promise<string>((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => reject(new Error(`server did not start in ${timeoutMs} ms\n${err}`)), timeoutMs)
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /crash-server listening .*\n/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve(m[0])
      }
    })
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited (${code}) before listening\n${err}`))
    })
  })
  const m = /listening (\S+) (.*)$/.exec(line.trim())
  if (!m?.[1]) throw new Error(`unexpected server line: ${line}`)
  return {
    url: m[1],
    recovered: JSON.parse(m[2] ?? '{}') as ServerProcess['recovered'],
    child,
    exited,
    stderr: () => err,
    async kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    },
  }
}
