import { afterEach, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decideSession } from '../../src/commands/session.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { evaluate } from '../../src/tools/permission/evaluate.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { type Fixture, fixture } from './helpers.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

const rule = (permission: string, pattern: string, action: 'allow' | 'deny' | 'ask') => ({
  permission,
  pattern,
  action,
})
const ALL = [
  'bash',
  'read',
  'glob',
  'grep',
  'list',
  'edit',
  'write',
  'multiedit',
  'apply_patch',
  'todowrite',
  'webfetch',
]

describe('tool registry', () => {
  let f: Fixture
  afterEach(() => {
    f.gate.close()
    f.store.close()
  })
  const tools = createBuiltinTools({ dataDir: '/tmp/chronicle-unused', updateTodos: () => {} })
  // the rules as the step's view of the session has them
  const ids = async (registry: ReturnType<typeof createToolRegistry>, agent: string) => {
    const rules = (await sqlitePorts(f.store).readModels.session(f.sessionId))?.rules
    return (await registry.tools({ sessionId: f.sessionId, agent, ...(rules && { rules }) })).map((t) => t.id)
  }

  it('offers every built-in to build and plan (plan may still edit its plans directory)', async () => {
    f = fixture({ directory: '/w' })
    const registry = createToolRegistry({ agents: resolveAgents(), tools })
    expect(await ids(registry, 'build')).toEqual(ALL)
    expect(await ids(registry, 'plan')).toEqual(ALL)
  })

  it('hides the tools whose agent rules deny everything for their permission (edit and write share `edit`)', async () => {
    f = fixture({ directory: '/w' })
    const agents = resolveAgents([{ name: 'reviewer', rules: [rule('edit', '*', 'deny'), rule('bash', '*', 'deny')] }])
    const registry = createToolRegistry({ agents, tools })
    expect(await ids(registry, 'reviewer')).toEqual(['read', 'glob', 'grep', 'list', 'todowrite', 'webfetch'])
  })

  it('recomputes per step from the session rules', async () => {
    f = fixture({ directory: '/w', rules: [rule('bash', '*', 'deny')] })
    const registry = createToolRegistry({ agents: resolveAgents(), tools })
    expect(await ids(registry, 'build')).toEqual(ALL.filter((t) => t !== 'bash'))
    await execute(
      sqlitePorts(f.store),
      f.sessionId,
      (s) => decideSession({ type: 'set-rules', rules: [rule('bash', 'git *', 'allow')] }, s, f.sessionId),
      {
        meta: { actor: 'user' },
      },
    )
    expect(await ids(registry, 'build')).toEqual(ALL)
  })

  it('a durable approval never un-hides a tool denied by configuration', async () => {
    f = fixture({ directory: '/w', rules: [rule('bash', '*', 'deny')] })
    f.store.append(
      f.sessionId,
      [{ type: 'permission.rule.added', data: { ruleId: 'rul_1', rule: rule('bash', '*', 'allow') } }],
      {
        meta: { actor: 'user' },
      },
    )
    const registry = createToolRegistry({ agents: resolveAgents(), tools })
    expect(await ids(registry, 'build')).not.toContain('bash')
  })
})

describe('agents', () => {
  it('build asks for bash, edits, webfetch, external_directory and doom_loop, and allows the rest', () => {
    const build = resolveAgents().get('build')?.rules ?? []
    expect(['bash', 'edit', 'webfetch', 'external_directory', 'doom_loop'].map((p) => evaluate(p, 'x', build))).toEqual(
      Array(5).fill('ask'),
    )
    expect(['read', 'glob', 'grep', 'list', 'todowrite', 'mcp_tool'].map((p) => evaluate(p, 'x', build))).toEqual(
      Array(6).fill('allow'),
    )
  })

  it('every default agent asks before webfetch reaches a host (docs/TOOLS.md "webfetch")', () => {
    const agents = resolveAgents()
    expect(
      ['build', 'plan', 'general'].map((a) => evaluate('webfetch', 'example.com', agents.get(a)?.rules ?? [])),
    ).toEqual(['ask', 'ask', 'ask'])
  })

  it('every default agent asks before a query goes to the search provider (docs/TOOLS.md "websearch")', () => {
    const agents = resolveAgents()
    expect(
      ['build', 'plan', 'general'].map((a) => evaluate('websearch', 'node streams', agents.get(a)?.rules ?? [])),
    ).toEqual(['ask', 'ask', 'ask'])
  })

  it('reading .env files asks, .env.example does not', () => {
    const build = resolveAgents().get('build')?.rules ?? []
    expect(evaluate('read', 'config/.env', build)).toBe('ask')
    expect(evaluate('read', '.env.local', build)).toBe('ask')
    expect(evaluate('read', '.env.example', build)).toBe('allow')
    expect(evaluate('read', 'src/env.ts', build)).toBe('allow')
  })

  it('plan denies edits except under .chronicle/plans; general may not start sub-agents', () => {
    const agents = resolveAgents()
    const plan = agents.get('plan')?.rules ?? []
    expect(evaluate('edit', 'src/a.ts', plan)).toBe('deny')
    expect(evaluate('edit', '.chronicle/plans/next.md', plan)).toBe('allow')
    expect(evaluate('task', 'general', agents.get('general')?.rules ?? [])).toBe('deny')
    expect(agents.get('general')?.mode).toBe('subagent')
  })

  it('configuration: global rules follow the agent defaults, per-agent rules come last; new agents start from build', () => {
    const agents = resolveAgents(
      [
        { name: 'build', rules: [rule('bash', 'npm test *', 'allow')] },
        { name: 'docs', description: 'writes docs', rules: [rule('edit', 'docs/*', 'allow')] },
      ],
      [rule('bash', '*', 'allow'), rule('bash', 'npm *', 'deny')],
    )
    const build = agents.get('build')?.rules ?? []
    expect(evaluate('bash', 'ls', build)).toBe('allow') // global allow beats the default ask
    expect(evaluate('bash', 'npm publish', build)).toBe('deny') // global deny
    expect(evaluate('bash', 'npm test --watch', build)).toBe('allow') // per-agent rule last
    const docs = agents.get('docs')
    expect(docs).toMatchObject({ name: 'docs', description: 'writes docs', mode: 'all', maxSteps: 50 })
    expect(evaluate('edit', 'docs/a.md', docs?.rules ?? [])).toBe('allow')
    expect(evaluate('edit', 'src/a.ts', docs?.rules ?? [])).toBe('ask')
    expect(evaluate('bash', 'npm ci', docs?.rules ?? [])).toBe('deny')
  })
})
