import { execute } from '../src/commands/execute.js'
import { decidePermission } from '../src/commands/permission.js'
import { decideSession } from '../src/commands/session.js'
import { sequentialIds } from '../src/events/ids.js'
import { openStore } from '../src/projections/open.js'
import { resolveAgents } from '../src/tools/agents.js'
import { ruleDecision } from '../src/tools/permission/evaluate.js'
import { createPermissionGate } from '../src/runtime/permissions/gate.js'
import { splitShellCommand } from '../src/tools/permission/shell-split.js'
import { sqlitePorts } from '../src/projections/store-ports.js'

/**
 * `npm run bench -- permissions [n]`: the cost of the permission path —
 * rule evaluation, shell splitting, a gate ask that the rules allow (reads
 * the session from the read model each time), and an ask → reply round
 * trip through the real store (FULL commits).
 */
export default async function (args: string[]): Promise<object> {
  const n = Number(args[0] ?? 20_000)
  const agents = resolveAgents()
  const build = agents.get('build')?.rules ?? []
  const session = Array.from({ length: 20 }, (_, i) => ({
    permission: 'bash',
    pattern: `tool${i} *`,
    action: 'allow' as const,
  }))
  const sources = { agent: build, session, approvals: session }

  let t = performance.now()
  for (let i = 0; i < n; i++) ruleDecision('bash', `git status -s ${i % 10}`, sources)
  const evaluatePerSec = n / ((performance.now() - t) / 1000)

  const compound = 'git fetch && git status -s; echo "$(date)" | tee log.txt && bash -c "npm test -- --watch=false"'
  t = performance.now()
  for (let i = 0; i < n; i++) splitShellCommand(compound)
  const splitPerSec = n / ((performance.now() - t) / 1000)

  const store = openStore(':memory:')
  const ids = sequentialIds()
  const sessionId = 'ses_bench'
  await execute(
    sqlitePorts(store),
    sessionId,
    (s) =>
      decideSession({ type: 'create', directory: '/w', agent: 'build', model: null, rules: session }, s, sessionId),
    {
      meta: { actor: 'user' },
    },
  )
  const gate = createPermissionGate({ ports: sqlitePorts(store), ids, agents })
  const scope = { sessionId, agent: 'build', abort: new AbortController().signal }
  const asks = Math.min(n, 5000)
  t = performance.now()
  for (let i = 0; i < asks; i++) await gate.ask(scope, { permission: 'read', patterns: [`src/file${i}.ts`] })
  const allowedAsksPerSec = asks / ((performance.now() - t) / 1000)

  const rounds = 300
  const latencies: number[] = []
  for (let i = 0; i < rounds; i++) {
    const start = performance.now()
    const parked = gate.ask(scope, { permission: 'edit', patterns: [`src/file${i}.ts`] })
    const last = store.readSessionBackward(sessionId, Number.MAX_SAFE_INTEGER, 1)[0]
    if (last?.type !== 'permission.requested') throw new Error('the ask did not park')
    const { requestId } = last.data
    await execute(
      sqlitePorts(store),
      sessionId,
      (s) => decidePermission({ type: 'reply', requestId, reply: 'once' }, s, sessionId, ids),
      {
        meta: { actor: 'user' },
        durability: 'full',
      },
    )
    await parked
    latencies.push(performance.now() - start)
  }
  latencies.sort((a, b) => a - b)
  gate.close()
  store.close()
  const round = (x: number) => Math.round(x)
  return {
    evaluatePerSec: round(evaluatePerSec),
    shellSplitPerSec: round(splitPerSec),
    gateAllowedAsksPerSec: round(allowedAsksPerSec),
    askReplyRoundTripMs: {
      p50: +(latencies[rounds / 2] ?? 0).toFixed(3),
      p99: +(latencies[Math.floor(rounds * 0.99)] ?? 0).toFixed(3),
    },
  }
}
