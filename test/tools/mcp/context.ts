import { tmpdir } from 'node:os'
import type { ToolContext } from '../../../src/tools/tool.js'

/** A tool call's context for specs that call an MCP tool directly: every permission allowed. */
export const allowAll: ToolContext = {
  sessionId: 's',
  messageId: 'm',
  callId: 'c',
  partId: 'p',
  agent: 'build',
  directory: tmpdir(),
  abort: new AbortController().signal,
  progress: () => {},
  ask: async () => {},
  check: () => 'allow',
}
