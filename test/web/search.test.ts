import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import { buildPage, launch, prepare, type Served, sendMessage, serve, tempDir, watchProblems } from './helpers.js'

/**
 * Search in a real Chromium (docs/SEARCH.md, docs/WEB.md): type a query in
 * the header's box, see the hits with their matches marked, click one and
 * land on the session in time travel at the event where the match first
 * appeared, the match highlighted in the transcript. The model writes the
 * text searched, hostile markup included: it stays text.
 */

const SCRIPT: Script = {
  chunkSize: 8,
  steps: [
    { when: { userContains: 'first' }, text: 'Nothing to see in this answer.' },
    {
      when: { userContains: 'second' },
      text: 'The pelican test is flaky on CI <img src=x onerror="window.__pwned=1"> because of the clock.',
    },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
let session: string
const problems: string[] = []

prepare(async () => {
  dir = tempDir('search')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  page = await context.newPage()
  watchProblems(page, problems)
  await page.goto(server.chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
  await page.getByLabel('Title (optional)').fill('Bird tests')
  await page.getByRole('button', { name: 'New session' }).click()
  await page.getByRole('heading', { level: 1, name: 'Bird tests' }).waitFor()
  session = (/#\/s\/([\w-]+)/.exec(page.url()) ?? [])[1] as string
  await sendMessage(page, 'first question')
  await page.getByText('Nothing to see in this answer.').waitFor()
  await sendMessage(page, 'second question')
  await page.getByText(/because of the clock\./).waitFor()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

describe('the search box', () => {
  it('finds the answer, its match marked; a click lands on the event in time travel, the match highlighted', async () => {
    await page.getByRole('searchbox', { name: 'Search every session' }).fill('pelican flaky')
    await page.getByRole('searchbox', { name: 'Search every session' }).press('Enter')
    await page.getByRole('heading', { level: 1, name: 'Search' }).waitFor()
    const hit = page.locator('.search-hit')
    await hit.first().waitFor()
    expect(await hit.count()).toBe(1)
    expect(await hit.locator('mark').allTextContents()).toEqual(['pelican', 'flaky'])
    expect(await hit.locator('.snippet').textContent()).toBe(
      'The pelican test is flaky on CI <img src=x onerror="window.__pwned=1"> because of the clock.',
    )
    expect(await hit.locator('.snippet img').count()).toBe(0)
    const href = (await hit.getByRole('link', { name: 'Bird tests' }).getAttribute('href')) as string
    const seq = Number((new RegExp(`^#/s/${session}@(\\d+)$`).exec(href) ?? [])[1])
    expect(seq).toBeGreaterThan(0)

    // the event where "pelican" first appeared: the delta that wrote it, mid-stream
    const events = (await (
      await fetch(`${server.url}/sessions/${session}/events?limit=5000`, {
        headers: { authorization: `Bearer ${server.chronicle.token.token}` },
      })
    ).json()) as { events: { seq: number; type: string; data: { text?: string } }[] }
    const upTo = events.events.filter((e) => e.seq <= seq && e.type === 'text.delta').map((e) => e.data.text ?? '')
    expect(upTo.join('')).toContain('pelican')
    expect(upTo.slice(0, -1).join('')).not.toContain('pelican')

    await hit.getByRole('link', { name: 'Bird tests' }).click()
    await page.waitForURL(`**/#/s/${session}@${seq}`)
    const transcript = page.getByRole('region', { name: 'Transcript' })
    await transcript.getByText(/The pelican/).waitFor()
    // time travel: the answer as it was at that event, half-written
    expect(await transcript.textContent()).not.toContain('because of the clock')
    await page.waitForFunction(() =>
      (CSS as unknown as { highlights: Map<string, unknown> }).highlights.has('search-hit'),
    )
    const highlighted = await page.evaluate(() => {
      const h = (CSS as unknown as { highlights: Map<string, Set<Range>> }).highlights.get('search-hit')
      return [...(h ?? [])].map((r) => r.toString())
    })
    expect(highlighted).toEqual(['pelican'])
    expect(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned)).toBeUndefined()
    expect(problems).toEqual([])
  })

  it('a malformed query says what is wrong and where', async () => {
    await page.getByRole('searchbox', { name: 'Search every session' }).fill('"pelican')
    await page.getByRole('searchbox', { name: 'Search every session' }).press('Enter')
    await expect
      .poll(() => page.getByRole('alert').textContent())
      .toBe('BAD_QUERY this quote is never closed (at character 1)')
    expect(problems).toEqual([])
  })
})
