import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import { buildPage, launch, loggedIn, pageTexts, prepare, type Served, serve, serverTexts, tempDir } from './helpers.js'

/**
 * A cold open: a new tab loading `#/s/<id>` (docs/WEB.md "The cold open").
 * The page draws the transcript's tail first and the rest of its window
 * after the first paint, and reads the session's state before its
 * subscription starts: it must end with the whole window drawn and
 * scrollable, miss or repeat nothing that was appended meanwhile, and a
 * logged-out tab must ask for nothing but who it is.
 */

let dir: string
let root: string
let browser: Browser
let server: Served
let context: BrowserContext

const auth = () => ({ authorization: `Bearer ${server.chronicle.token.token}` })
async function post<T>(path: string, body: unknown): Promise<T> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  expect(res.ok).toBe(true)
  return (await res.json()) as T
}
const newSession = async () => (await post<{ session: { id: string } }>('/sessions', {})).session.id
const note = (id: string, text: string) =>
  post(`/sessions/${id}/inputs`, { parts: [{ type: 'text', text }], noReply: true })

prepare(async () => {
  dir = tempDir('cold')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: { steps: [] } as Script })
  context = (await loggedIn(browser, server.chronicle)).context()
})

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

/** Whether an element's box is inside the transcript's visible box. */
async function inView(page: Page, text: string): Promise<boolean> {
  const box = await page.getByRole('region', { name: 'Transcript' }).boundingBox()
  const el = await page.locator('.transcript .part.text', { hasText: new RegExp(`^${text}$`) }).boundingBox()
  return !!box && !!el && el.y >= box.y - 1 && el.y + el.height <= box.y + box.height + 1
}

describe('a cold tab', () => {
  it('draws the latest messages, then the rest of the window: all 30 in order, opened at the end, the earlier ones on request', async () => {
    const id = await newSession()
    const notes = Array.from({ length: 40 }, (_, i) => `note ${i}`)
    for (const text of notes) await note(id, text)
    const page = await context.newPage()
    await page.goto(`${server.url}/#/s/${id}`)
    await expect.poll(() => pageTexts(page)).toEqual(notes.slice(10))
    expect(await inView(page, 'note 39')).toBe(true)
    expect(await inView(page, 'note 10')).toBe(false)
    // scrolled by keyboard to its start: the earliest drawn message, and the button for the ten before it
    await page.getByRole('region', { name: 'Transcript' }).focus()
    await page.keyboard.press('Home')
    await expect.poll(() => inView(page, 'note 10')).toBe(true)
    await page.getByRole('button', { name: 'Show earlier messages (10 not shown)' }).click()
    await expect.poll(() => pageTexts(page)).toEqual(notes)
    await page.close()
  })

  it('misses and repeats nothing appended while it opens', async () => {
    const id = await newSession()
    for (let i = 0; i < 5; i++) await note(id, `before ${i}`)
    const page = await context.newPage()
    // notes keep coming while the tab loads, reads the state and subscribes after it
    let writing = true
    const during = (async () => {
      for (let i = 0; writing && i < 20; i++) {
        await note(id, `during ${i}`)
        await new Promise((r) => setTimeout(r, 10))
      }
    })()
    await page.goto(`${server.url}/#/s/${id}`)
    await page.getByRole('region', { name: 'Transcript' }).waitFor()
    writing = false
    await during
    for (let i = 0; i < 3; i++) await note(id, `after ${i}`)
    const expected = await serverTexts(server.chronicle, id, server.url)
    expect(expected.slice(-3)).toEqual(['after 0', 'after 1', 'after 2'])
    await expect.poll(() => pageTexts(page)).toEqual(expected)
    await page.close()
  })

  it('a session that does not exist: the socket’s refusal is shown, as when it is opened from the list', async () => {
    const page = await context.newPage()
    await page.goto(`${server.url}/#/s/ses_nosuchsession`)
    await page.getByRole('alert').filter({ hasText: 'SESSION_NOT_FOUND' }).waitFor()
    expect(await page.getByRole('region', { name: 'Transcript' }).count()).toBe(0)
    await page.close()
  })

  it('logged out, asks who it is and nothing more: no state, no socket, no console error but that 401', async () => {
    const id = await newSession()
    const stranger = await browser.newContext()
    const page = await stranger.newPage()
    const asked: string[] = []
    const errors: string[] = []
    page.on('request', (r) => asked.push(new URL(r.url()).pathname))
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`${m.text()} (${new URL(m.location().url).pathname})`)
    })
    await page.goto(`${server.url}/#/s/${id}`)
    await page.getByRole('heading', { name: 'Log in to Chronicle' }).waitFor()
    expect(asked.filter((p) => !p.startsWith('/assets/'))).toEqual(['/', '/whoami'])
    expect(errors).toEqual([
      'Failed to load resource: the server responded with a status of 401 (Unauthorized) (/whoami)',
    ])
    await stranger.close()
  })
})
