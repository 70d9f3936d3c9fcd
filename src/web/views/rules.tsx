import { useEffect, useState } from 'preact/hooks'
import type { ChronicleSocket, PermissionRule, SessionRule } from '../../client/index.js'
import { ErrorNote, useAction } from '../ui.js'

/**
 * The session's permission rules (`permission.rules`): the ones it was
 * created with, which stay, and the approvals "always" answers added, each
 * revocable (`permission.revoke`). Read again whenever the session's
 * approvals change (the live model's `approvals` is the key).
 */
export function Rules({
  socket,
  sessionId,
  approvalsKey,
  readOnly,
}: {
  socket: ChronicleSocket
  sessionId: string
  /** changes when the session's approvals do */
  approvalsKey: unknown
  readOnly: boolean
}) {
  const [rules, setRules] = useState<{ rules: SessionRule[]; configured: PermissionRule[] } | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  useEffect(() => {
    let live = true
    socket.call('permission.rules', { session: sessionId }).then(
      (r) => live && setRules(r),
      (e: unknown) => live && setError(e),
    )
    return () => {
      live = false
    }
  }, [socket, sessionId, approvalsKey])
  const revoke = useAction((ruleId: string) => socket.call('permission.revoke', { session: sessionId, ruleId }))
  return (
    <section class="rules" aria-labelledby="rules-title">
      <h2 id="rules-title">Rules and approvals</h2>
      <ErrorNote error={error} />
      {rules && (
        <>
          <h3>Approvals</h3>
          {rules.rules.length === 0 ? (
            <p class="empty">None: an "Allow always" answer adds one here.</p>
          ) : (
            <ul class="rule-list">
              {rules.rules.map((r) => (
                <li key={r.ruleId}>
                  <RuleText rule={r} />
                  <button
                    type="button"
                    class="danger small"
                    disabled={revoke.busy || readOnly}
                    aria-label={`Revoke ${r.action} ${r.permission} ${r.pattern}`}
                    onClick={() => void revoke.start(r.ruleId)}
                  >
                    Revoke
                  </button>
                </li>
              ))}
            </ul>
          )}
          <h3>Configured</h3>
          {rules.configured.length === 0 ? (
            <p class="empty">None for this session (the agent's and the server's rules apply).</p>
          ) : (
            <ul class="rule-list">
              {rules.configured.map((r, i) => (
                <li key={`${i}-${r.permission}-${r.pattern}`}>
                  <RuleText rule={r} />
                </li>
              ))}
            </ul>
          )}
        </>
      )}
      <ErrorNote error={revoke.error} />
    </section>
  )
}

function RuleText({ rule }: { rule: PermissionRule }) {
  return (
    <span>
      <span class={`badge badge-${rule.action}`}>{rule.action}</span> {rule.permission} <code>{rule.pattern}</code>
    </span>
  )
}
