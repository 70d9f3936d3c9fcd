import { z } from 'zod'
import type { Connector } from '../net/connect.js'
import { NetRefusal } from '../net/refusal.js'
import type { Resolver } from '../net/resolve.js'
import { NO_SECRETS, type Redactor } from '../redact.js'
import { defineTool, ToolFailure } from '../tool.js'
import { truncateOutput } from '../truncate.js'
import { decodeText, isHtml } from '../web/content-type.js'
import { FetchError } from '../web/fetch-error.js'
import { fetchPage } from '../web/fetch-page.js'
import { convertHtml } from '../web/html.js'

/**
 * webfetch: a web page, fetched by the server — not the sandbox, which has no
 * network — as Markdown, text or HTML (docs/TOOLS.md "webfetch"). It asks
 * `webfetch` with the host as pattern for the first URL and for every other
 * host a redirect leads to. Where it may connect is src/tools/net/'s rule
 * (docs/SECURITY.md "Server-side request forgery"); the text is scrubbed of
 * the server's secrets before the full copy is saved, and the runtime
 * scrubs what is recorded again.
 */

export interface WebFetchSettings {
  /** names whose addresses are not checked (an intranet host); the user's config only */
  readonly allowHosts: readonly string[]
  /** the body is cut here, after decompression */
  readonly maxBytes: number
  readonly defaultTimeoutSeconds: number
  readonly maxTimeoutSeconds: number
  readonly maxRedirects: number
}

export const DEFAULT_WEBFETCH: WebFetchSettings = {
  allowHosts: [],
  maxBytes: 5 * 1024 * 1024,
  defaultTimeoutSeconds: 30,
  maxTimeoutSeconds: 120,
  maxRedirects: 5,
}

export interface WebFetchDeps {
  /** the full text of a long page is saved under <dataDir>/tool-output */
  readonly dataDir: string
  readonly settings?: Partial<WebFetchSettings>
  /** DNS (default: the system's); tests map their own names to 127.0.0.1 */
  readonly resolve?: Resolver
  /** opens the TCP connection to the checked address (default net.connect) */
  readonly connector?: Connector
  /** the ports this server listens on: never fetched on this machine */
  readonly ownPorts?: () => readonly number[]
  readonly redactor?: Redactor
}

const ACCEPT: Record<Format, string> = {
  markdown: 'text/markdown;q=1.0, text/html;q=0.9, text/plain;q=0.8, */*;q=0.1',
  text: 'text/plain;q=1.0, text/html;q=0.9, text/markdown;q=0.8, */*;q=0.1',
  html: 'text/html;q=1.0, application/xhtml+xml;q=0.9, text/plain;q=0.8, */*;q=0.1',
}
type Format = 'markdown' | 'text' | 'html'

/** A 5 MB page converts in about 3 s here; past this the page is given up as too costly. */
const CONVERSION_DEADLINE_MS = 20_000

export function createWebFetchTool(deps: WebFetchDeps) {
  const settings = { ...DEFAULT_WEBFETCH, ...deps.settings }
  const redactor = deps.redactor ?? NO_SECRETS
  const parameters = z.object({
    url: z.string().min(1).describe('The http:// or https:// URL to fetch'),
    format: z
      .enum(['markdown', 'text', 'html'])
      .default('markdown')
      .describe('What to return: markdown (HTML converted, the default), text (HTML without tags) or html (as sent)'),
    timeout: z
      .number()
      .positive()
      .max(settings.maxTimeoutSeconds)
      .optional()
      .describe(`Seconds to wait for the whole page (default ${settings.defaultTimeoutSeconds})`),
  })
  const timeoutMs = (args: { timeout?: number | undefined }) =>
    Math.round((args.timeout ?? settings.defaultTimeoutSeconds) * 1000)
  return defineTool({
    id: 'webfetch',
    permission: 'webfetch',
    description: `Fetches a web page by URL and returns its content as Markdown (default), plain text or HTML. Public http(s) addresses only; text content only (HTML, text, JSON, XML); at most ${settings.maxBytes} bytes are read. Use it to read documentation or a page the user names.`,
    parameters,
    // waiting for the user does not count (the runtime pauses the budget); converting the page does
    budgetMs: (args) => timeoutMs(args) + CONVERSION_DEADLINE_MS + 10_000,
    async execute(args, ctx) {
      const asked = new Set<string>()
      let page: Awaited<ReturnType<typeof fetchPage>>
      try {
        page = await fetchPage(args.url, {
          policy: {
            allowHosts: settings.allowHosts,
            ...(deps.resolve && { resolve: deps.resolve }),
            ...(deps.ownPorts && { ownPorts: deps.ownPorts }),
          },
          ...(deps.connector && { connector: deps.connector }),
          maxBytes: settings.maxBytes,
          maxRedirects: settings.maxRedirects,
          timeoutMs: timeoutMs(args),
          signal: ctx.abort,
          accept: ACCEPT[args.format],
          // every host the fetch reaches is asked for, the first and each a redirect leads to
          beforeHop: async (target) => {
            if (asked.has(target.hostname)) return
            asked.add(target.hostname)
            await ctx.ask({
              permission: 'webfetch',
              patterns: [target.hostname],
              metadata: { url: target.url.href, format: args.format },
            })
          },
        })
      } catch (err) {
        if (err instanceof NetRefusal || err instanceof FetchError) throw new ToolFailure('failed', err.message)
        throw err
      }
      let content = decodeText(page.body, page.contentType.charset)
      if (isHtml(page.contentType.mime) && args.format !== 'html') {
        try {
          content = await convertHtml(content, args.format, { deadlineMs: CONVERSION_DEADLINE_MS, signal: ctx.abort })
        } catch (err) {
          if (err instanceof FetchError) throw new ToolFailure('failed', err.message)
          throw err
        }
      }
      if (page.truncated)
        content += `\n\n[webfetch: the page is larger than ${settings.maxBytes} bytes; only its first ${settings.maxBytes} bytes were read.]`
      // scrubbed before the full copy is written to the data directory (the runtime scrubs the output again)
      const saved = truncateOutput(redactor.text(content), {
        dataDir: deps.dataDir,
        sessionId: ctx.sessionId,
        name: `webfetch_${ctx.partId}`,
      })
      return {
        output: saved.output,
        title: `${page.url} (${page.contentType.mime || 'no content type'})`,
        metadata: {
          url: page.url,
          status: page.status,
          contentType: page.contentType.mime,
          bytes: page.body.length,
          bodyTruncated: page.truncated,
          truncated: saved.truncated,
          ...(saved.outputPath && { outputPath: saved.outputPath }),
          hops: page.hops,
        },
      }
    },
  })
}
