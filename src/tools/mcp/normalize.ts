import type { Attachment } from '../../events/catalogue.js'
import { ToolFailure, type ToolResult } from '../tool.js'

/** The content items of an MCP tool result (what the SDK returns). */
export interface McpContent {
  readonly type: string
  readonly text?: string
  readonly data?: string
  readonly mimeType?: string
  readonly uri?: string
  readonly name?: string
  readonly resource?: {
    readonly uri: string
    readonly mimeType?: string
    readonly text?: string
    readonly blob?: string
  }
}

export interface McpCallResult {
  readonly content?: readonly McpContent[]
  readonly isError?: boolean
  readonly structuredContent?: unknown
}

/**
 * An MCP result as a Chronicle ToolResult: text items joined into the output,
 * images and audio as attachments, embedded resources as attachments (their
 * text also in the output), resource links described. `isError` becomes a
 * ToolFailure('failed') carrying the server's text, so the model sees it.
 */
export function normalizeResult(result: McpCallResult): ToolResult {
  const texts: string[] = []
  const attachments: Attachment[] = []
  for (const item of result.content ?? []) {
    switch (item.type) {
      case 'text':
        texts.push(item.text ?? '')
        break
      case 'image':
      case 'audio':
        attachments.push({
          type: item.type,
          ...(item.mimeType && { mediaType: item.mimeType }),
          ...(item.data !== undefined && { data: item.data }),
        })
        break
      case 'resource': {
        const r = item.resource
        if (!r) break
        if (r.text !== undefined) texts.push(r.text)
        attachments.push({
          type: 'resource',
          uri: r.uri,
          ...(r.mimeType && { mediaType: r.mimeType }),
          ...(r.text !== undefined && { text: r.text }),
          ...(r.blob !== undefined && { data: r.blob }),
        })
        break
      }
      case 'resource_link':
        texts.push(`[resource ${item.name ?? ''} ${item.uri ?? ''}]`.replace(/\s+/g, ' '))
        break
      default:
        texts.push(`[unsupported MCP content: ${item.type}]`)
    }
  }
  if (texts.length === 0 && result.structuredContent !== undefined) texts.push(JSON.stringify(result.structuredContent))
  const output = texts.join('\n\n')
  if (result.isError) throw new ToolFailure('failed', output || 'The MCP tool reported an error without a message.')
  return { output, ...(attachments.length > 0 && { attachments }) }
}
