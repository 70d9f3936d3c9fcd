import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import { buildPage, launch, loggedIn, pageTexts, type Served, serve, serverTexts, tempDir, prepare } from './helpers.js'

/**
 * The page across a server restart: the Chronicle stops mid-stream (the
 * page says it is reconnecting), a new one starts on the same port and data
 * dir, recovery resumes the run, and an input arrives over HTTP while the
 * page is still away. Once the page is back it shows exactly what the
 * server holds: no part missing, none twice.
 */

const LONG =
  'This answer streams slowly, four characters at a time, so that the server can be stopped while it is still being written; ' +
  'recovery then resumes the run after the restart and the page must show what the log holds, once.'

const SCRIPT: Script = {
  chunkSize: 4,
  steps: [
    { when: { userContains: 'tell a long story' }, text: LONG, delayMs: 30 },
    { when: { userContains: 'second question' }, text: 'Second answer.' },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served | undefined

prepare(async () => {
  dir = tempDir('reconnect')
  root = buildPage()
  browser = await launch()
})

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

const start = (port?: number) =>
  serve({
    data: join(dir, 'data'),
    directory: join(dir, 'work'),
    root,
    script: SCRIPT,
    ...(port !== undefined && { port }),
  })

async function settled(s: Served, session: string): Promise<{ lastSeq: number }> {
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${s.url}/sessions/${session}`, {
      headers: { authorization: `Bearer ${s.chronicle.token.token}` },
    })
    const { session: info } = (await res.json()) as {
      session: { status: string; inbox: unknown[]; lastSeq: number }
    }
    if (info.status === 'idle' && info.inbox.length === 0) return info
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('the session did not settle')
}

describe('a server restart', () => {
  it('shows "Reconnecting…", then resumes from the last seq with no part missing or repeated', async () => {
    server = await start()
    const port = server.port
    const page: Page = await loggedIn(browser, server.chronicle)
    await page.getByRole('button', { name: 'New session' }).click()
    await page.waitForURL(/#\/s\/ses_/)
    const session = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
    await page.getByLabel('Message', { exact: true }).fill('tell a long story')
    await page.keyboard.press('Enter')
    await page.locator('.part.text.streaming').waitFor()

    // stopped mid-stream
    await server.stop()
    await page.locator('.connection', { hasText: 'Reconnecting…' }).waitFor()
    // away long enough that the page's next attempt (backoff 250 ms doubling) comes after the input below
    await new Promise((r) => setTimeout(r, 2000))

    // a new server on the same port and data dir; an input arrives before the page is back
    server = await start(port)
    const res = await fetch(`${server.url}/sessions/${session}/inputs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.chronicle.token.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ parts: [{ type: 'text', text: 'second question' }], delivery: 'queue' }),
    })
    expect(res.status).toBe(202)
    expect(await page.locator('.connection').textContent()).toBe('Reconnecting…')
    const { lastSeq } = await settled(server, session)

    await page.locator('.part.text', { hasText: 'Second answer.' }).waitFor({ timeout: 20_000 })
    await page
      .getByRole('status')
      .filter({ hasText: `Idle (seq ${lastSeq})` })
      .waitFor()
    expect(await page.locator('.connection').textContent()).toBe('')

    const shown = await pageTexts(page)
    expect(shown).toEqual(await serverTexts(server.chronicle, session, server.url))
    expect(shown.filter((t) => t === 'Second answer.')).toHaveLength(1)
    // the answer cut by the stop stays as far as it was committed (whatever recovery then did with the run)
    expect(shown[0]).toBe('tell a long story')
    expect(LONG.startsWith(shown[1] as string)).toBe(true)
    // every part the server holds is on the page once: ids unique, same set
    const ids = await page.locator('.transcript .message').evaluateAll((els) => els.length)
    const state = (await (
      await fetch(`${server.url}/sessions/${session}/state`, {
        headers: { authorization: `Bearer ${server.chronicle.token.token}` },
      })
    ).json()) as { messages: unknown[] }
    expect(ids).toBe(state.messages.length)
  }, 90_000)
})
