import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import {
  buildPage,
  launch,
  prepare,
  type Served,
  screenshot,
  sendMessage,
  serve,
  tempDir,
  watchProblems,
} from './helpers.js'

/**
 * Managing a session from its page in a real Chromium (docs/WEB.md
 * "Managing"): rename, archive and unarchive, compact. Each is checked
 * against the log. The attacker picks the title.
 */

const SCRIPT: Script = {
  chunkSize: 64,
  steps: [
    { when: { userContains: 'hello' }, text: 'Hello.' },
    // the compaction's summary request
    { when: { afterToolResult: false }, text: 'A summary of the session so far.' },
  ],
}
const HOSTILE_TITLE = '<img src=x onerror="window.__pwned=1"> plan'

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
let session: string
const problems: string[] = []

type Ev = { seq: number; type: string; data: Record<string, unknown> }
async function types(): Promise<string[]> {
  const res = await fetch(`${server.url}/sessions/${session}/events?limit=5000`, {
    headers: { authorization: `Bearer ${server.chronicle.token.token}` },
  })
  return ((await res.json()) as { events: Ev[] }).events.map((e) => e.type)
}
const only = async (wanted: readonly string[]) => (await types()).filter((t) => wanted.includes(t))

prepare(async () => {
  dir = tempDir('managing')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  page = await context.newPage()
  watchProblems(page, problems)
  await page.goto(server.chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
  await page.getByLabel('Title (optional)').fill('managing')
  await page.getByRole('button', { name: 'New session' }).click()
  await page.waitForURL(/#\/s\/ses_/)
  session = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
  await page.getByRole('heading', { level: 1, name: 'managing' }).waitFor()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

describe('managing a session from its page', () => {
  it('renames it: the heading and the list show the new title, as text', async () => {
    await page.getByRole('button', { name: 'Rename' }).click()
    const field = page.getByLabel('New title')
    expect(await field.evaluate((el) => el === document.activeElement)).toBe(true)
    await field.fill(HOSTILE_TITLE)
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { level: 1, name: HOSTILE_TITLE }).waitFor()
    expect(await only(['session.renamed'])).toEqual(['session.renamed'])
    await page.getByRole('link', { name: 'Sessions' }).click()
    await page.getByRole('link', { name: HOSTILE_TITLE }).waitFor()
    expect(await page.locator('img').count()).toBe(0)
    await page.getByRole('link', { name: HOSTILE_TITLE }).click()
    await page.getByRole('heading', { level: 1, name: HOSTILE_TITLE }).waitFor()
  })

  it('archives it and brings it back: the list hides and shows it', async () => {
    await page.getByRole('button', { name: 'Archive' }).click()
    await page.getByRole('button', { name: 'Unarchive' }).waitFor()
    await page.getByText('· archived').waitFor()
    await page.getByRole('link', { name: 'Sessions' }).click()
    await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
    await page.getByText('No sessions').or(page.getByRole('list')).first().waitFor()
    expect(await page.getByRole('link', { name: HOSTILE_TITLE }).count()).toBe(0)
    await page.getByLabel('Include archived sessions').check()
    await page.getByRole('link', { name: HOSTILE_TITLE }).click()
    await page.getByRole('button', { name: 'Unarchive' }).click()
    await page.getByRole('button', { name: 'Archive' }).waitFor()
    expect(await only(['session.archived', 'session.unarchived'])).toEqual(['session.archived', 'session.unarchived'])
    await sendMessage(page, 'hello again') // an unarchived session takes input
    await page.getByText('Hello.').waitFor()
  })

  it('compacts it: the compaction is asked for and runs to its end', async () => {
    await page.getByRole('status').filter({ hasText: /^Idle/ }).waitFor()
    await page.getByRole('button', { name: 'Compact' }).click()
    await expect
      .poll(() => only(['compaction.requested', 'compaction.completed']), { timeout: 20_000 })
      .toEqual(['compaction.requested', 'compaction.completed'])
    await page.getByRole('button', { name: 'Compact' }).waitFor()
    await screenshot(page, 'managing')
    expect(problems).toEqual([])
  })
})
