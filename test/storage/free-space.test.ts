import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { canMount, clientOf, serveOnTmpfs as serveTmpfs } from './tmpfs-server.js'

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

const mountable = canMount(root)
const serveOnTmpfs = (size: string, opts: Parameters<typeof serveTmpfs>[2] = {}) => serveTmpfs(root, size, opts)

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

describe.runIf(mountable)('a disk that fills while serving', () => {
  it('refuses appends with STORAGE_FULL, says so on /health, loses nothing acknowledged, and goes on once there is space', async () => {
    const config = join(root, 'small-bound.json')
    writeFileSync(config, JSON.stringify({ limits: { minFreeBytes: 1024 * 1024 } }))
    const script = join(root, 'script.json')
    writeFileSync(script, JSON.stringify({ steps: [{ text: 'the first answer' }, { text: 'the second answer' }] }))
    const workdir = mkdtempSync(join(root, 'work-'))
    writeFileSync(join(workdir, 'README'), 'a small project\n')
    const seen: Record<string, unknown> = {}
    const served = await serveOnTmpfs('24m', {
      config,
      env: { CHRONICLE_MODEL: `scripted:${script}` },
      async whileUp(server) {
        const { call, fill, free } = clientOf(server)
        const created = await call('POST', '/sessions', { title: 'before the disk filled', directory: workdir })
        const id = (created.body.session as { id: string }).id
        seen.before = (
          await call('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'one' }] })
        ).body

        fill()
        seen.create = await call('POST', '/sessions', { title: 'while full' })
        seen.input = await call('POST', `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: 'two' }] })
        seen.healthFull = (await call('GET', '/health')).body

        free()
        seen.after = (
          await call('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'three' }] })
        ).body
        seen.healthAfter = (await call('GET', '/health')).body
        const history = await call('GET', `/sessions/${id}/events?limit=1000`)
        seen.inputs = (history.body.events as { type: string; data: { parts?: { text: string }[] } }[])
          .filter((e) => e.type === 'input.accepted')
          .map((e) => e.data.parts?.[0]?.text)
      },
    })
    expect(served.stderr).not.toContain('the spec failed')
    expect(seen.before).toMatchObject({ outcome: 'idle' })
    const full = { status: 507, body: expect.objectContaining({ code: 'STORAGE_FULL' }) }
    expect(seen.create).toEqual(full)
    expect(seen.input).toEqual(full)
    expect(seen.healthFull).toMatchObject({ status: 'degraded', reason: expect.stringMatching(/^STORAGE_FULL: /) })
    expect(seen.after).toMatchObject({ outcome: 'idle' })
    expect(seen.healthAfter).toMatchObject({ status: 'ok' })
    // acknowledged inputs are there, the refused one is not
    expect(seen.inputs).toEqual(['one', 'three'])
    expect(served.code).toBe(0)
  })
})

describe.runIf(mountable)('a disk that fills in the middle of a run', () => {
  it('the run waits, busy, and ends with STORAGE_FULL recorded once there is room, what it left open closed; the next turn runs', async () => {
    const config = join(root, 'small-bound-run.json')
    writeFileSync(config, JSON.stringify({ limits: { minFreeBytes: 1024 * 1024 } }))
    const script = join(root, 'slow-script.json')
    const answer = 'a long answer streamed slowly, chunk by chunk, over a second or two of time'
    writeFileSync(script, JSON.stringify({ chunkSize: 4, delayMs: 20, steps: [{ text: answer }, { text: 'next' }] }))
    const workdir = mkdtempSync(join(root, 'work-'))
    const seen: Record<string, unknown> = {}
    const served = await serveOnTmpfs('24m', {
      config,
      env: { CHRONICLE_MODEL: `scripted:${script}` },
      async whileUp(server) {
        const { fill, free, ...api } = clientOf(server)
        const call = async (method: string, path: string, body?: unknown) => (await api.call(method, path, body)).body
        const status = async (id: string) =>
          ((await call('GET', `/sessions/${id}`)).session as { status: string }).status
        const id = ((await call('POST', '/sessions', { directory: workdir })).session as { id: string }).id
        const turn = call('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'one' }] })
        // fill the disk once the answer is streaming
        for (;;) {
          const events = (await call('GET', `/sessions/${id}/events?limit=1000`)).events as { type: string }[]
          if (events.some((e) => e.type === 'text.delta')) break
          await new Promise((r) => setTimeout(r, 20))
        }
        fill()
        await new Promise((r) => setTimeout(r, 2000)) // the answer would have ended by now
        seen.whileFull = await status(id)
        free()
        seen.turn = await turn
        seen.after = await status(id)
        const events = (await call('GET', `/sessions/${id}/events?limit=1000`)).events as {
          type: string
          data: Record<string, unknown>
        }[]
        seen.tail = events.slice(-3).map((e) => e.type)
        seen.finished = events.find((e) => e.type === 'run.finished')?.data
        seen.next = await call('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'two' }] })
      },
    })
    expect(served.stderr).not.toContain('the spec failed')
    expect(seen.whileFull).toBe('busy')
    expect(seen.after).toBe('idle')
    expect(seen.tail).toEqual(['text.ended', 'message.completed', 'run.finished'])
    expect(seen.finished).toMatchObject({ outcome: 'failed', error: { kind: 'STORAGE_FULL' } })
    expect(seen.turn).toMatchObject({ outcome: 'failed', error: { kind: 'STORAGE_FULL' } })
    expect(seen.next).toMatchObject({ outcome: 'idle', text: 'next' })
    expect(served.code).toBe(0)
  })
})
