import { describe, expect, it } from 'vitest'
import { RunCoordinator } from '../../src/runtime/inbox/coordinator.js'

/**
 * The run coordinator (src/runtime/inbox/coordinator.ts): one run a session, and whatever is pending when a
 * run ends starts one follow-up run. A run recovery resumes was not started for the input waiting behind it:
 * input queued while the run was parked (on a cluster, taken by another node before the owner died) must
 * run after it, even when the resumed run ends without delivering it (a reject ends it at once). Found by the
 * cluster harness (npm run test:cluster): such sessions stayed idle with their input waiting.
 */
describe('the run coordinator', () => {
  it('runs input that waited behind a resumed run once that run ends, though the run left it waiting', async () => {
    let inbox = ['in_queued'] // queued while the run was parked; the resumed run does not deliver it
    const runs: string[] = []
    const coordinator = new RunCoordinator(
      async (_session, _signal, resume) => {
        if (resume) runs.push(`resumed ${resume.runId}`)
        else {
          runs.push(`run for ${inbox[0]}`)
          inbox = inbox.slice(1) // a fresh run delivers the first pending input
        }
        return resume ? 'rejected' : 'idle'
      },
      async () => inbox[0],
    )
    coordinator.resume('ses_1', { runId: 'run_1' })
    await coordinator.idle('ses_1')
    expect(runs).toEqual(['resumed run_1', 'run for in_queued'])
    expect(inbox).toEqual([])
  })

  it('never spins on input that no run delivers', async () => {
    let calls = 0
    const coordinator = new RunCoordinator(
      async () => {
        calls++
        return 'idle'
      },
      async () => 'in_stuck', // say an archived session's: no run takes it
    )
    coordinator.resume('ses_1', { runId: 'run_1' })
    await coordinator.idle('ses_1')
    expect(calls).toBe(2) // the resumed run, then one for the input, and no more
    coordinator.wake('ses_1')
    await coordinator.idle('ses_1')
    expect(calls).toBe(3)
  })

  it('runs input whose wake came while the last run ended, though its read of what is pending missed it', async () => {
    let inbox: string[] = ['in_1']
    const runs: string[] = []
    let reads = 0
    let coordinator: RunCoordinator | undefined
    coordinator = new RunCoordinator(
      async () => {
        runs.push(`run for ${inbox[0]}`)
        inbox = inbox.slice(1)
        return 'idle'
      },
      async () => {
        const head = inbox[0]
        // the read after the first run: input commits behind it, and its wake finds the run still active
        if (++reads === 2) {
          inbox = [...inbox, 'in_2']
          coordinator?.wake('ses_1')
        }
        return head
      },
    )
    coordinator.wake('ses_1')
    await coordinator.idle('ses_1')
    expect(runs).toEqual(['run for in_1', 'run for in_2'])
  })

  it('resumes a session claimed back while the run it let go of still stops: after that run, never beside it', async () => {
    const events: string[] = []
    let stopped: () => void = () => {}
    const coordinator = new RunCoordinator(
      async (_session, signal, resume) => {
        if (resume) {
          events.push(`resumed ${resume.runId}`)
          return 'idle'
        }
        events.push('run started')
        // the run stops at a safe point some time after it is told to (a tool being killed)
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => (stopped = resolve)))
        events.push('run stopped')
        return 'shutdown'
      },
      async () => (events.length === 0 ? 'in_1' : undefined),
    )
    coordinator.wake('ses_1')
    await new Promise((r) => setTimeout(r, 10))
    const released = coordinator.release('ses_1') // the lease lapsed
    coordinator.resume('ses_1', { runId: 'run_1' }) // claimed back at once: recovery resumes the run
    await new Promise((r) => setTimeout(r, 10))
    expect(events).toEqual(['run started'])
    stopped()
    await released
    await coordinator.idle('ses_1')
    expect(events).toEqual(['run started', 'run stopped', 'resumed run_1'])
  })
})
