import { sqliteLog } from '../../src/events/log.js'
import { afterEach, describe, expect, it } from 'vitest'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { sequentialIds } from '../../src/events/ids.js'
import { exportSession, importSessions } from '../../src/projections/transfer/export.js'
import { openStore } from '../../src/projections/open.js'
import { audit } from '../../src/runtime/audit/audit.js'
import { type AuditWorld, auditWorld } from './helpers.js'

/**
 * An export carries each event's chain hash and the blobs its model steps
 * were compiled from; an import checks both before appending anything, so
 * an imported session can be audited like one recorded here.
 */

let world: AuditWorld | undefined
afterEach(async () => {
  await world?.close()
  world = undefined
})

async function exported(): Promise<string> {
  world = await auditWorld([
    { when: { afterToolResult: false }, toolCalls: [{ name: 'lookup', input: { query: 'q' } }] },
    { text: 'done', times: 10 },
  ])
  const id = world.session()
  await world.runtime.submit(id, { parts: [{ type: 'text', text: 'look it up' }] })
  await world.runtime.idle(id)
  return exportSession(world.store, id)
}

const importInto = async (jsonl: string) => {
  const store = openStore(':memory:')
  try {
    const report = await importSessions(sqliteLog(store), sequentialIds(), jsonl)
    return { report, audited: await audit(sqlitePorts(store), [report.exported.sessionId]) }
  } finally {
    store.close()
  }
}

describe('export and import with the chain', () => {
  it('an imported session audits clean: every step rebuilt from the blobs the file carried', async () => {
    const jsonl = await exported()
    expect(jsonl).toMatch(/^\{"blob":"[0-9a-f]{64}","content":/m)
    const { audited } = await importInto(jsonl)
    expect(audited.steps).toBe(2)
    expect(audited).toMatchObject({ verified: 2, unrecorded: 0, mismatches: [] })
  })

  const edits: { name: string; edit: (lines: string[]) => void; reason: RegExp }[] = [
    {
      name: 'an event edited',
      edit: (lines) => {
        const i = lines.findIndex((l) => l.includes('"look it up"'))
        lines[i] = (lines[i] as string).replace('look it up', 'look it Up')
      },
      reason: /the hash does not match: this event, or an earlier one of session ses_\w+, was changed/,
    },
    {
      name: 'an event removed',
      edit: (lines) => {
        const i = lines.findIndex((l) => l.includes('"type":"run.started"'))
        lines.splice(i, 1)
      },
      reason: /the hash does not match|jumps from version/,
    },
    {
      name: 'a hash dropped',
      edit: (lines) => {
        lines[1] = (lines[1] as string).replace(/,"hash":"[0-9a-f]+"/, '')
      },
      reason: /the event carries no hash/,
    },
    {
      name: 'a blob edited',
      edit: (lines) => {
        const i = lines.findIndex((l) => l.startsWith('{"blob"'))
        lines[i] = (lines[i] as string).replace('"content":"', '"content":"x')
      },
      reason: /blob [0-9a-f]{64} does not match its hash/,
    },
    {
      name: 'a blob left out',
      edit: (lines) => {
        const i = lines.findIndex((l) => l.startsWith('{"blob"'))
        lines.splice(i, 1)
      },
      reason: /the step names blob [0-9a-f]{64}, which the file does not carry/,
    },
  ]
  it.each(edits)('refuses the file whole when $name', async ({ edit, reason }) => {
    const lines = (await exported()).trim().split('\n')
    edit(lines)
    const store = openStore(':memory:')
    try {
      await expect(importSessions(sqliteLog(store), sequentialIds(), lines.join('\n'))).rejects.toThrow(
        expect.objectContaining({ code: 'IMPORT_INVALID', message: expect.stringMatching(reason) }),
      )
      expect(store.head()).toBe(0) // nothing appended
    } finally {
      store.close()
    }
  })
})
