import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { canMount, clientOf, serveOnTmpfs } from './tmpfs-server.js'

/**
 * A session directory that fills (docs/BACKUP.md "A full disk"): the agent's
 * command writes more than the filesystem under the session directory holds.
 * The real `chronicle serve`, its data dir on one tmpfs and the session
 * directory on a second, small one (test/storage/tmpfs-server.ts); the
 * scripted model asks for bash. The tool call ends with the error, the run
 * goes on to its answer, and everything acknowledged is in the log.
 */
const root = mkdtempSync(join(tmpdir(), 'chronicle-session-dir-full-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))
const mountable = canMount(root)

type Event = { type: string; data: Record<string, unknown> }

/** A server whose scripted model runs `command` with bash, then answers; what the spec saw while it was up. */
async function runBash(command: string, sizes: { data: string; workspace: string }) {
  const config = join(root, `config-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(
    config,
    JSON.stringify({
      limits: { minFreeBytes: 1024 * 1024 },
      sandbox: 'off', // bubblewrap cannot run inside the test's user namespace
      permission: [{ permission: 'bash', pattern: '*', action: 'allow' }],
    }),
  )
  const script = join(root, `script-${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(
    script,
    JSON.stringify({
      steps: [
        { toolCalls: [{ id: 'call_1', name: 'bash', input: { command, description: 'fill' } }] },
        { text: 'done' },
      ],
    }),
  )
  const seen: { turn?: Record<string, unknown>; events?: Event[]; saved?: string[]; health?: unknown } = {}
  const served = await serveOnTmpfs(root, sizes.data, {
    config,
    workspace: sizes.workspace,
    env: { CHRONICLE_MODEL: `scripted:${script}` },
    async whileUp(server) {
      const { call, inside } = clientOf(server)
      const created = await call('POST', '/sessions', { directory: join(server.mount, 'work') })
      const id = (created.body.session as { id: string }).id
      seen.turn = (
        await call('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'fill' }] })
      ).body
      seen.events = (await call('GET', `/sessions/${id}/events?limit=1000`)).body.events as Event[]
      seen.health = (await call('GET', '/health')).body
      const outputs = inside(`data/tool-output/${id}`)
      seen.saved = existsSync(outputs) ? readdirSync(outputs) : []
    },
  })
  expect(served.stderr).not.toContain('the spec failed')
  expect(served.code).toBe(0)
  return seen
}

describe.runIf(mountable)('a session directory that fills', () => {
  it('ends the tool call with the error the command met; the run goes on and nothing acknowledged is lost', async () => {
    const seen = await runBash('yes 0123456789 | head -c 8M > big.bin; echo "exit $?"', {
      data: '64m',
      workspace: '2m',
    })
    const types = (seen.events ?? []).map((e) => e.type)
    expect(
      types.filter((t) => ['tool.input.started', 'tool.called', 'tool.completed', 'tool.failed'].includes(t)),
    ).toEqual(['tool.input.started', 'tool.called', 'tool.completed'])
    const completed = seen.events?.find((e) => e.type === 'tool.completed')?.data as { output: string }
    expect(completed.output).toMatch(/No space left on device/)
    expect(completed.output).toContain('exit 1')
    expect(seen.turn).toMatchObject({ outcome: 'idle', text: 'done' })
    expect(types.slice(types.indexOf('tool.completed'))).toEqual(
      expect.arrayContaining(['step.started', 'text.delta', 'message.completed', 'run.finished']),
    )
    expect(seen.health).toMatchObject({ status: 'ok' })
  })

  it('output that outgrows the data dir while it is saved: the tool call says so, keeps what it can show, and the run goes on', async () => {
    // ~40 MiB of output: more than a result holds, so it is saved under the data dir — which holds 24 MiB
    const seen = await runBash('yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 40M', {
      data: '24m',
      workspace: '2m',
    })
    const types = (seen.events ?? []).map((e) => e.type)
    const ended = seen.events?.filter((e) => e.type === 'tool.completed' || e.type === 'tool.failed') ?? []
    expect(ended.map((e) => e.type)).toEqual(['tool.failed'])
    const error = (ended[0] as Event).data.error as { kind: string; message: string }
    expect(error.kind).toBe('failed')
    expect(error.message).toMatch(
      /^The command's output could not be saved: ENOSPC: no space left on device, write\.\n/,
    )
    expect(error.message).toMatch(
      /The full output could not be saved at \S+\/tool-output\/\S+\/bash_prt_\w+\.txt \(ENOSPC: no space left on device, write\): the partial file was removed, only the parts shown here are kept\./,
    )
    // what the command printed first and last is still there, and how it ended
    expect(error.message).toMatch(/^0123456789abcdefghijklmnopqrstuvwxyz$/m)
    expect(error.message).toContain('<bash_metadata>\nexit code: 0\n</bash_metadata>')
    expect(seen.saved).toEqual([])
    // the run went on: the model had the failure and answered, and the log took every event after it
    expect(seen.turn).toMatchObject({ outcome: 'idle', text: 'done' })
    expect(types.slice(types.indexOf('tool.failed'))).toEqual(
      expect.arrayContaining(['step.started', 'text.delta', 'message.completed', 'run.finished']),
    )
    expect(seen.health).toMatchObject({ status: 'ok' })
  })
})
