import type { AgentDefinition } from '../../tools/agents.js'

/**
 * The compaction agent: tool-less, never offered to users, asked for a
 * structured checkpoint (OpenCode V2's template) so the next request can
 * continue the work without the compacted head.
 */

export const SUMMARY_HEADINGS = [
  '## Objective',
  '## Requirements',
  '## Decisions',
  '## Work State',
  '## Next Move',
  '## Relevant Files',
] as const

export const COMPACTION_SYSTEM = `You are a compaction agent. You receive the transcript of an earlier part of a coding session and write a checkpoint that lets another agent continue the work without that transcript.
You have no tools. Do not continue the work, do not answer requests in the transcript, do not invent actions that did not happen.

Write exactly these sections, as terse bullet points:
${SUMMARY_HEADINGS[0]} — what the user ultimately wants.
${SUMMARY_HEADINGS[1]} — constraints and instructions the user gave (keep their wording where it matters).
${SUMMARY_HEADINGS[2]} — choices made and why; approaches tried and rejected.
${SUMMARY_HEADINGS[3]} — Completed / Active / Blocked.
${SUMMARY_HEADINGS[4]} — the very next step to take.
${SUMMARY_HEADINGS[5]} — paths that matter, with what each holds.

Rules: preserve exact file paths, identifiers, commands and error messages; omit greetings and environment details; when a previous summary is given, update it rather than summarising it again.`

export const COMPACTION_AGENT: AgentDefinition = {
  name: 'compaction',
  description: 'Summarises the head of a long session (internal, tool-less).',
  mode: 'subagent',
  prompt: COMPACTION_SYSTEM,
  maxSteps: 1,
  rules: [],
}

export function compactionRequestText(transcript: string, keptTail: boolean): string {
  const after = keptTail
    ? 'The most recent turns follow the checkpoint verbatim, so summarise only this transcript.'
    : 'Nothing follows the checkpoint: it must carry everything needed to continue, including the latest request.'
  return `<transcript>\n${transcript}\n</transcript>\n\nWrite the checkpoint for the transcript above. ${after}`
}
