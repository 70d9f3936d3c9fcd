import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { runToEnd } from '../cli/helpers.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { audit } from '../../src/runtime/audit/audit.js'
import { TRANSCRIPT } from '../compaction/helpers.js'
import { type AuditWorld, auditWorld, sendAgain } from './helpers.js'

/**
 * session.context at a step.started is the request that step sent, byte for
 * byte — rebuilt from the log alone, on a later day — and `audit` agrees
 * with every recorded digest (docs/AUDIT.md).
 */

let world: AuditWorld | undefined
afterEach(async () => {
  await world?.close()
  world = undefined
})

const text = (t: string) => [{ type: 'text' as const, text: t }]

const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='

/**
 * A session with tool calls, steering, a noReply note, files attached by path (text and an image), an MCP
 * tool's image, a max-steps last step and a compaction.
 */
async function recordedSession(w: AuditWorld): Promise<string> {
  const id = w.session()
  writeFileSync(join(w.directory, 'notes.txt'), 'remember the milk\n')
  writeFileSync(join(w.directory, 'pixel.png'), Buffer.from(PIXEL, 'base64'))
  await w.runtime.submit(id, {
    parts: [
      { type: 'text', text: 'show the picture' },
      { type: 'file', path: 'notes.txt' },
      { type: 'file', path: 'pixel.png' },
    ],
  })
  await w.runtime.idle(id)
  writeFileSync(join(w.directory, 'notes.txt'), 'changed on disk since') // the log, not the disk, is what was sent
  // steering: a steer sent while the slow tool runs reaches the model at the next step
  await w.runtime.submit(id, { parts: text('wait a little') })
  await new Promise((r) => setTimeout(r, 100))
  await w.runtime.submit(id, { parts: text('and then say hi'), delivery: 'steer' })
  await w.runtime.idle(id)
  await w.runtime.submit(id, { parts: text('a note for later'), noReply: true })
  // the budget of 3 runs out: the third step has tools off and the max-steps note
  await w.runtime.submit(id, { parts: text('loop forever') })
  await w.runtime.idle(id)
  await w.runtime.compact(id)
  await w.runtime.idle(id)
  await w.runtime.submit(id, { parts: text('after the summary') })
  await w.runtime.idle(id)
  return id
}

const STEPS = [
  { when: TRANSCRIPT, text: '## Objective\n- keep going' },
  { when: { userContains: 'show the picture', afterToolResult: false }, toolCalls: [{ name: 'ev_get-tiny-image' }] },
  { when: { userContains: 'show the picture', afterToolResult: true }, text: 'A tiny image.' },
  { when: { userContains: 'MAXIMUM STEPS' }, text: 'Stopping here.' },
  {
    when: { userContains: 'wait a little', afterToolResult: false },
    toolCalls: [{ name: 'slow', input: { ms: 400 } }],
  },
  { when: { userContains: 'loop forever' }, toolCalls: [{ name: 'lookup', input: { query: 'again' } }] },
  { when: { userContains: 'say hi' }, text: 'hi' },
  { text: 'ok', times: 100 },
]

describe('the request a step sent', () => {
  it('is what session.context returns at its step.started, byte for byte, and audit verifies every step', async () => {
    world = await auditWorld(STEPS)
    const w = world
    const id = await recordedSession(w)
    const steps = w.store
      .readSession(id)
      .filter((e): e is Extract<StoredEvent, { type: 'step.started' }> => e.type === 'step.started')
    const all = w.store.readSession(id)
    // what the scenario had to contain
    expect(steps.length).toBe(w.calls.length)
    expect(steps.some((s) => s.data.context?.lastStep)).toBe(true)
    expect(steps.some((s) => s.data.context?.messages !== undefined)).toBe(true) // the compaction's own request
    expect(all.some((e) => e.type === 'input.accepted' && e.data.delivery === 'steer')).toBe(true)
    expect(all.some((e) => e.type === 'compaction.completed')).toBe(true)
    expect(all.some((e) => e.type === 'tool.completed' && e.data.attachments?.some((a) => a.type === 'image'))).toBe(
      true,
    )
    // the model received the file's text, the image file and the MCP image, not notes about them
    expect(w.calls[0]).toContain('remember the milk')
    expect(w.calls[0]).toContain('"mediaType":"image/png"')
    expect(w.calls[1]).toContain('"type":"image-data"')

    for (const [i, step] of steps.entries()) {
      const context = await w.runtime.context(id, step.seq)
      expect(context.step).toMatchObject({ seq: step.seq, contextDigest: step.data.contextDigest })
      expect(context.digest).toBe(step.data.contextDigest)
      expect(await sendAgain(context, step.data.settings)).toBe(w.calls[i])
    }
    const report = await audit(sqlitePorts(w.store), [id])
    expect(report).toMatchObject({ sessions: 1, steps: steps.length, verified: steps.length, unrecorded: 0 })
    expect(report.mismatches).toEqual([])
  })

  it('records the system prompt and tools once, however many steps use them', async () => {
    world = await auditWorld(STEPS)
    const w = world
    const id = w.session()
    for (const t of ['one', 'two', 'three']) {
      await w.runtime.submit(id, { parts: text(t) })
      await w.runtime.idle(id)
    }
    const sources = w.store
      .readSession(id)
      .flatMap((e) => (e.type === 'step.started' && e.data.context ? [e.data.context] : []))
    expect(sources).toHaveLength(3)
    expect(new Set(sources.map((s) => s.tools)).size).toBe(1)
    // the environment's date moves (this world's clock reads the time of day), so each step has its own prompt
    expect(new Set(sources.map((s) => s.system)).size).toBe(3)
    expect(sources.map((s) => w.store.blobs.get(s.system)?.includes('<env>'))).toEqual([true, true, true])
  })

  it('chronicle audit exits 0 on the recorded log, and 1 naming the step after one byte of a recorded prompt changes', async () => {
    const data = mkdtempSync(join(tmpdir(), 'chronicle-audit-cli-'))
    try {
      world = await auditWorld(STEPS, join(data, 'chronicle.db'))
      const id = await recordedSession(world)
      const steps = world.calls.length
      await world.close()
      world = undefined

      const clean = await runToEnd(['audit', '--all'], { CHRONICLE_DATA_DIR: data })
      expect([clean.code, clean.stdout]).toEqual([
        0,
        expect.stringMatching(
          new RegExp(`^1 sessions, ${steps} model steps: ${steps} verified, 0 mismatches \\(\\d+ ms\\)\\n$`),
        ),
      ])

      // an attacker with the database file: the blob's triggers dropped, one byte of the system prompt changed
      const db = new Database(join(data, 'chronicle.db'))
      db.exec('DROP TRIGGER blobs_no_update')
      const { hash, content } = db
        .prepare("SELECT hash, content FROM blobs WHERE content LIKE '%<env>%' LIMIT 1")
        .get() as {
        hash: string
        content: string
      }
      db.prepare('UPDATE blobs SET content = ? WHERE hash = ?').run(content.replace('<env>', '<enV>'), hash)
      db.close()

      const tampered = await runToEnd(['audit', id], { CHRONICLE_DATA_DIR: data })
      expect(tampered.code).toBe(1)
      expect(tampered.stdout).toMatch(
        new RegExp(`^MISMATCH ${id} seq \\d+ step \\d+ \\(msg_\\w+\\): blob ${hash} does not match its hash`, 'm'),
      )
      expect(tampered.stdout).toMatch(/\d+ verified, [1-9]\d* mismatches/)

      const unknown = await runToEnd(['audit', 'ses_nope'], { CHRONICLE_DATA_DIR: data })
      expect([unknown.code, unknown.stderr]).toEqual([1, 'chronicle: no session ses_nope\n'])
    } finally {
      rmSync(data, { recursive: true, force: true })
    }
  })
})
