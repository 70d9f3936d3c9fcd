import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { openStore } from '../../src/projections/open.js'
import { getParts } from '../../src/projections/queries/read-model.js'
import { verify } from '../../src/projections/upkeep/verify.js'
import { tempDirs } from './fixtures/store.js'

const dirs = tempDirs()
afterEach(() => dirs.cleanup())

const child = fileURLToPath(new URL('./fixtures/durable-child.ts', import.meta.url))

describe('durability', () => {
  it('every seq a child process was told is durable survives SIGKILL mid-stream', async () => {
    const path = join(dirs.make(), 'durable.db')
    const proc = spawn(process.execPath, ['--import', 'tsx', child, path], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    proc.stderr.on('data', (d: Buffer) => (stderr += d))
    const acknowledged: number[] = []
    let partial = ''
    await new Promise<void>((resolve, reject) => {
      proc.on('exit', (code) => reject(new Error(`child exited early (${code}): ${stderr}`)))
      proc.stdout.on('data', (d: Buffer) => {
        const lines = (partial + d.toString()).split('\n')
        partial = lines.pop() ?? ''
        for (const line of lines) acknowledged.push(Number(line))
        // Kill it mid-stream: it is still appending when the signal lands.
        if (acknowledged.length >= 300) resolve()
      })
    })
    proc.removeAllListeners('exit')
    const exited = new Promise((resolve) => proc.on('exit', (_code, signal) => resolve(signal)))
    proc.kill('SIGKILL')
    expect(await exited).toBe('SIGKILL')

    const store = openStore(path)
    expect(store.asCommitted.reader().pragma('integrity_check', { simple: true })).toBe('ok')
    const seqs = new Set(store.readSession('ses_durable').map((e) => e.seq))
    expect(acknowledged.filter((seq) => !seqs.has(seq))).toEqual([])
    // No gaps: seq 1..head, and the read model equals the fold of what survived.
    expect([...seqs]).toEqual(Array.from({ length: store.head() }, (_, i) => i + 1))
    expect(store.head()).toBeGreaterThanOrEqual(Math.max(...acknowledged))
    expect(verify(store).differences).toEqual([])
    const text = getParts(store, 'ses_durable')[0]
    expect(text).toMatchObject({ type: 'text', ended: false })
    store.close()
  })
})
