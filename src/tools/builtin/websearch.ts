import { z } from 'zod'
import type { Connector } from '../net/connect.js'
import { NetRefusal } from '../net/refusal.js'
import type { Resolver } from '../net/resolve.js'
import { NO_SECRETS, type Redactor } from '../redact.js'
import { defineTool, ToolFailure } from '../tool.js'
import { decodeText } from '../web/content-type.js'
import { FetchError } from '../web/fetch-error.js'
import { fetchPage } from '../web/fetch-page.js'
import type { WebFetchSettings } from './webfetch.js'

/**
 * websearch: a web search through the provider the user's config names
 * (docs/TOOLS.md "websearch") — a SearXNG instance's JSON API, or any JSON
 * API whose URL takes the query — fetched by the server with webfetch's
 * caps and address checks. Offered only when a provider is configured. It
 * asks `websearch` with the query as pattern; the results (title, url,
 * snippet) are the tool's output, scrubbed of the server's secrets (the
 * provider's key among them: it is sent to the provider's own origin only).
 */

export interface WebSearchSettings {
  /** the provider's URL: `{query}` and `{limit}` are replaced, URL-encoded */
  readonly url: string
  /** headers sent to the provider's origin (`{env:NAME}` already resolved by the config) */
  readonly headers: Readonly<Record<string, string>>
  /** the environment's values the headers took (`{env:NAME}`): the server's secrets */
  readonly secrets: readonly { readonly name: string; readonly value: string }[]
  /** where the JSON answer holds its results, and their fields (dotted paths; SearXNG's by default) */
  readonly fields: { readonly results: string; readonly title: string; readonly url: string; readonly snippet: string }
  /** the most results a call returns */
  readonly maxResults: number
}

export const SEARXNG_FIELDS: WebSearchSettings['fields'] = {
  results: 'results',
  title: 'title',
  url: 'url',
  snippet: 'content',
}

export interface WebSearchDeps {
  readonly settings: WebSearchSettings
  /** webfetch's caps: the body's bytes, the wait, the redirects; its allowed hosts */
  readonly fetch: WebFetchSettings
  readonly resolve?: Resolver
  readonly connector?: Connector
  readonly ownPorts?: () => readonly number[]
  readonly redactor?: Redactor
}

export interface SearchResult {
  readonly title: string
  readonly url: string
  readonly snippet: string
}

const DEFAULT_LIMIT = 5
/** what one result keeps of each field */
const CAPS = { title: 300, url: 2000, snippet: 600 } as const

export function createWebSearchTool(deps: WebSearchDeps) {
  const { settings, fetch } = deps
  const redactor = deps.redactor ?? NO_SECRETS
  const provider = new URL(settings.url.replaceAll('{query}', 'q').replaceAll('{limit}', '1'))
  const parameters = z.object({
    query: z.string().min(1).max(500).describe('What to search the web for'),
    limit: z
      .number()
      .int()
      .min(1)
      .max(settings.maxResults)
      .optional()
      .describe(`How many results (default ${Math.min(DEFAULT_LIMIT, settings.maxResults)})`),
  })
  return defineTool({
    id: 'websearch',
    permission: 'websearch',
    description: `Searches the web and returns results as title, URL and snippet. Use it to find documentation or pages to read with webfetch.`,
    parameters,
    budgetMs: () => fetch.defaultTimeoutSeconds * 1000 + 10_000,
    async execute(args, ctx) {
      const limit = args.limit ?? Math.min(DEFAULT_LIMIT, settings.maxResults)
      await ctx.ask({
        permission: 'websearch',
        patterns: [args.query],
        always: ['*'],
        metadata: { query: args.query, provider: provider.origin },
      })
      const url = settings.url
        .replaceAll('{query}', encodeURIComponent(args.query))
        .replaceAll('{limit}', String(limit))
      let page: Awaited<ReturnType<typeof fetchPage>>
      try {
        page = await fetchPage(url, {
          // the provider is the user's choice, by name: an instance on this machine is fine (the server's port is not)
          policy: {
            allowHosts: [...fetch.allowHosts, provider.hostname],
            ...(deps.resolve && { resolve: deps.resolve }),
            ...(deps.ownPorts && { ownPorts: deps.ownPorts }),
          },
          ...(deps.connector && { connector: deps.connector }),
          maxBytes: fetch.maxBytes,
          maxRedirects: fetch.maxRedirects,
          timeoutMs: fetch.defaultTimeoutSeconds * 1000,
          signal: ctx.abort,
          accept: 'application/json',
          credentials: { origin: provider.origin, headers: settings.headers },
        })
      } catch (err) {
        if (err instanceof NetRefusal || err instanceof FetchError)
          throw new ToolFailure('failed', redactor.text(err.message))
        throw err
      }
      if (page.truncated)
        throw new ToolFailure('failed', `the search provider's answer is larger than ${fetch.maxBytes} bytes`)
      const results = redactor.value(extractResults(decodeText(page.body, page.contentType.charset), settings.fields))
      const shown = results.slice(0, limit)
      return {
        output: redactor.text(formatResults(args.query, shown)),
        title: `websearch: ${args.query}`,
        metadata: { query: args.query, provider: provider.origin, status: page.status, results: shown },
      }
    },
  })
}

/** The results a JSON answer holds at the configured paths (a result without a URL is left out). */
export function extractResults(body: string, fields: WebSearchSettings['fields']): SearchResult[] {
  let answer: unknown
  try {
    answer = JSON.parse(body)
  } catch {
    throw new ToolFailure('failed', "the search provider's answer is not JSON")
  }
  const list = at(answer, fields.results)
  if (!Array.isArray(list))
    throw new ToolFailure('failed', `the search provider's answer has no list of results at "${fields.results}"`)
  return list.flatMap((item) => {
    const url = text(at(item, fields.url), CAPS.url)
    if (!url) return []
    return [
      { title: text(at(item, fields.title), CAPS.title), url, snippet: text(at(item, fields.snippet), CAPS.snippet) },
    ]
  })
}

export function formatResults(query: string, results: readonly SearchResult[]): string {
  if (results.length === 0) return `No results for "${query}".`
  return results
    .map((r, i) =>
      [`${i + 1}. ${r.title || r.url}`, `   ${r.url}`, ...(r.snippet ? [`   ${r.snippet}`] : [])].join('\n'),
    )
    .join('\n\n')
}

/** The value at a dotted path ('' is the value itself). */
function at(value: unknown, path: string): unknown {
  if (path === '') return value
  return path
    .split('.')
    .reduce<unknown>(
      (v, key) =>
        v !== null && typeof v === 'object' && Object.hasOwn(v, key) ? (v as Record<string, unknown>)[key] : undefined,
      value,
    )
}

/** A field as one line of plain text: tags and runs of whitespace collapsed, cut at `max` characters. */
function text(value: unknown, max: number): string {
  if (typeof value !== 'string') return ''
  const plain = value
    .replace(/<[^>]*>/g, '')
    .replace(/\s+/g, ' ')
    .trim()
  return plain.length > max ? `${plain.slice(0, max - 1)}…` : plain
}
