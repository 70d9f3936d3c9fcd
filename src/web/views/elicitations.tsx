import { useState } from 'preact/hooks'
import type { ChronicleSocket, Session } from '../../client/index.js'
import { type ElicitationField as Field, fieldsOf } from '../../client/elicitation-form.js'
import { ErrorNote, useAction } from '../ui.js'

type Question = NonNullable<Session['pendingElicitations']>[number]
type Value = string | boolean

/**
 * Questions an MCP server asked during a tool call (`elicitation/create`,
 * docs/TOOLS.md "Elicitation"), each drawn as its form: submit (`accept`
 * with the values), decline or cancel, through `elicitation.answer`. The
 * server checks the content against the schema and applies its defaults; a
 * refusal (ELICITATION_INVALID) is shown under the form. The message and the
 * form are the server's words, shown as text, never as markup.
 */
export function Elicitations({
  socket,
  session,
  readOnly,
}: {
  socket: ChronicleSocket
  session: Session
  readOnly: boolean
}) {
  const pending = session.pendingElicitations ?? []
  if (pending.length === 0) return null
  return (
    <section class="permissions" aria-labelledby="elicitations-title">
      <h2 id="elicitations-title">A tool server asks</h2>
      {pending.map((q) => (
        <QuestionForm key={q.elicitationId} socket={socket} sessionId={session.id} question={q} readOnly={readOnly} />
      ))}
    </section>
  )
}

function QuestionForm({
  socket,
  sessionId,
  question,
  readOnly,
}: {
  socket: ChronicleSocket
  sessionId: string
  question: Question
  readOnly: boolean
}) {
  const { fields, unsupported } = fieldsOf(question.requestedSchema)
  const [values, setValues] = useState<Record<string, Value>>(() =>
    Object.fromEntries(fields.map((f) => [f.name, f.initial])),
  )
  const answer = useAction((action: 'accept' | 'decline' | 'cancel') =>
    socket.call('elicitation.answer', {
      session: sessionId,
      elicitationId: question.elicitationId,
      action,
      ...(action === 'accept' && { content: contentOf(fields, values) }),
    }),
  )
  const id = (name: string) => `eli-${question.elicitationId}-${name}`
  return (
    <form
      class="request"
      aria-label={`Question from ${question.server}`}
      onSubmit={(e) => {
        e.preventDefault()
        void answer.start('accept')
      }}
    >
      <p>
        <strong>{question.server}</strong>: {question.message}
        {question.from && (
          <span class="from">
            {' '}
            (asked in a sub-agent's call, <a href={`#/s/${question.from.sessionId}`}>{question.from.sessionId}</a>)
          </span>
        )}
      </p>
      {fields.map((f) => (
        <p key={f.name}>
          <label for={id(f.name)}>
            {f.label}
            {f.required && ' (required)'}
          </label>{' '}
          <FieldInput
            id={id(f.name)}
            field={f}
            value={values[f.name] ?? f.initial}
            disabled={readOnly}
            onChange={(v) => setValues((all) => ({ ...all, [f.name]: v }))}
          />
          {f.description && <span class="who"> {f.description}</span>}
        </p>
      ))}
      {unsupported.length > 0 && (
        <p class="warning">This page cannot fill in {unsupported.join(', ')}: answer from an API client, or decline.</p>
      )}
      <div class="actions">
        <button type="submit" disabled={answer.busy || readOnly || unsupported.length > 0}>
          Submit
        </button>
        <button type="button" disabled={answer.busy || readOnly} onClick={() => void answer.start('decline')}>
          Decline
        </button>
        <button
          type="button"
          class="danger"
          disabled={answer.busy || readOnly}
          onClick={() => void answer.start('cancel')}
        >
          Cancel
        </button>
      </div>
      <ErrorNote error={answer.error} />
    </form>
  )
}

function FieldInput({
  id,
  field,
  value,
  disabled,
  onChange,
}: {
  id: string
  field: Field
  value: Value
  disabled: boolean
  onChange: (value: Value) => void
}) {
  if (field.kind === 'boolean')
    return (
      <input
        id={id}
        type="checkbox"
        checked={value === true}
        disabled={disabled}
        onChange={(e) => onChange(e.currentTarget.checked)}
      />
    )
  if (field.kind === 'choice')
    return (
      <select id={id} value={String(value)} disabled={disabled} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">—</option>
        {field.choices?.map((c) => (
          <option key={c.value} value={c.value}>
            {c.label}
          </option>
        ))}
      </select>
    )
  const type = field.kind === 'integer' ? 'number' : field.kind
  return (
    <input
      id={id}
      type={type}
      value={String(value)}
      step={field.kind === 'integer' ? 1 : field.kind === 'number' ? 'any' : undefined}
      disabled={disabled}
      onInput={(e) => onChange(e.currentTarget.value)}
    />
  )
}

/** What the form holds, typed as the schema asks; an empty field is left out (the server applies defaults). */
function contentOf(fields: readonly Field[], values: Record<string, Value>): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {}
  for (const f of fields) {
    const v = values[f.name]
    if (f.kind === 'boolean') out[f.name] = v === true
    else if (typeof v !== 'string' || v === '') continue
    else if (f.kind === 'number' || f.kind === 'integer') out[f.name] = Number(v)
    else out[f.name] = v
  }
  return out
}
