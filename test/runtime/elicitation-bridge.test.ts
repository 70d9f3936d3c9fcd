import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { elicitationCommand } from '../../src/commands/elicitation.js'
import { sequentialIds } from '../../src/events/ids.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import {
  ABORTED_REASON,
  createElicitationBridge,
  type ElicitationBridge,
  ELICITATION_LIMITS,
  SHUTDOWN_REASON,
  WITHDRAWN_REASON,
} from '../../src/runtime/elicitation/bridge.js'
import { SHUTDOWN } from '../../src/runtime/abort-reasons.js'
import { mcpElicitationHandler } from '../../src/runtime/elicitation/mcp-handler.js'
import { checkElicitationContent } from '../../src/tools/mcp/elicitation-check.js'
import { createInFlightCalls } from '../../src/tools/mcp/in-flight.js'
import { createRedactor } from '../../src/tools/redact.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * The elicitation bridge over a real store (a SQLite file): a server's
 * question becomes `elicitation.requested` in the session of the call in
 * flight, the call waits for the committed answer, and an aborted call or a
 * withdrawn request closes it `cancel`. Questions over the bounds, or that
 * belong to no single call, are declined and never reach the log.
 */

let dir: string
let store: EventStore
let bridge: ElicitationBridge
let warnings: { obj: object; msg?: string }[]
const log = { warn: (obj: object, msg?: string) => void warnings.push({ obj, msg: msg as string }) }

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'chronicle-elicit-'))
  store = openStore(join(dir, 'chronicle.db'))
  warnings = []
  bridge = createElicitationBridge({ ports: sqlitePorts(store), ids: sequentialIds(), log })
  store.append('ses_1', [{ type: 'session.created', data: { directory: dir, agent: 'build', model: null } }], {
    meta: { actor: 'user' },
  })
})
afterEach(() => {
  bridge.close()
  store.close()
  rmSync(dir, { recursive: true, force: true })
})

const schema = { type: 'object' as const, properties: { name: { type: 'string' as const } }, required: ['name'] }
const ask = { server: 'booking', message: 'Who is it for?', requestedSchema: schema }
const callOf = (abort = new AbortController().signal) => ({
  sessionId: 'ses_1',
  partId: 'prt_1',
  callId: 'call_1',
  abort,
})
const logged = () =>
  store
    .readSession('ses_1')
    .filter((e) => e.type.startsWith('elicitation.'))
    .map((e) => ({ type: e.type, data: e.data, actor: e.meta.actor }))
const asked = async () => {
  for (let i = 0; i < 50 && logged().length === 0; i++) await new Promise((r) => setTimeout(r, 5))
}

describe('the elicitation bridge', () => {
  it('keeps the server’s secrets out of the log: a question echoing one is appended redacted', async () => {
    bridge.close()
    const secret = 'sk-live-0123456789abcdef'
    bridge = createElicitationBridge({
      ports: sqlitePorts(store),
      ids: sequentialIds(),
      log,
      redactor: createRedactor([{ name: 'docs access token', value: secret }]),
    })
    const hostile = {
      server: 'booking',
      message: `Confirm your token ${secret}`,
      requestedSchema: { type: 'object', properties: { ok: { type: 'boolean', description: `was ${secret}` } } },
    }
    void bridge.elicit(callOf(), hostile)
    await asked()
    const [requested] = logged()
    expect(JSON.stringify(requested)).not.toContain(secret)
    expect(requested?.data).toMatchObject({
      message: 'Confirm your token [redacted:docs access token]',
      requestedSchema: { properties: { ok: { description: 'was [redacted:docs access token]' } } },
    })
  })

  it('asks in the call’s session and resolves with the answer a client commits', async () => {
    const reply = bridge.elicit(callOf(), ask)
    await asked()
    const [requested] = store.readSession('ses_1').filter((e) => e.type === 'elicitation.requested')
    expect(requested?.data).toEqual({
      elicitationId: 'eli_000001',
      server: 'booking',
      message: 'Who is it for?',
      requestedSchema: schema,
      partId: 'prt_1',
      callId: 'call_1',
    })
    expect(requested?.meta).toEqual({ actor: 'tool', call: 'call_1', request: 'eli_000001' })
    await elicitationCommand(
      sqlitePorts(store),
      'ses_1',
      { type: 'answer', elicitationId: 'eli_000001', action: 'accept', content: { name: 'Ada' } },
      { actor: 'user' },
      checkElicitationContent,
    )
    expect(await reply).toEqual({ action: 'accept', content: { name: 'Ada' } })
  })

  it('a sub-agent’s call asks in the top session of its chain, naming the child’s call in `from`', async () => {
    store.append(
      'ses_child',
      [
        {
          type: 'session.created',
          data: { directory: dir, agent: 'explore', model: null, parent: { sessionId: 'ses_1', callId: 'call_task' } },
        },
      ],
      { meta: { actor: 'runtime' } },
    )
    const reply = bridge.elicit({ ...callOf(), sessionId: 'ses_child', partId: 'prt_9', callId: 'call_9' }, ask)
    await asked()
    expect(logged()).toEqual([
      {
        type: 'elicitation.requested',
        data: {
          ...ask,
          elicitationId: 'eli_000001',
          from: { sessionId: 'ses_child', partId: 'prt_9', callId: 'call_9' },
        },
        actor: 'tool',
      },
    ])
    expect(store.readSession('ses_child').map((e) => e.type)).toEqual(['session.created'])
    await elicitationCommand(
      sqlitePorts(store),
      'ses_1',
      { type: 'answer', elicitationId: 'eli_000001', action: 'decline' },
      { actor: 'user' },
      checkElicitationContent,
    )
    expect(await reply).toEqual({ action: 'decline' })
  })

  it('an aborted call closes its question as cancel (actor runtime)', async () => {
    const abort = new AbortController()
    const reply = bridge.elicit(callOf(abort.signal), ask)
    await asked()
    abort.abort()
    expect(await reply).toEqual({ action: 'cancel' })
    expect(logged().at(-1)).toEqual({
      type: 'elicitation.answered',
      data: { elicitationId: 'eli_000001', action: 'cancel', reason: ABORTED_REASON },
      actor: 'runtime',
    })
  })

  it('a shutdown (the run aborted for a restart) closes it with that reason', async () => {
    const abort = new AbortController()
    const reply = bridge.elicit(callOf(abort.signal), ask)
    await asked()
    abort.abort(SHUTDOWN)
    expect(await reply).toEqual({ action: 'cancel' })
    expect(logged().at(-1)?.data).toEqual({ elicitationId: 'eli_000001', action: 'cancel', reason: SHUTDOWN_REASON })
  })

  it('a request the server withdraws is closed as cancel, with that reason', async () => {
    const withdrawn = new AbortController()
    const reply = bridge.elicit(callOf(), ask, withdrawn.signal)
    await asked()
    withdrawn.abort()
    expect(await reply).toEqual({ action: 'cancel' })
    expect(logged().at(-1)?.data).toEqual({ elicitationId: 'eli_000001', action: 'cancel', reason: WITHDRAWN_REASON })
  })

  it('a question over the bounds is declined, logged, and never appended', async () => {
    const long = { ...ask, message: 'x'.repeat(ELICITATION_LIMITS.messageChars + 1) }
    expect(await bridge.elicit(callOf(), long)).toEqual({ action: 'decline' })
    const fields = Object.fromEntries(
      Array.from({ length: ELICITATION_LIMITS.fields + 1 }, (_, i) => [`f${i}`, { type: 'boolean' }]),
    )
    const wide = { ...ask, requestedSchema: { type: 'object', properties: fields } }
    expect(await bridge.elicit(callOf(), wide)).toEqual({ action: 'decline' })
    const name = { ...ask, requestedSchema: { type: 'object', properties: { ['n'.repeat(101)]: { type: 'string' } } } }
    expect(await bridge.elicit(callOf(), name)).toEqual({ action: 'decline' })
    expect(logged()).toEqual([])
    expect(warnings.map((w) => (w.obj as { reason: string }).reason)).toEqual([
      `its message is ${ELICITATION_LIMITS.messageChars + 1} characters (limit ${ELICITATION_LIMITS.messageChars})`,
      `its form has ${ELICITATION_LIMITS.fields + 1} fields (limit ${ELICITATION_LIMITS.fields})`,
      `a field name is empty or over ${ELICITATION_LIMITS.fieldNameChars} characters`,
    ])
  })

  it('a question for a session that does not exist is declined', async () => {
    expect(await bridge.elicit({ ...callOf(), sessionId: 'ses_gone' }, ask)).toEqual({ action: 'decline' })
    expect(warnings[0]?.msg).toBe('mcp elicitation declined')
  })

  it('closing the bridge answers a waiting call cancel; the log keeps the question for recovery', async () => {
    const reply = bridge.elicit(callOf(), ask)
    await asked()
    bridge.close()
    expect(await reply).toEqual({ action: 'cancel' })
    expect(logged().map((e) => e.type)).toEqual(['elicitation.requested'])
  })
})

describe('routing a server’s question to a call', () => {
  it('with no call, or several, in flight on that server: declined, logged, never appended', async () => {
    const handler = mcpElicitationHandler(bridge, log)
    const inFlight = createInFlightCalls()
    const signal = new AbortController().signal
    expect(await handler({ ...ask, requestedSchema: schema, route: inFlight.sole() }, signal)).toEqual({
      action: 'decline',
    })
    const endA = inFlight.begin(callOf())
    inFlight.begin({ ...callOf(), sessionId: 'ses_2', partId: 'prt_2', callId: 'call_2' })
    expect(await handler({ ...ask, requestedSchema: schema, route: inFlight.sole() }, signal)).toEqual({
      action: 'decline',
    })
    expect(warnings.map((w) => (w.obj as { reason: string }).reason)).toEqual([
      'no call in flight',
      'several calls in flight',
    ])
    expect(logged()).toEqual([])
    endA()
    expect(inFlight.sole()).toMatchObject({ call: { sessionId: 'ses_2', callId: 'call_2' } })
  })
})
