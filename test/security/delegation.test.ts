import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decidePermission } from '../../src/commands/permission.js'
import { decideSession } from '../../src/commands/session.js'
import type { PermissionRule } from '../../src/events/catalogue.js'
import { getSession } from '../../src/projections/queries/read-model.js'
import { dataOf, subagentHarness, task, until, type SubagentHarness } from '../subagents/helpers.js'
import { executeNow } from '../support/execute-now.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * Finding 1 (docs/SECURITY.md): delegation never widens permission. The
 * default `build` agent may call `task`; its `general` sub-agent allows
 * everything by itself. Inside the child every decision is the stricter of
 * the child's rules and its parent's, and a child's `ask` is raised in the
 * parent's session, where the user answers it.
 */

const PARENT = 'delegate please'
const parentFirst = { userContains: PARENT, afterToolResult: false }
const parentAfter = { userContains: PARENT, afterToolResult: true }
const child = (afterToolResult: boolean) => ({ userContains: 'CHILD:', afterToolResult })
const bash = (id: string, command: string) => ({ toolCalls: [{ id, name: 'bash', input: { command } }] })

async function reply(h: SubagentHarness, sessionId: string, requestId: string, answer: 'once' | 'always' | 'reject') {
  await execute(
    sqlitePorts(h.store),
    sessionId,
    (s) => decidePermission({ type: 'reply', requestId, reply: answer }, s, sessionId, h.ids),
    {
      meta: { actor: 'user' },
      durability: 'full',
    },
  )
}

/** Runs a parent whose child calls bash `touch pwned`; resolves once the request is raised (or the run ends). */
async function childTouches(h: SubagentHarness, agent = 'build'): Promise<{ parent: string; child: () => string }> {
  const parent = h.session(agent)
  await h.runtime.submit(parent, { parts: [{ type: 'text', text: PARENT }] })
  await until(() => {
    const s = getSession(h.store, parent)
    return (s?.pendingPermissions.length ?? 0) > 0 || s?.lastRun !== null
  })
  return { parent, child: () => h.children(parent)[0] as string }
}

describe('delegation never widens permission', () => {
  let h: SubagentHarness
  afterEach(() => h.close())

  const script = () => [
    { when: parentFirst, ...task('c_task', 'CHILD: touch the file') },
    { when: child(false), ...bash('c_bash', 'touch pwned') },
    { when: child(true), text: 'child done' },
    { when: parentAfter, text: 'parent done' },
  ]

  it("a general child's bash asks in the parent's session, which build would have asked; nothing runs before the answer", async () => {
    h = subagentHarness(script())
    const { parent, child } = await childTouches(h)
    const pending = getSession(h.store, parent)?.pendingPermissions ?? []
    expect(pending).toEqual([
      {
        requestId: expect.any(String),
        seq: expect.any(Number),
        permission: 'bash',
        patterns: ['touch pwned'],
        metadata: { command: 'touch pwned', always: ['touch *'] },
        from: { sessionId: child(), partId: expect.any(String), callId: 'c_bash' },
      },
    ])
    expect(getSession(h.store, parent)?.status).toBe('waiting')
    expect(dataOf(h.events(child()), 'permission.requested')).toEqual([]) // raised where the user watches, once
    expect(existsSync(join(h.directory, 'pwned'))).toBe(false)

    await reply(h, parent, pending[0]!.requestId, 'reject')
    await h.runtime.idle(parent)
    expect(existsSync(join(h.directory, 'pwned'))).toBe(false)
    expect(dataOf(h.events(child()), 'tool.failed')).toEqual([
      { partId: expect.any(String), error: { kind: 'denied', message: expect.any(String) } },
    ])
    // the plain reject stopped the child; the parent's task call says so, and the parent answers on
    expect(dataOf(h.events(child()), 'run.finished').at(-1)).toMatchObject({ outcome: 'rejected' })
    expect(dataOf(h.events(parent), 'tool.failed')).toEqual([
      {
        partId: expect.any(String),
        error: {
          kind: 'denied',
          message: expect.stringMatching(/^The user rejected a permission request of the general sub-agent/),
        },
      },
    ])
    expect(dataOf(h.events(parent), 'run.finished').at(-1)).toMatchObject({ outcome: 'idle' })
  })

  it("the parent's answer lets the child's call run: once runs it, and the request closes in the parent", async () => {
    h = subagentHarness(script())
    const { parent, child } = await childTouches(h)
    const [request] = getSession(h.store, parent)?.pendingPermissions ?? []
    await reply(h, parent, request!.requestId, 'once')
    await h.runtime.idle(parent)
    expect(existsSync(join(h.directory, 'pwned'))).toBe(true)
    expect(dataOf(h.events(child()), 'tool.completed')).toHaveLength(1)
    expect(getSession(h.store, parent)?.pendingPermissions).toEqual([])
  })

  it("an 'always' answered in the parent covers the child's later calls of that command", async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: touch twice') },
      { when: child(false), ...bash('c_one', 'touch one') },
      { when: child(true), ...bash('c_two', 'touch two'), times: 1 },
      { when: child(true), text: 'child done' },
      { when: parentAfter, text: 'parent done' },
    ])
    const { parent } = await childTouches(h)
    const [request] = getSession(h.store, parent)?.pendingPermissions ?? []
    await reply(h, parent, request!.requestId, 'always')
    await h.runtime.idle(parent)
    expect(existsSync(join(h.directory, 'one'))).toBe(true)
    expect(existsSync(join(h.directory, 'two'))).toBe(true)
    expect(dataOf(h.events(parent), 'permission.requested')).toHaveLength(1)
  })

  it("a plan-mode parent: the child's shell write is raised in the parent, not run", async () => {
    h = subagentHarness([
      { when: parentFirst, ...task('c_task', 'CHILD: write') },
      { when: child(false), toolCalls: [{ id: 'c_w', name: 'bash', input: { command: 'echo hi > out.txt' } }] },
      { when: child(true), text: 'child done' },
      { when: parentAfter, text: 'parent done' },
    ])
    const { parent } = await childTouches(h, 'plan')
    expect(getSession(h.store, parent)?.pendingPermissions.map((p) => p.permission)).toEqual(['bash'])
    expect(existsSync(join(h.directory, 'out.txt'))).toBe(false)
  })
})

describe('the effective rules of a sub-agent chain, decided at the moment of asking', () => {
  let h: SubagentHarness
  afterEach(() => h.close())

  /** Sessions made by hand: root (build) → child (general) → grandchild (general). */
  function chain() {
    const root = h.session('build')
    const make = (parent: string, agent: string) => {
      const id = h.ids.next('ses')
      executeNow(
        h.store,
        id,
        (s) =>
          decideSession(
            {
              type: 'create',
              directory: h.directory,
              agent: 'general',
              model: 'mock:model',
              parent: { sessionId: parent, callId: `call_${id}`, agent },
            },
            s,
            id,
          ),
        { meta: { actor: 'tool' } },
      )
      return id
    }
    const kid = make(root, 'build')
    const grandkid = make(kid, 'general')
    return { root, kid, grandkid }
  }
  const setRules = (sessionId: string, rules: PermissionRule[]) =>
    executeNow(h.store, sessionId, (s) => decideSession({ type: 'set-rules', rules }, s, sessionId), {
      meta: { actor: 'user' },
    })
  const decision = async (sessionId: string, permission: string, pattern: string) =>
    (await h.gate.evaluate({ sessionId, agent: 'general' }, { permission, patterns: [pattern] })).action

  it('is the strictest level of the chain: deny > ask > allow', async () => {
    h = subagentHarness([])
    const { root, kid, grandkid } = chain()
    expect(await decision(grandkid, 'read', 'src/a.ts')).toBe('allow') // every level allows
    expect(await decision(grandkid, 'bash', 'ls')).toBe('ask') // build (the root's agent) asks
    expect(await decision(grandkid, 'edit', 'a.ts')).toBe('ask')
    setRules(kid, [{ permission: 'bash', pattern: 'ls *', action: 'deny' }])
    expect(await decision(grandkid, 'bash', 'ls -la')).toBe('deny') // the middle level's session rule
    setRules(root, [{ permission: 'read', pattern: 'secret/*', action: 'deny' }])
    expect(await decision(grandkid, 'read', 'secret/key')).toBe('deny') // a rule the root gained after the children were made
    expect(await decision(root, 'read', 'src/a.ts')).toBe('allow')
  })

  it('approvals from anywhere up the chain lift an ask, never a deny', async () => {
    h = subagentHarness([])
    const { root, grandkid } = chain()
    await execute(
      sqlitePorts(h.store),
      root,
      () => [
        {
          type: 'permission.rule.added',
          data: { ruleId: 'rul_a', rule: { permission: 'bash', pattern: 'make *', action: 'allow' } },
        },
      ],
      {
        meta: { actor: 'user' },
      },
    )
    expect(await decision(grandkid, 'bash', 'make test')).toBe('allow')
    setRules(root, [{ permission: 'bash', pattern: 'make *', action: 'deny' }])
    expect(await decision(grandkid, 'bash', 'make test')).toBe('deny')
  })

  it("a grandchild's ask is raised in the root session", async () => {
    h = subagentHarness([])
    const { root, grandkid } = chain()
    const abort = new AbortController()
    const asked = h.gate.ask(
      { sessionId: grandkid, agent: 'general', callId: 'c_x', partId: 'prt_x', abort: abort.signal },
      { permission: 'bash', patterns: ['ls'] },
    )
    await new Promise((r) => setImmediate(r)) // the request is appended
    expect(getSession(h.store, root)?.pendingPermissions.map((p) => p.from)).toEqual([
      { sessionId: grandkid, partId: 'prt_x', callId: 'c_x' },
    ])
    abort.abort()
    await expect(asked).rejects.toMatchObject({ kind: 'aborted' })
    expect(getSession(h.store, root)?.pendingPermissions).toEqual([]) // an abandoned request is closed where it was raised
  })
})
