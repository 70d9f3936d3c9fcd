/**
 * The title call's instructions (src/runtime/titles.ts). Exported so that
 * the scripted model can recognise a title request and answer it without
 * playing a step of its script.
 */
export const TITLE_SYSTEM =
  'You write titles for conversations between a user and a coding agent. Reply with the title only: ' +
  'at most 8 words, no quotes, no trailing punctuation, in the language the user wrote in.'
