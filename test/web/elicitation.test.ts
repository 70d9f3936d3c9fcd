import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import { allowElicitTools, ELICIT_SERVER, elicitScript } from '../http/elicitation-fixture.js'
import {
  buildPage,
  launch,
  loggedIn,
  prepare,
  type Served,
  screenshot,
  sendMessage,
  serve,
  tempDir,
} from './helpers.js'

/**
 * A question an MCP server asks during a tool call (docs/TOOLS.md
 * "Elicitation"), answered from the page in a real browser: the form drawn
 * from the server's schema with its defaults, a refusal from the server's
 * check shown under it, then a submit and a decline, each checked against
 * the log. The server is the real eliciting fixture over stdio.
 */

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
let session: string

type Ev = { seq: number; type: string; data: Record<string, unknown> }
async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${server.url}${path}`, {
    headers: { authorization: `Bearer ${server.chronicle.token.token}` },
  })
  expect(res.status).toBe(200)
  return (await res.json()) as T
}
const answers = async () =>
  (await api<{ events: Ev[] }>(`/sessions/${session}/events?limit=5000`)).events
    .filter((e) => e.type === 'elicitation.answered')
    .map((e) => ({ action: e.data.action, content: e.data.content }))

const send = (text: string) => sendMessage(page, text)

prepare(async () => {
  dir = tempDir('elicit')
  root = buildPage()
  browser = await launch()
  server = await serve({
    data: join(dir, 'data'),
    directory: join(dir, 'work'),
    root,
    script: elicitScript,
    config: {
      mcp: [{ name: 'elicit', type: 'local', command: [process.execPath, ELICIT_SERVER], environment: {} }],
      rules: allowElicitTools,
    },
  })
  // the MCP server connects beside the HTTP side: its tools must be there before the model calls one
  for (const end = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 100))) {
    const { servers } = await api<{ servers: { name: string; state: string }[] }>('/mcp/servers')
    if (servers.some((s) => s.name === 'elicit' && s.state === 'ready')) break
    if (Date.now() > end) throw new Error(`the MCP server did not become ready: ${JSON.stringify(servers)}`)
  }
  page = await loggedIn(browser, server.chronicle)
  await page.getByRole('button', { name: 'New session' }).click()
  await page.waitForURL(/#\/s\/ses_/)
  session = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
})

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

describe('a question from a tool server, on the page', () => {
  it('draws the form with its defaults; a missing required field is refused by the server and shown; a submit answers', async () => {
    await send('#book please')
    const form = page.getByRole('form', { name: 'Question from elicit' })
    await form.waitFor()
    await expect(form.locator('p').first().textContent()).resolves.toBe('elicit: Who is the booking for?')
    await expect(form.getByLabel('Name (required)').inputValue()).resolves.toBe('')
    await expect(form.getByLabel('seats', { exact: true }).inputValue()).resolves.toBe('2')
    await expect(form.getByLabel('newsletter', { exact: true }).isChecked()).resolves.toBe(false)
    await page.getByText('Waiting for you: a question from elicit').waitFor()
    await screenshot(page, 'elicitation')

    await form.getByRole('button', { name: 'Submit' }).click()
    await expect(form.getByRole('alert').locator('strong').textContent()).resolves.toBe('ELICITATION_INVALID')
    expect(await answers()).toEqual([]) // refused: nothing appended, the question still open

    await form.getByLabel('Name (required)').fill('Ada')
    await form.getByLabel('newsletter', { exact: true }).check()
    await form.getByRole('button', { name: 'Submit' }).click()
    await page.locator('.part.text', { hasText: 'Done.' }).waitFor()
    expect(await page.getByRole('form', { name: 'Question from elicit' }).count()).toBe(0)
    expect(await answers()).toEqual([{ action: 'accept', content: { name: 'Ada', seats: 2, newsletter: true } }])
  })

  it('declines', async () => {
    await send('#book again')
    const form = page.getByRole('form', { name: 'Question from elicit' })
    await form.waitFor()
    await form.getByRole('button', { name: 'Decline' }).click()
    await form.waitFor({ state: 'detached' })
    await expect.poll(async () => (await answers()).at(-1)).toEqual({ action: 'decline', content: undefined })
  })
})
