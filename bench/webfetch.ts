import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, get } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createWebFetchTool } from '../src/tools/builtin/webfetch.js'
import type { ToolContext } from '../src/tools/tool.js'

/**
 * `npm run bench -- webfetch [--runs 20] [--kb 1024]`: what webfetch adds to
 * the fetch itself (docs/TOOLS.md "webfetch"; the target: ≤ 20 ms for
 * a 1 MB page). A local server sends the same page as text/plain and as HTML;
 * each run times a bare `http.get` that reads the whole body (the baseline)
 * and the webfetch tool's execute — resolution, checks, pinned connection,
 * decoding, HTML conversion in its worker, redaction, truncation and the
 * saved copy — alternating so both see the same machine. Medians, ms.
 */
export default async function (args: string[]): Promise<object> {
  const runs = flag(args, '--runs', 20)
  const kb = flag(args, '--kb', 1024)
  const line = '<div><h2>Part</h2><p>Words and <a href="/x">links</a> and <b>more</b> words.</p></div>\n'
  const html = `<html><body>${line.repeat(Math.ceil((kb * 1024) / line.length))}</body></html>`
  const text = 'plain words of a text page\n'.repeat(Math.ceil((kb * 1024) / 27))
  const server = createServer((req, res) => {
    const isHtml = req.url?.startsWith('/page.html')
    res.writeHead(200, { 'content-type': isHtml ? 'text/html' : 'text/plain' }).end(isHtml ? html : text)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const dataDir = mkdtempSync(join(tmpdir(), 'chronicle-bench-webfetch-'))
  const tool = createWebFetchTool({
    dataDir,
    resolve: async () => [{ address: '127.0.0.1', family: 4 }],
    settings: { allowHosts: ['bench.test'] },
  })
  const cases = [
    { name: 'text', path: '/page.txt', format: 'markdown' as const },
    { name: 'htmlAsHtml', path: '/page.html', format: 'html' as const },
    { name: 'htmlToMarkdown', path: '/page.html', format: 'markdown' as const },
    { name: 'htmlToText', path: '/page.html', format: 'text' as const },
  ]
  try {
    const figures: Record<string, { fetchMs: number; webfetchMs: number; overheadMs: number }> = {}
    for (const c of cases) {
      const bare: number[] = []
      const tooled: number[] = []
      for (let i = 0; i < runs + 2; i++) {
        const b = await timed(() => bareGet(`http://127.0.0.1:${port}${c.path}`))
        const t = await timed(() =>
          tool.execute({ url: `http://bench.test:${port}${c.path}`, format: c.format }, ctx()),
        )
        if (i < 2) continue // warm-up
        bare.push(b)
        tooled.push(t)
      }
      const fetchMs = median(bare)
      const webfetchMs = median(tooled)
      figures[c.name] = { fetchMs, webfetchMs, overheadMs: round(webfetchMs - fetchMs) }
    }
    return { runs, pageKb: kb, ...figures }
  } finally {
    server.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

function bareGet(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    get(url, (res) => {
      res.on('data', () => undefined)
      res.on('end', resolve)
      res.on('error', reject)
    }).on('error', reject)
  })
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now()
  await fn()
  return performance.now() - start
}

function ctx(): ToolContext {
  return {
    sessionId: 'ses_bench',
    messageId: 'msg_bench',
    callId: 'call_bench',
    partId: 'prt_bench',
    agent: 'build',
    directory: tmpdir(),
    abort: new AbortController().signal,
    progress: () => undefined,
    ask: async () => undefined,
    check: () => 'allow',
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return round(sorted[Math.floor(sorted.length / 2)] ?? 0)
}

function round(n: number): number {
  return Math.round(n * 100) / 100
}

function flag(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name)
  const value = i >= 0 ? Number(args[i + 1]) : fallback
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive whole number`)
  return value
}
