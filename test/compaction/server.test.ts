import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { parseCommandArgs } from '../../src/cli/args.js'
import { compactCommand } from '../../src/cli/compact.js'
import { Client, startServer, type TestServer } from '../http/helpers.js'

/** Manual compaction through the real server: HTTP, WebSocket and the CLI, with the scripted model. */

const script = {
  steps: [{ when: { userContains: '<transcript>' }, text: 'SUMMARY: over the wire' }, { text: 'a1' }, { text: 'a2' }],
}

describe('manual compaction over the server', () => {
  let server: TestServer
  afterEach(() => server.close())

  async function sessionWithTwoTurns(): Promise<{
    id: string
    http: (method: string, path: string, body?: unknown) => Promise<{ status: number; json: Record<string, unknown> }>
  }> {
    const http = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(server.url + path, {
        method,
        headers: {
          authorization: `Bearer ${server.token}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      })
      return { status: res.status, json: (await res.json()) as Record<string, unknown> }
    }
    const created = await http('POST', '/sessions', {})
    const id = (created.json.session as { id: string }).id
    for (const text of ['one', 'two']) {
      const r = await http('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text }] })
      expect(r.status).toBe(200)
    }
    return { id, http }
  }

  async function until(check: () => Promise<boolean>): Promise<void> {
    for (let i = 0; i < 200; i++) {
      if (await check()) return
      await new Promise((r) => setTimeout(r, 20))
    }
    throw new Error('condition not reached in time')
  }

  it('POST /sessions/:id/compact requests it; the session compacts; WS session.compact does the same', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-compact-script-'))
    const file = join(dir, 'script.json')
    writeFileSync(file, JSON.stringify(script))
    server = await startServer({ CHRONICLE_MODEL: `scripted:${file}` })
    const { id, http } = await sessionWithTwoTurns()

    const r = await http('POST', `/sessions/${id}/compact`)
    expect(r.status).toBe(200)
    expect(r.json).toEqual({ compactionId: expect.any(String), seq: expect.any(Number), duplicate: false })
    const types = async () => {
      const page = await http('GET', `/sessions/${id}/events?after=0&limit=1000`)
      return page.json.events as { type: string; data: Record<string, unknown> }[]
    }
    await until(async () => (await types()).some((e) => e.type === 'compaction.completed'))
    const completed = (await types()).find((e) => e.type === 'compaction.completed')!
    expect(completed.data.compactionId).toBe(r.json.compactionId)

    const ws = await Client.connect(server.wsUrl, server.token)
    const reply = await ws.call('session.compact', { session: id })
    expect(reply).toMatchObject({ id: expect.any(String) })
    expect(JSON.stringify(reply)).toContain('compactionId')
    ws.close()
    await until(
      async () =>
        (await types()).filter(
          (e) =>
            e.type.startsWith('compaction.') && e.type !== 'compaction.requested' && e.type !== 'compaction.started',
        ).length === 2,
    )

    const missing = await http('POST', '/sessions/ses_nope/compact')
    expect(missing.status).toBe(404)
  })

  it('chronicle compact <id> waits for the outcome and reports it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-compact-script-'))
    const file = join(dir, 'script.json')
    writeFileSync(file, JSON.stringify(script))
    server = await startServer({ CHRONICLE_MODEL: `scripted:${file}` })
    const { id } = await sessionWithTwoTurns()
    const saved = { url: process.env.CHRONICLE_URL, token: process.env.CHRONICLE_TOKEN }
    process.env.CHRONICLE_URL = server.url
    process.env.CHRONICLE_TOKEN = server.token
    try {
      const lines: string[] = []
      const code = await compactCommand(parseCommandArgs('compact', [id], {}), { line: (l = '') => lines.push(l) }, 10)
      expect(code).toBe(0)
      expect(lines[0]).toMatch(/^compaction cmp_\S+ requested \(seq \d+\)$/)
      expect(lines[1]).toMatch(/^compacted: ~\d+ → ~\d+ tokens \(summary msg_\S+\)$/)
    } finally {
      for (const [k, v] of [
        ['CHRONICLE_URL', saved.url],
        ['CHRONICLE_TOKEN', saved.token],
      ] as const) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    }
  })
})
