import type { Message, SessionView } from '../../projections/fold/model.js'
import { latestUser } from './context.js'
import type { Transcript } from './transcript.js'

/**
 * The stop rule (docs/TRACES.md), in one place: a run has nothing left to do
 * when the latest assistant message answers the latest user message — it
 * follows it, is complete, was not cut off by a restart (recovery resumes
 * that), finished for a reason other than tool calls, and holds no tool call
 * whose result the model has not seen yet. No user message: nothing to answer.
 */
export function answers(
  user: Message | undefined,
  assistant: Message | undefined,
  hasToolCalls: (messageId: string) => boolean,
): boolean {
  if (!user) return true
  if (!assistant || assistant.parentId !== user.id || assistant.id < user.id || !assistant.completedAt) return false
  if (assistant.error?.kind === 'interrupted') return false
  if (assistant.finish === 'tool-calls') return false
  return !hasToolCalls(assistant.id)
}

/** The rule over the run's maintained transcript: O(1) however long the session (the loop, each step). */
export function transcriptAnswered(transcript: Transcript): boolean {
  return answers(transcript.latest('user'), transcript.latest('assistant'), (id) =>
    transcript.partsOf(id).some((p) => p.type === 'tool'),
  )
}

/** The rule over a session's view (a compaction deciding whether its summary keeps the session answered). */
export function viewAnswered(view: SessionView): boolean {
  let assistant: Message | undefined
  for (const m of view.messages.values())
    if (m.role === 'assistant' && (!assistant || m.id > assistant.id)) assistant = m
  return answers(latestUser(view), assistant, (id) => {
    for (const p of view.parts.values()) if (p.messageId === id && p.type === 'tool') return true
    return false
  })
}
