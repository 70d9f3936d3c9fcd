import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import { cliArgs } from '../cli/helpers.js'

/**
 * The real `chronicle serve` with its data directory on a small tmpfs, mounted for the test in a private
 * mount namespace (`unshare -rm`), so the filesystem really is that small — and, if asked, the session
 * directory on a second one (`<mount>/work`). `mountable` is false where this machine cannot mount one (no
 * user namespaces): the specs then say so and do not run — nothing else here can fill a filesystem for real.
 */
export function canMount(root: string): boolean {
  const probe = spawnSync('unshare', ['-rm', 'sh', '-c', `mount -t tmpfs -o size=1m none "${root}"`])
  if (probe.status !== 0)
    console.warn(`tmpfs specs not run: cannot mount a tmpfs here (${String(probe.stderr).trim()})`)
  return probe.status === 0
}

export interface TmpfsServer {
  readonly url: string
  readonly pid: number
  readonly mount: string
}

export interface Served {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly health?: number
}

/** `chronicle serve` with its data dir on a fresh tmpfs of `size`: its exit, after it refused or once it listened. */
export function serveOnTmpfs(
  root: string,
  size: string,
  opts: {
    config?: string
    env?: Record<string, string>
    /** a second tmpfs of this size at `<mount>/work`, for a session directory */
    workspace?: string
    whileUp?: (server: TmpfsServer) => Promise<void>
  } = {},
): Promise<Served> {
  const mount = mkdtempSync(join(root, 'fs-'))
  const mounts =
    'mount -t tmpfs -o "size=$1" none "$2" && if [ -n "$3" ]; then mkdir "$2/work" && mount -t tmpfs -o "size=$3" none "$2/work"; fi && shift 3 && exec "$@"'
  const child = spawn(
    'unshare',
    [
      ...['-rm', 'sh', '-c', mounts, 'sh', size, mount, opts.workspace ?? ''],
      ...[process.execPath, ...cliArgs(['serve', ...(opts.config ? ['--config', opts.config] : [])])],
    ],
    {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        CHRONICLE_CLI: '1', // run main(), as bin/chronicle.mjs asks
        CHRONICLE_DATA_DIR: join(mount, 'data'),
        CHRONICLE_PORT: '0',
        CHRONICLE_LOG_LEVEL: 'warn',
        ...opts.env,
      },
    },
  )
  return new Promise((resolve) => {
    let stdout = ''
    let stderr = ''
    let asked = false
    let health: number | undefined
    child.stdout.on('data', (d) => {
      stdout += d
      const url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1]
      // it answers, then stops as a server does on SIGTERM
      if (url && !asked) {
        asked = true
        void fetch(`${url}/health`)
          .then(async (r) => {
            health = r.status
            await opts.whileUp?.({ url, pid: child.pid as number, mount })
          })
          .catch((err: unknown) => {
            stderr += `the spec failed while the server was up: ${String(err)}\n`
          })
          .finally(() => child.kill('SIGTERM'))
      }
    })
    child.stderr.on('data', (d) => {
      stderr += d
    })
    child.on('exit', (code) => resolve({ code, stdout, stderr, health }))
  })
}

/**
 * What a spec does with a server on a tmpfs: call its API with its token, and fill its filesystem and free
 * it again — the mount is seen from here through the server process's root.
 */
export function clientOf({ url, pid, mount }: TmpfsServer) {
  const inside = (path: string) => `/proc/${pid}/root${join(mount, path)}`
  const token = readFileSync(inside('data/token'), 'utf8').trim()
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
  return {
    inside,
    async call(method: string, path: string, body?: unknown) {
      const res = await fetch(`${url}${path}`, {
        method,
        headers,
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })
      return { status: res.status, body: (await res.json()) as Record<string, unknown> }
    },
    /** writes until the filesystem is full */
    fill() {
      try {
        writeFileSync(inside('filler'), Buffer.alloc(64 * 1024 * 1024))
      } catch (err) {
        expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC')
      }
    },
    free: () => unlinkSync(inside('filler')),
  }
}
