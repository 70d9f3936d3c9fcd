import type { PermissionRule } from '../events/catalogue.js'

/**
 * Agents: a prompt, a step budget and permission rules. Rules are evaluated
 * last-match-wins, agent rules first, then the session's (docs/TOOLS.md).
 */
export interface AgentDefinition {
  readonly name: string
  readonly description: string
  /** primary agents answer users; subagents run inside the task tool */
  readonly mode: 'primary' | 'subagent' | 'all'
  readonly prompt: string
  readonly maxSteps: number
  readonly rules: readonly PermissionRule[]
}

/**
 * Rules every default agent starts from: reading .env files asks (they often hold secrets), and so
 * does any file tool's use of the user's hidden credentials (`~/.ssh`, …: docs/SECURITY.md).
 */
const SECRETS_ASK: readonly PermissionRule[] = [
  { permission: 'read', pattern: '*.env', action: 'ask' },
  { permission: 'read', pattern: '*.env.*', action: 'ask' },
  { permission: 'read', pattern: '*.env.example', action: 'allow' },
  { permission: 'credentials', pattern: '*', action: 'ask' },
]

const BASE_PROMPT = `You are Chronicle, a coding agent working in the user's project directory.
Use the tools to read, search, edit and run commands. Be concise; prefer doing over describing.`

/**
 * webfetch asks in every default agent (docs/TOOLS.md "webfetch"): a URL can carry out what the
 * model has read, and the page brings untrusted text in. Allow hosts with rules, e.g.
 * `{permission: 'webfetch', pattern: '*.python.org', action: 'allow'}`. So does websearch (its
 * query goes to a third party, and its results are untrusted text). So does `network`, a
 * sandboxed command's connection to a host off the user's `sandbox.network` list when the config
 * says `unlistedHosts: "ask"` (docs/SECURITY.md "The network by host"), for the same reasons.
 */
export const DEFAULT_AGENTS: readonly AgentDefinition[] = [
  {
    name: 'build',
    description: 'The default agent: reads, edits and runs commands.',
    mode: 'primary',
    prompt: BASE_PROMPT,
    maxSteps: 50,
    rules: [
      { permission: '*', pattern: '*', action: 'allow' },
      ...SECRETS_ASK,
      { permission: 'bash', pattern: '*', action: 'ask' },
      { permission: 'edit', pattern: '*', action: 'ask' },
      { permission: 'webfetch', pattern: '*', action: 'ask' },
      { permission: 'websearch', pattern: '*', action: 'ask' },
      { permission: 'network', pattern: '*', action: 'ask' },
      { permission: 'external_directory', pattern: '*', action: 'ask' },
      { permission: 'doom_loop', pattern: '*', action: 'ask' },
    ],
  },
  {
    name: 'plan',
    description: 'Plans without changing the project: edits and writes are denied except plan files.',
    mode: 'primary',
    prompt: `${BASE_PROMPT}\nYou are in plan mode: analyse and propose a plan. Do not modify files, except plans under .chronicle/plans/.`,
    maxSteps: 50,
    rules: [
      { permission: '*', pattern: '*', action: 'allow' },
      ...SECRETS_ASK,
      { permission: 'edit', pattern: '*', action: 'deny' },
      { permission: 'edit', pattern: '.chronicle/plans/*', action: 'allow' },
      { permission: 'bash', pattern: '*', action: 'ask' },
      { permission: 'webfetch', pattern: '*', action: 'ask' },
      { permission: 'websearch', pattern: '*', action: 'ask' },
      { permission: 'network', pattern: '*', action: 'ask' },
      { permission: 'external_directory', pattern: '*', action: 'ask' },
      { permission: 'doom_loop', pattern: '*', action: 'ask' },
    ],
  },
  {
    name: 'general',
    description: 'A general-purpose sub-agent for delegated multi-step tasks.',
    mode: 'subagent',
    prompt: `${BASE_PROMPT}\nYou were delegated one task. Do it and answer with a short final report.`,
    maxSteps: 30,
    rules: [
      { permission: '*', pattern: '*', action: 'allow' },
      ...SECRETS_ASK,
      { permission: 'webfetch', pattern: '*', action: 'ask' },
      { permission: 'websearch', pattern: '*', action: 'ask' },
      { permission: 'network', pattern: '*', action: 'ask' },
      { permission: 'external_directory', pattern: '*', action: 'ask' },
      { permission: 'doom_loop', pattern: '*', action: 'ask' },
      { permission: 'task', pattern: '*', action: 'deny' },
    ],
  },
]

/**
 * The agents in effect: defaults, with configured agents replacing or
 * extending them by name. Rule order (last match wins): the agent's own
 * rules, then `globalRules` (the config file's `permission`), then the
 * agent's configured rules — so per-agent configuration has the last word.
 */
export function resolveAgents(
  configured: readonly Partial<AgentDefinition>[] = [],
  globalRules: readonly PermissionRule[] = [],
): Map<string, AgentDefinition> {
  const agents = new Map<string, AgentDefinition>(
    DEFAULT_AGENTS.map((a) => [a.name, { ...a, rules: [...a.rules, ...globalRules] }]),
  )
  for (const c of configured) {
    if (!c.name) continue
    const base = agents.get(c.name) ?? {
      ...(DEFAULT_AGENTS[0] as AgentDefinition),
      name: c.name,
      mode: 'all' as const,
      rules: [...(DEFAULT_AGENTS[0] as AgentDefinition).rules, ...globalRules],
    }
    const defined = Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined))
    agents.set(c.name, { ...base, ...defined, rules: [...base.rules, ...(c.rules ?? [])] } as AgentDefinition)
  }
  return agents
}
