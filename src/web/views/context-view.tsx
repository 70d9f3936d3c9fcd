import { useEffect, useState } from 'preact/hooks'
import type { ChronicleSocket } from '../../client/index.js'
import { ErrorNote, formatCount } from '../ui.js'

/**
 * What the model saw (docs/AUDIT.md): `session.context {at}` at a
 * `step.started` seq is the exact request that step sent, rebuilt from the
 * log — system prompt, messages, tool schemas — with its digest, which
 * equals the step's recorded `contextDigest`.
 */

interface Context {
  readonly system?: string
  readonly messages?: readonly { role: string; content: unknown }[]
  readonly tools?: readonly { name: string; description?: string; parameters?: unknown }[]
  readonly toolChoice?: string
  readonly digest?: string
  readonly step?: { seq: number; step: number; messageId: string; contextDigest: string; settings?: unknown }
}

export function ContextView({ socket, session, seq }: { socket: ChronicleSocket; session: string; seq: number }) {
  const [context, setContext] = useState<Context | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  useEffect(() => {
    let live = true
    setContext(undefined)
    setError(undefined)
    socket.call('session.context', { session, at: seq }).then(
      (c) => live && setContext(c as Context),
      (e: unknown) => live && setError(e),
    )
    return () => {
      live = false
    }
  }, [socket, session, seq])
  if (error) return <ErrorNote error={error} />
  if (!context) return <p aria-busy="true">Rebuilding the request from the log…</p>
  const { step } = context
  return (
    <div class="context">
      <dl class="facts">
        {step && (
          <>
            <dt>Step</dt>
            <dd>
              {step.step} of message <code>{step.messageId}</code>, at seq {step.seq}
            </dd>
          </>
        )}
        <dt>Digest</dt>
        <dd>
          <code>{context.digest}</code>
          {step &&
            (context.digest === step.contextDigest
              ? ' — equals the recorded digest'
              : ' — DIFFERS from the recorded digest')}
        </dd>
        <dt>Tool choice</dt>
        <dd>{context.toolChoice}</dd>
        {step?.settings !== undefined && (
          <>
            <dt>Settings</dt>
            <dd>
              <code>{JSON.stringify(step.settings)}</code>
            </dd>
          </>
        )}
      </dl>
      {!step && (
        <p class="note">No step started at this seq: this is the request the next step would be sent, compiled now.</p>
      )}
      <details>
        <summary>System prompt ({formatCount((context.system ?? '').length)} characters)</summary>
        <pre class="block">{context.system}</pre>
      </details>
      <details open>
        <summary>Messages ({context.messages?.length ?? 0})</summary>
        <ol class="chat">
          {(context.messages ?? []).map((m, i) => (
            <li key={i} class={`chat-${m.role}`}>
              <strong>{m.role}</strong>
              <ChatContent content={m.content} />
            </li>
          ))}
        </ol>
      </details>
      <details>
        <summary>Tools ({context.tools?.length ?? 0})</summary>
        <ul class="tools">
          {(context.tools ?? []).map((t) => (
            <li key={t.name}>
              <code>{t.name}</code> — {t.description?.split('\n')[0]}
            </li>
          ))}
        </ul>
      </details>
    </div>
  )
}

function ChatContent({ content }: { content: unknown }) {
  if (typeof content === 'string') return <pre class="block">{content}</pre>
  if (!Array.isArray(content)) return <pre class="block">{JSON.stringify(content, null, 2)}</pre>
  return (
    <>
      {content.map((part: Record<string, unknown>, i) => {
        if ((part.type === 'text' || part.type === 'reasoning') && typeof part.text === 'string')
          return (
            <pre key={i} class={`block ${part.type}`}>
              {part.text}
            </pre>
          )
        if (part.type === 'tool-call')
          return (
            <pre key={i} class="block">
              call {String(part.toolName)} {JSON.stringify(part.input)}
            </pre>
          )
        if (part.type === 'tool-result') {
          const output = part.output as { value?: unknown } | undefined
          return (
            <pre key={i} class="block">
              result of {String(part.toolName)}:{' '}
              {typeof output?.value === 'string' ? output.value : JSON.stringify(output?.value)}
            </pre>
          )
        }
        return (
          <pre key={i} class="block">
            {JSON.stringify(part)}
          </pre>
        )
      })}
    </>
  )
}
