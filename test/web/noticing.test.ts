import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import { buildPage, launch, prepare, type Served, sendMessage, serve, tempDir, watchProblems } from './helpers.js'

/**
 * Noticing in a real Chromium (docs/WEB.md "Noticing"): with the page in the
 * background, the tab's title and a browser notification say when the
 * session waits for an approval and when its run ended; back in view, the
 * title is the session's again. Notifications are allowed for the page's
 * origin; the page is put in the background by its visibility state, and
 * the notifications it makes are recorded as they are made.
 */

const SCRIPT: Script = {
  chunkSize: 64,
  uniqueCallIds: true,
  steps: [
    {
      when: { userContains: 'list files', afterToolResult: false },
      toolCalls: [{ name: 'bash', input: { command: 'ls', description: 'list the files' } }],
    },
    { when: { userContains: 'list files', afterToolResult: true }, text: 'Listed.' },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
const problems: string[] = []

prepare(async () => {
  dir = tempDir('noticing')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  await context.grantPermissions(['notifications'], { origin: server.url })
  page = await context.newPage()
  watchProblems(page, problems)
  await page.goto(server.chronicle.loginLink().url)
  await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
  await page.getByLabel('Title (optional)').fill('noticing')
  await page.getByRole('button', { name: 'New session' }).click()
  await page.getByRole('heading', { level: 1, name: 'noticing' }).waitFor()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

const visibility = (state: 'hidden' | 'visible') =>
  page.evaluate((state) => {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => state })
    document.dispatchEvent(new Event('visibilitychange'))
  }, state)

const notes = () => page.evaluate(() => (window as unknown as { __notes: [string, string][] }).__notes)

describe('noticing a session in the background', () => {
  it('the title and a notification say it waits for you, then that its run ended; in view the title is plain', async () => {
    expect(await page.title()).toBe('noticing — Chronicle')
    // the page's notifications, recorded as they are made (the real Notification still runs)
    await page.evaluate(() => {
      const w = window as unknown as { __notes: [string, string][]; Notification: typeof Notification }
      w.__notes = []
      const Real = w.Notification
      w.Notification = class extends Real {
        constructor(title: string, options?: NotificationOptions) {
          super(title, options)
          w.__notes.push([title, options?.body ?? ''])
        }
      }
    })
    await sendMessage(page, 'list files')
    await page.getByRole('button', { name: 'Allow once' }).waitFor()
    expect(await notes()).toEqual([]) // in view: the page shows it, nothing else is said
    await page.getByRole('button', { name: 'Allow once' }).click()
    await page.getByText('Listed.').waitFor()
    await page.getByRole('status').filter({ hasText: /^Idle/ }).waitFor()
    expect(await page.title()).toBe('noticing — Chronicle')

    await visibility('hidden')
    await sendMessage(page, 'list files again')
    await expect.poll(() => page.title()).toBe('● Waiting for you · noticing — Chronicle')
    expect(await notes()).toEqual([['noticing is waiting for you', 'permission: bash']])
    // answered from elsewhere (an API client): the run goes on and ends while the page is away
    const session = /#\/s\/(ses_\w+)/.exec(page.url())?.[1] as string
    const { pendingPermissions } = (
      (await (
        await fetch(`${server.url}/sessions/${session}`, {
          headers: { authorization: `Bearer ${server.chronicle.token.token}` },
        })
      ).json()) as { session: { id: string; pendingPermissions: { requestId: string }[] } }
    ).session
    const reply = await fetch(`${server.url}/sessions/${session}/permissions/${pendingPermissions[0]?.requestId}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.chronicle.token.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ reply: 'once' }),
    })
    expect(reply.status).toBe(200)
    await expect.poll(() => page.title()).toBe('✓ Run ended · noticing — Chronicle')
    expect(await notes()).toEqual([
      ['noticing is waiting for you', 'permission: bash'],
      ['noticing finished its run', 'The run ended: idle'],
    ])

    await visibility('visible')
    await expect.poll(() => page.title()).toBe('noticing — Chronicle')
    expect(problems).toEqual([])
  })
})
