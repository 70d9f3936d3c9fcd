import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { cliArgs } from '../cli/helpers.js'

/**
 * Start-up with too little free space says so (docs/BACKUP.md "A full
 * disk"): the real `chronicle serve`, its data directory on a small tmpfs
 * mounted for the test in a private mount namespace (`unshare -rm`), so the
 * filesystem really is that small. Where this machine cannot mount one (no
 * user namespaces), the spec says so and does not run — nothing else here
 * can make a filesystem full for real.
 */
const root = mkdtempSync(join(tmpdir(), 'chronicle-free-space-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const probe = spawnSync('unshare', ['-rm', 'sh', '-c', `mount -t tmpfs -o size=1m none "${root}"`])
const mountable = probe.status === 0
if (!mountable) console.warn(`free-space spec not run: cannot mount a tmpfs here (${String(probe.stderr).trim()})`)

/** `chronicle serve` with its data dir on a fresh tmpfs of `size`: its exit, after it refused or once it listened. */
function serveOnTmpfs(size: string): Promise<{ code: number | null; stdout: string; stderr: string; health?: number }> {
  const mount = mkdtempSync(join(root, 'fs-'))
  const child = spawn(
    'unshare',
    [
      ...['-rm', 'sh', '-c', 'mount -t tmpfs -o "size=$1" none "$2" && shift 2 && exec "$@"', 'sh', size, mount],
      ...[process.execPath, ...cliArgs(['serve'])],
    ],
    {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        CHRONICLE_CLI: '1', // run main(), as bin/chronicle.mjs asks
        CHRONICLE_DATA_DIR: join(mount, 'data'),
        CHRONICLE_PORT: '0',
        CHRONICLE_LOG_LEVEL: 'warn',
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
        void fetch(`${url}/health`).then((r) => {
          health = r.status
          child.kill('SIGTERM')
        })
      }
    })
    child.stderr.on('data', (d) => {
      stderr += d
    })
    child.on('exit', (code) => resolve({ code, stdout, stderr, health }))
  })
}

describe.runIf(mountable)('start-up and free space', () => {
  it('refuses to start with less free space than limits.minFreeBytes, naming the directory, what is free and the bound', async () => {
    const served = await serveOnTmpfs('16m')
    expect(served.code).toBe(1)
    expect(served.stdout).toBe('')
    expect(served.stderr).toMatch(
      /^chronicle: only 1[56]\.\d MiB free on the filesystem of \S+\/data, below the 64\.0 MiB the server needs to start \(limits\.minFreeBytes\): free some space, or move the data directory \(CHRONICLE_DATA_DIR\)\n$/,
    )
  })

  it('starts when there is room', async () => {
    const served = await serveOnTmpfs('128m')
    expect(served.stdout).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/)
    expect(served.health).toBe(200)
    expect([served.code, served.stderr]).toEqual([0, ''])
  })
})
