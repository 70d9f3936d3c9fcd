import { afterEach, describe, expect, it } from 'vitest'
import { FORK_SETTLEMENT, settleInFlight } from '../../src/commands/settle.js'
import type { EventStore } from '../../src/events/store.js'
import { openStore } from '../../src/projections/open.js'
import { viewAt } from '../../src/projections/time-travel/time-travel.js'
import { recordSession } from './recorded.js'

const stores: EventStore[] = []
afterEach(() => {
  for (const s of stores.splice(0)) s.close()
})

/** The recorded session's state right after its first event of `type`. */
function given(type: string, nth = 0) {
  const store = openStore(':memory:')
  stores.push(store)
  const seqs = recordSession(store)
  const seq = seqs.filter((s) => store.get(s)?.type === type)[nth] as number
  return viewAt(store, 'ses_rec', seq)
}

describe('settleInFlight (pure)', () => {
  it('settles nothing when nothing is in flight', () => {
    expect(settleInFlight(given('session.renamed'), FORK_SETTLEMENT)).toEqual([])
  })

  it('for recovery: interrupted tools and an errored message, while the permission request and the run stay', () => {
    const reason = {
      kind: 'interrupted' as const,
      message: 'interrupted by a server restart',
      rejectPermissions: false,
      finishRun: false,
    }
    const error = { kind: 'interrupted', message: 'interrupted by a server restart' }
    expect(settleInFlight(given('permission.requested'), reason)).toEqual([
      { type: 'tool.failed', data: { partId: 'prt_c2', error } },
      { type: 'message.completed', data: { messageId: 'msg_a1', error } },
    ])
  })

  it('for a fork mid-compaction: the summary text ended, the compaction failed, messages closed, the run cancelled', () => {
    const error = { kind: 'aborted', message: 'forked while running' }
    expect(settleInFlight(given('text.delta', 6), FORK_SETTLEMENT)).toEqual([
      { type: 'text.ended', data: { partId: 'prt_sum' } },
      { type: 'compaction.failed', data: { compactionId: 'cmp_1', error: 'forked while running' } },
      { type: 'message.completed', data: { messageId: 'msg_sum', error } },
      { type: 'run.finished', data: { runId: 'run_2', outcome: 'cancelled', error } },
    ])
  })

  it('for a fork while a sub-agent runs: the subtask is finished cancelled and its tool failed', () => {
    const error = { kind: 'aborted', message: 'forked while running' }
    expect(settleInFlight(given('subtask.started'), FORK_SETTLEMENT)).toEqual([
      { type: 'tool.failed', data: { partId: 'prt_c4', error } },
      {
        type: 'subtask.finished',
        data: { partId: 'prt_c4', callId: 'call_4', childSessionId: 'ses_child', outcome: 'cancelled' },
      },
      { type: 'message.completed', data: { messageId: 'msg_a3', error } },
      { type: 'run.finished', data: { runId: 'run_2', outcome: 'cancelled', error } },
    ])
  })
})
