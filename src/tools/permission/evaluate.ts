import type { PermissionRule } from '../../events/catalogue.js'
import { wildcardMatch } from './wildcard.js'

export type PermissionAction = PermissionRule['action']

/** The rule that decides, or undefined when none matches. Last match wins across the rulesets, in order. */
export function lastMatch(
  permission: string,
  pattern: string,
  ...rulesets: readonly (readonly PermissionRule[])[]
): PermissionRule | undefined {
  let found: PermissionRule | undefined
  for (const rules of rulesets) {
    for (const rule of rules) {
      if (wildcardMatch(permission, rule.permission) && wildcardMatch(pattern, rule.pattern)) found = rule
    }
  }
  return found
}

/** Last match wins; nothing matching means `ask`. */
export function evaluate(
  permission: string,
  pattern: string,
  ...rulesets: readonly (readonly PermissionRule[])[]
): PermissionAction {
  return lastMatch(permission, pattern, ...rulesets)?.action ?? 'ask'
}

export interface RuleSources {
  /** the agent's rules (defaults plus configuration) */
  readonly agent: readonly PermissionRule[]
  /** the session's configured rules (session.rules.changed) */
  readonly session: readonly PermissionRule[]
  /** durable approvals from "always" replies */
  readonly approvals: readonly PermissionRule[]
}

/**
 * The decision for one pattern. Configured rules (agent, then session) are
 * evaluated first; an approval can turn their `ask` into `allow` but never
 * overrides a configured `deny` — "always" must not silently widen policy.
 */
export function ruleDecision(permission: string, pattern: string, sources: RuleSources): PermissionAction {
  const configured = evaluate(permission, pattern, sources.agent, sources.session)
  if (configured !== 'ask') return configured
  return lastMatch(permission, pattern, sources.approvals)?.action === 'allow' ? 'allow' : 'ask'
}

/**
 * Whether a tool governed by `permission` can never run: its last rule for any
 * pattern is `deny *` (later rules with narrower patterns may still allow, e.g.
 * plan mode's plans directory, and then the tool stays visible).
 */
export function deniesEverything(permission: string, ...rulesets: readonly (readonly PermissionRule[])[]): boolean {
  const relevant = rulesets.flat().filter((r) => wildcardMatch(permission, r.permission))
  const last = relevant.at(-1)
  if (last?.action !== 'deny' || last.pattern !== '*') return false
  return true
}
