import { afterEach, describe, expect, it } from 'vitest'
import { type SubmitContext, type SubmitInput, submitInput } from '../../src/commands/input.js'
import { isChronicleError } from '../../src/events/errors.js'
import { sequentialIds } from '../../src/events/ids.js'
import { Fence } from '../../src/events/postgres/fence.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresPorts } from '../../src/projections/store-ports.js'
import { InputIndex } from '../../src/runtime/inbox/input-index.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * An input is accepted once, whichever node takes it (docs/CLUSTER.md "Commands at any node"). Each node
 * remembers the inputIds of the sessions it served, and what it remembers lags what another node accepted a
 * moment ago; the database holds an inputId to one acceptance per session, and the command that meets the
 * other node's acceptance there reads the log again and answers as a resubmission: the original acceptance,
 * or INPUT_CONFLICT for other content. Two stores on one database are two nodes; neither follows the other
 * here, so one's memory lags for as long as the spec likes.
 */
const server = usePostgres()

describe('an input taken by two nodes', () => {
  const closing: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const close of closing.splice(0)) await close()
  })

  const node = async (url: string, name: string) => {
    const log = await openPostgresStore(url, { fence: new Fence(name) })
    const ports = postgresPorts(log)
    const index = new InputIndex(log)
    closing.push(async () => {
      index.close()
      await log.close()
    })
    const context: SubmitContext = {
      ids: sequentialIds(),
      prior: (sessionId, inputId, fresh) => index.find(sessionId, inputId, fresh),
      agents: new Set(['build']),
      validateModel: () => {},
    }
    return {
      log,
      ports,
      submit: (sessionId: string, input: SubmitInput) => submitInput(ports, sessionId, input, context),
    }
  }

  it('is accepted once: the node whose memory lags answers with the other’s acceptance', async () => {
    const url = await server().database()
    const a = await node(url, 'node-a')
    const c = await node(url, 'node-c')
    await a.log.append('ses_1', [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }], {
      meta: { actor: 'user' },
      expectedVersion: 0,
    })
    const hello = { inputId: 'in_1', parts: [{ type: 'text' as const, text: 'hello' }] }
    // node-c has read the session's inputs; node-a then accepts in_1, which node-c never hears of
    expect(await c.submit('ses_1', { inputId: 'in_0', parts: [{ type: 'text', text: 'first' }] })).toMatchObject({
      duplicate: false,
    })
    const first = await a.submit('ses_1', hello)
    expect(first.duplicate).toBe(false)

    expect(await c.submit('ses_1', hello)).toEqual({ inputId: 'in_1', seq: first.seq, duplicate: true })
    const other = await c
      .submit('ses_1', { inputId: 'in_1', parts: [{ type: 'text', text: 'something else' }] })
      .catch((e: unknown) => e)
    expect(isChronicleError(other, 'INPUT_CONFLICT')).toBe(true)
    const accepted = await a.log.readSessionOfType('ses_1', 'input.accepted')
    expect(accepted.map((e) => (e.data as { inputId: string }).inputId)).toEqual(['in_0', 'in_1'])
  })

  // Found by the cluster harness (npm run test:cluster): the taking node decides on the version it read, the
  // owner's stream has appended since, and five quick attempts all lost: a plain input answered VERSION_CONFLICT.
  it('is accepted at another node while the owner’s run keeps appending to the session', async () => {
    const url = await server().database()
    const owner = await node(url, 'node-a')
    const other = await node(url, 'node-b')
    await owner.log.append(
      'ses_1',
      [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }],
      { meta: { actor: 'user' }, expectedVersion: 0 },
    )
    // the owner's run: an append every few ms, as a model's stream is (no expected version: the run's own output)
    let streaming = true
    const stream = (async () => {
      for (let i = 0; streaming; i++) {
        await owner.log.append('ses_1', [{ type: 'session.renamed', data: { title: `t${i}` } }], {
          meta: { actor: 'runtime' },
        })
        await new Promise((r) => setTimeout(r, 2))
      }
    })()
    try {
      for (let i = 0; i < 20; i++) {
        const accepted = await other.submit('ses_1', { inputId: `in_${i}`, parts: [{ type: 'text', text: `${i}` }] })
        expect(accepted.duplicate).toBe(false)
      }
    } finally {
      streaming = false
      await stream
    }
    expect(await owner.log.readSessionOfType('ses_1', 'input.accepted')).toHaveLength(20)
  })
})
