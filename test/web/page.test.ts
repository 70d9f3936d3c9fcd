import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import type { Script } from '../../src/runtime/model/scripted-model.js'
import {
  buildPage,
  launch,
  loggedIn,
  pageTexts,
  type Served,
  screenshot,
  serve,
  serverTexts,
  tempDir,
  prepare,
  sendMessage,
} from './helpers.js'

/**
 * The page in a real browser (Debian's Chromium through playwright-core)
 * against a real Chronicle with the scripted model: logging in with a link,
 * an answer streaming in, a permission answered from the page, the
 * scrubber, a fork, a message's diff and a revert with a conflict, the raw
 * events, the export. Each step is checked against what the server holds.
 */

const HELLO = 'Hello from the script, streamed to the page in small deltas so that it arrives as it is written.'

const SCRIPT: Script = {
  chunkSize: 4,
  steps: [
    { when: { userContains: 'say hello' }, reasoning: 'A greeting.', text: HELLO, delayMs: 25 },
    {
      when: { userContains: 'list files', afterToolResult: false },
      toolCalls: [{ id: 'call_ls', name: 'bash', input: { command: 'ls', description: 'list the files' } }],
    },
    { when: { userContains: 'list files', afterToolResult: true }, text: 'Listed.' },
    {
      when: { userContains: 'write a note', afterToolResult: false },
      toolCalls: [{ id: 'call_w', name: 'write', input: { filePath: 'notes.txt', content: 'hello\n' } }],
    },
    { when: { userContains: 'write a note', afterToolResult: true }, text: 'Written.' },
  ],
}

let dir: string
let root: string
let browser: Browser
let server: Served
let page: Page
let session: string

const auth = () => ({ authorization: `Bearer ${server.chronicle.token.token}` })
async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${server.url}${path}`, { headers: auth() })
  expect(res.status).toBe(200)
  return (await res.json()) as T
}
type Ev = { seq: number; type: string; data: Record<string, unknown> }
async function events(id: string): Promise<Ev[]> {
  return (await api<{ events: Ev[] }>(`/sessions/${id}/events?limit=5000`)).events
}

const send = (text: string) => sendMessage(page, text)

prepare(async () => {
  dir = tempDir('page')
  root = buildPage()
  browser = await launch()
  server = await serve({ data: join(dir, 'data'), directory: join(dir, 'work'), root, script: SCRIPT })
})

afterAll(async () => {
  await browser?.close()
  await server?.stop()
  rmSync(dir, { recursive: true, force: true })
  rmSync(root, { recursive: true, force: true })
})

describe('logging in', () => {
  it('trades a link for a cookie and lands on the session list; a used or wrong link is refused; a logout ends it', async () => {
    const link = server.chronicle.loginLink().url
    const context = await browser.newContext()
    const first = await context.newPage()
    await first.goto(link)
    await first.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
    expect(new URL(first.url()).pathname + new URL(first.url()).hash).toBe('/#/')
    expect((await context.request.get(`${server.url}/whoami`)).status()).toBe(200)

    for (const bad of [link, `${server.url}/login#not-a-code`, `${server.url}/login`]) {
      const other = await browser.newContext()
      const p = await other.newPage()
      await p.goto(bad)
      await p.getByRole('heading', { name: 'This login link is invalid or has expired' }).waitFor()
      expect(p.url()).toBe(`${server.url}/login`) // the code left the address bar
      expect((await other.request.get(`${server.url}/whoami`)).status()).toBe(401)
      await other.close()
    }

    const none = await browser.newContext()
    const p = await none.newPage()
    await p.goto(server.url)
    await p.getByRole('heading', { name: 'Log in to Chronicle' }).waitFor()
    await none.close()

    // a logout (here from the same browser, beside the page) ends the page's socket; reloading asks for a link
    const logout = await context.request.post(`${server.url}/logout`, { headers: { origin: server.url } })
    expect(logout.status()).toBe(204)
    await first.locator('.connection', { hasText: 'Disconnected' }).waitFor()
    await first.getByRole('button', { name: 'Reload' }).click()
    await first.getByRole('heading', { name: 'Log in to Chronicle' }).waitFor()
    await context.close()
  })
})

describe('a session', () => {
  prepare(async () => {
    page = await loggedIn(browser, server.chronicle)
    await page.getByLabel('Title (optional)').fill('web spec')
    await page.getByRole('button', { name: 'New session' }).click()
    await page.waitForURL(/#\/s\/ses_/)
    session = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
    await page.getByRole('heading', { level: 1, name: 'web spec' }).waitFor()
  })

  it('streams an answer as it is written', async () => {
    await send('say hello')
    const streaming = page.locator('.part.text.streaming')
    await streaming.waitFor()
    const partial = (await streaming.textContent()) ?? ''
    expect(HELLO.startsWith(partial)).toBe(true)
    expect(partial.length).toBeLessThan(HELLO.length)
    await page.locator('.part.text', { hasText: HELLO }).waitFor()
    await page.getByRole('status').filter({ hasText: /^Idle/ }).waitFor()
    expect(await page.locator('.part.text.streaming').count()).toBe(0)
    expect(await pageTexts(page)).toEqual(await serverTexts(server.chronicle, session, server.url))
    expect(await pageTexts(page)).toEqual(['say hello', HELLO])
    // who did what: the user message names the principal
    await expect(page.locator('.message-user .who').first().textContent()).resolves.toBe('owner')
    await screenshot(page, 'session')

    // what the model saw at that step, rebuilt from the log
    await page.getByRole('button', { name: 'What the model saw' }).click()
    const panel = page.getByRole('region', { name: 'What the model saw' })
    await panel.getByText('equals the recorded digest').waitFor()
    await expect(panel.locator('.chat-user pre').first().textContent()).resolves.toBe('say hello')
    await panel.getByRole('button', { name: 'Close' }).click()
  })

  it('answers a permission request from the page', async () => {
    await send('list files')
    const prompt = page.getByRole('region', { name: 'Permission request: bash' })
    await prompt.waitFor()
    await expect(prompt.locator('code').first().textContent()).resolves.toBe('ls')
    await prompt.getByRole('button', { name: 'Allow once' }).click()
    await page.locator('.part.text', { hasText: 'Listed.' }).waitFor()
    await page.locator('.tool .who', { hasText: 'approved once by owner' }).waitFor()
    expect(await page.getByRole('region', { name: 'Permission request: bash' }).count()).toBe(0)
    const replied = (await events(session)).filter((e) => e.type === 'permission.replied')
    expect(replied.map((e) => e.data.reply)).toEqual(['once'])
  })

  it('scrubs to a seq and shows the state right after it; a seq out of range goes to the nearest', async () => {
    const log = await events(session)
    const helloEnded = log.find((e) => e.type === 'run.finished') as Ev
    await page.goto(`${server.url}/#/s/${session}@${helloEnded.seq}`)
    await page.getByText(`Showing the session right after seq ${helloEnded.seq}.`).waitFor()
    expect(await pageTexts(page)).toEqual(['say hello', HELLO])

    // the range, moved and released (fill sets the value and fires input and change)
    const midStream = log.filter((e) => e.type === 'text.delta')[3] as Ev
    await page.locator('#scrubber-range').fill(String(midStream.seq))
    await page.getByText(`Showing the session right after seq ${midStream.seq}.`).waitFor()
    await page.waitForURL(`${server.url}/#/s/${session}@${midStream.seq}`)
    const texts = await pageTexts(page)
    expect(texts[0]).toBe('say hello')
    expect(HELLO.startsWith(texts[1] as string) && (texts[1] as string).length < HELLO.length).toBe(true)
    const state = await api<{ parts: { type: string; text?: string }[] }>(
      `/sessions/${session}/state?at=${midStream.seq}`,
    )
    expect(texts).toEqual(state.parts.filter((p) => p.type === 'text').map((p) => p.text))

    const head = (await api<{ session: { lastSeq: number } }>(`/sessions/${session}`)).session.lastSeq
    await page.goto(`${server.url}/#/s/${session}@99999999`)
    await page.getByText(/outside this session's history/).waitFor()
    await page.getByText(`Showing the session right after seq ${head}.`).waitFor()
    await page.waitForURL(`${server.url}/#/s/${session}@${head}`)

    // what the model saw at the step there
    await page.getByRole('button', { name: 'What the model saw' }).first().click()
    await page.getByText('equals the recorded digest').waitFor()
    await screenshot(page, 'scrubber')
  })

  it('a long state arrives windowed: its latest messages, and the earlier ones on request', async () => {
    const post = async <T>(path: string, body: unknown): Promise<T> => {
      const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      expect(res.ok).toBe(true)
      return (await res.json()) as T
    }
    const { session: long } = await post<{ session: { id: string } }>('/sessions', {})
    const notes = Array.from({ length: 12 }, (_, i) => `note ${i}`)
    for (const text of notes)
      await post(`/sessions/${long.id}/inputs`, { parts: [{ type: 'text', text }], noReply: true })
    const head = (await api<{ session: { lastSeq: number } }>(`/sessions/${long.id}`)).session.lastSeq
    await page.goto(`${server.url}/#/s/${long.id}@${head}`)
    await page.getByText(`Showing the session right after seq ${head}.`).waitFor()
    expect(await pageTexts(page)).toEqual(notes.slice(2))
    await page.getByRole('button', { name: 'Show earlier messages (2 not shown)' }).click()
    await expect.poll(() => pageTexts(page)).toEqual(notes)
  })

  it('forks at the seq shown and opens the child', async () => {
    const log = await events(session)
    const firstRun = log.find((e) => e.type === 'run.finished') as Ev
    await page.goto(`${server.url}/#/s/${session}@${firstRun.seq}`)
    await page.getByText(`Showing the session right after seq ${firstRun.seq}.`).waitFor()
    await page.getByRole('button', { name: 'Fork here' }).click()
    await page.waitForURL((u) => /#\/s\/ses_/.test(u.hash) && !u.hash.includes(session))
    const child = /#\/s\/(ses_[A-Za-z0-9_-]+)/.exec(page.url())?.[1] as string
    await page.getByRole('heading', { level: 1, name: 'web spec (fork)' }).waitFor()
    const { session: forked } = await api<{ session: { forkedFrom: { sessionId: string; seq: number } } }>(
      `/sessions/${child}`,
    )
    expect(forked.forkedFrom).toEqual({ sessionId: session, seq: firstRun.seq })
    await page.locator('.part.text', { hasText: HELLO }).waitFor()
    expect(await pageTexts(page)).toEqual(['say hello', HELLO])
  })

  it('shows what a message changed in the files, and reverts them, naming the files changed outside', async () => {
    await page.goto(`${server.url}/#/s/${session}`)
    await page.getByRole('heading', { level: 1, name: 'web spec' }).waitFor()
    await send('write a note')
    const prompt = page.getByRole('region', { name: 'Permission request: edit' })
    await prompt.waitFor()
    await prompt.getByRole('button', { name: 'Allow always' }).click()
    await page.locator('.part.text', { hasText: 'Written.' }).waitFor()
    const file = join(dir, 'work', 'notes.txt')
    expect(readFileSync(file, 'utf8')).toBe('hello\n')

    // the approval, listed with its revoke button
    await page.getByRole('button', { name: /^Revoke allow edit/ }).waitFor()

    await page.getByRole('button', { name: 'Show diff' }).click()
    await page.locator('.patch .l-add', { hasText: '+hello' }).waitFor()

    // someone edits the file outside the agent; a revert to before the write refuses, naming it
    writeFileSync(file, 'edited by hand\n')
    const log = await events(session)
    const writeInput = log.filter((e) => e.type === 'input.accepted').at(-1) as Ev
    await page.goto(`${server.url}/#/s/${session}@${writeInput.seq}`)
    await page.getByText(`Showing the session right after seq ${writeInput.seq}.`).waitFor()
    await page.getByRole('button', { name: 'Revert files to here…' }).click()
    await page.getByRole('button', { name: `Revert the files to seq ${writeInput.seq}` }).click()
    const conflict = page.getByRole('alert').filter({ hasText: 'WORKSPACE_CONFLICT' })
    await conflict.waitFor()
    await expect(conflict.locator('code').textContent()).resolves.toBe('notes.txt')
    expect(readFileSync(file, 'utf8')).toBe('edited by hand\n')
    await page.getByRole('button', { name: 'Revert anyway, overwriting them' }).click()
    await page.getByText(/^Reverted: 1 file changed/).waitFor()
    expect(existsSync(file)).toBe(false)

    // back live: undo is offered; the approval is revoked from the page
    await page.getByRole('link', { name: 'Back to live' }).click()
    await page.getByRole('button', { name: `Undo revert to seq ${writeInput.seq}` }).waitFor()
    await page.getByRole('button', { name: /^Revoke allow edit/ }).click()
    await page.getByText('None: an "Allow always" answer adds one here.').waitFor()
    const rules = await api<{ rules: unknown[] }>(`/sessions/${session}/rules`)
    expect(rules.rules).toEqual([])
  })

  it('lists the raw events, following live ones, and exports the session as chronicle export writes it', async () => {
    await page.goto(`${server.url}/#/s/${session}`)
    await page.getByRole('button', { name: 'Events', exact: true }).click()
    const log = await events(session)
    const last = log.at(-1) as Ev
    await page.locator('.event-row .seq', { hasText: new RegExp(`^${last.seq}$`) }).waitFor()
    await screenshot(page, 'events')

    const download = page.waitForEvent('download')
    await page.getByRole('link', { name: 'Export (JSONL)' }).click()
    const file = await (await download).path()
    const text = readFileSync(file, 'utf8')
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Ev & { chronicle?: string; hash?: string; blob?: string })
    expect(lines[0]).toMatchObject({ chronicle: 'session-export', format: 2, sessionId: session })
    const now = await events(session)
    const logged = lines.filter((l) => l.seq !== undefined)
    expect(logged.map((e) => e.seq)).toEqual(now.map((e) => e.seq))
    expect(logged.every((e) => typeof e.hash === 'string')).toBe(true)
    // the same file the server's export route answers (and `chronicle import` takes)
    const res = await fetch(`${server.url}/sessions/${session}/export`, { headers: auth() })
    expect(await res.text()).toBe(text)
  })
})
