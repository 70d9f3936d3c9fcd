import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { type BrowserContext, chromium, type Page } from 'playwright-core'
import { ChronicleSocket, type EventFrame } from '../src/client/index.js'
import { loadConfig } from '../src/config.js'
import { createIdSource } from '../src/events/ids.js'
import { createChronicle } from '../src/main.js'
import { ensureSnapshots } from '../src/projections/time-travel/time-travel.js'
import { buildSession } from './timetravel.js'
import { idleFrames, percentile, round, streamTogether } from './web-streams.js'

/**
 * `npm run bench -- web [--open-events 10000] [--events 100000] [--runs 7] [--samples 60] [--deltas 500]
 *   [--streams 10] [--stream-deltas 500] [--only open]`
 *
 * The web page (src/web/, docs/WEB.md) in Debian's Chromium (playwright-core,
 * /usr/bin/chromium) against an in-process Chronicle; the page is built
 * first by scripts/build-web.mjs. Sessions are generated into the server's
 * store as bench/timetravel.ts generates them (agent-like turns, many small
 * deltas), their snapshot chains built as a running server has them.
 *
 * - open: a `--open-events` session opened from the list (hash change):
 *   the page's own `performance.measure('chronicle:open')` (state read over
 *   the socket, model built, transcript drawn), and cold: a fresh tab
 *   loading `/#/s/<id>` until the transcript is drawn (page load, login
 *   check, socket, state, draw). Baseline: the same `session.state` read by
 *   a Node SDK client (`stateCallMs`); `openOverStateCall` = page open /
 *   that read. The cold tab's baseline, `blankTab`: the same procedure (a
 *   new tab, `goto`, a `raf`-polled wait, one evaluate) on a static HTML
 *   page with no script served by the same server (`/assets/blank.html`,
 *   written into the bench's build), one before each cold tab: what a new
 *   tab and Playwright's navigation cost by themselves; `coldOverBlankTab`
 *   = cold median / blank median. `openBig`: the same for the `--events`
 *   session. `--only open` runs this phase alone (and the bundle's sizes).
 * - scrub: on the `--events` session, the range set to `--samples` random
 *   seqs of it and released (input + change): the page's
 *   `performance.measure('chronicle:scrub')`, release → state painted, and
 *   its parts (`-state`: the answer arrived; `-dom`: the DOM holds it).
 *   Baseline: `session.state {at}` for the same seqs from Node. The state
 *   grows with the seq (up to ~1.3 MB of JSON at 100k events here), and
 *   Chromium's receipt of a message grows with it, so the releases whose
 *   state is at most 256 KB are also given apart.
 * - stream: the scripted model streams `--deltas` deltas at 50 a second
 *   (delayMs 20 on its own clock); a MutationObserver in the page notes
 *   when each delta's text is in the DOM, a Node subscriber when it
 *   arrived: lag = DOM − arrival (both Date.now on this machine), and
 *   against commit time (`event.at`). `fellBehind`: the median lag of the
 *   last 100 deltas over that of the first 100 (≈1 when it keeps up).
 * - streams: `--streams` sessions stream `--stream-deltas` deltas each at
 *   once, 50 a second each (bench/web-streams.ts), the page open on one of
 *   them, then on the list: frame intervals (p50/p95/max, dropped frames)
 *   and long tasks in the page, the deltas a second that arrived.
 * - bundle: all the page's JavaScript gzipped (goal ≤ 120 KB: the entry and
 *   its lazy chunks), the initial part of it (what a first paint loads), and
 *   the total with its CSS.
 */
export default async function web(args: string[]): Promise<object> {
  const opt = (name: string, fallback: number) => {
    const i = args.indexOf(`--${name}`)
    return i >= 0 ? Number(args[i + 1]) : fallback
  }
  const openEvents = opt('open-events', 10_000)
  const bigEvents = opt('events', 100_000)
  const runs = opt('runs', 7)
  const samples = opt('samples', 60)
  const deltas = opt('deltas', 500)
  const streams = opt('streams', 10)
  const streamDeltas = opt('stream-deltas', 500)
  const onlyAt = args.indexOf('--only')
  const only = onlyAt >= 0 ? args[onlyAt + 1] : undefined
  if (only !== undefined && only !== 'open') throw new Error(`--only: only 'open' is known, not ${only}`)

  const repo = fileURLToPath(new URL('..', import.meta.url))
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-bench-web-'))
  const root = join(dir, 'web')
  let t = performance.now()
  const build = execFileSync(process.execPath, [join(repo, 'scripts', 'build-web.mjs'), root], { encoding: 'utf8' })
  const buildMs = performance.now() - t
  // the cold tab's baseline: a page with no script, from the same server (src/http/routes/page.ts serves assets/)
  writeFileSync(join(root, 'assets', 'blank.html'), BLANK_PAGE)
  const gzipKb = Number(/total ([\d.]+) KB gzipped/.exec(build)?.[1] ?? Number.NaN)
  // all the page's JavaScript (the entry and its lazy chunks), and what a first paint loads of it
  const jsGzipKb = Number(/all JS ([\d.]+) KB gzipped/.exec(build)?.[1] ?? Number.NaN)
  const jsInitialGzipKb = Number(/initial JS ([\d.]+) KB gzipped/.exec(build)?.[1] ?? Number.NaN)

  const work = join(dir, 'work')
  mkdirSync(work)
  const script = join(dir, 'script.json')
  const streamed = 'abcdefghij'.repeat(Math.ceil(deltas / 5)).slice(0, deltas * 2)
  // each session of the streams phase: prose in words (the Markdown a model writes), 2 characters a delta
  const together = 'lorem ipsum dolor sit amet, '.repeat(Math.ceil(streamDeltas / 14)).slice(0, streamDeltas * 2)
  writeFileSync(
    script,
    JSON.stringify({
      chunkSize: 2,
      steps: [
        { when: { userContains: 'together' }, text: together, delayMs: 20 },
        { when: { userContains: 'stream' }, text: streamed, delayMs: 20 },
      ],
    }),
  )
  const config = loadConfig({
    env: {
      CHRONICLE_DATA_DIR: join(dir, 'data'),
      CHRONICLE_PORT: '0',
      CHRONICLE_MODEL: `scripted:${script}`,
      CHRONICLE_LOG_LEVEL: 'warn',
    },
    cwd: work,
    configPath: false,
  })
  const sink = new Writable({ write: (_c, _e, done) => done() })
  const chronicle = await createChronicle(
    { ...config, titles: false, web: { enabled: true, root } },
    { logDestination: sink, directory: work },
  )
  const url = await chronicle.start()
  const token = chronicle.token.token
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] })
  const node = await ChronicleSocket.connect({ url, token, reconnect: false })
  try {
    const ids = createIdSource()
    t = performance.now()
    const small = buildSession(chronicle.store, openEvents, ids.next('ses'), 11)
    const big = buildSession(chronicle.store, bigEvents, ids.next('ses'), 7)
    ensureSnapshots(chronicle.store, small.id)
    ensureSnapshots(chronicle.store, big.id)
    const generateMs = performance.now() - t

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    const page = await context.newPage()
    await page.goto(chronicle.loginLink().url)
    await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()

    // open
    const openSmall = await openFigures(page, context, node, `${url}/#/s/${small.id}`, small.id, runs)
    const openBig = await openFigures(page, context, node, `${url}/#/s/${big.id}`, big.id, runs)
    const openResults = {
      bundle: { jsGzipKb, jsInitialGzipKb, targetJsGzipKb: 120, gzipKb, buildMs: round(buildMs) },
      generated: { openSession: openEvents, scrubSession: bigEvents, generateMs: Math.round(generateMs) },
      open: { events: openEvents, messages: small.messages, ...openSmall, targetMs: 500 },
      openBig: { events: bigEvents, messages: big.messages, ...openBig, targetMs: 1500 },
    }
    if (only === 'open') return openResults

    // scrub
    const rng = mulberry32(3)
    const seqs = Array.from({ length: samples }, () => big.seqs[Math.floor(rng() * big.seqs.length)] as number)
    const first = big.seqs[Math.floor(big.seqs.length / 2)] as number
    await page.evaluate(
      ([id, seq]) => {
        location.hash = `#/s/${id}@${seq}`
      },
      [big.id, first] as const,
    )
    await page.getByText(`Showing the session right after seq ${first}.`).waitFor({ timeout: 60_000 })
    const scrubMs: number[] = []
    for (const seq of seqs) {
      const before = await measures(page, 'chronicle:scrub')
      await page.evaluate((value) => {
        const range = document.querySelector<HTMLInputElement>('#scrubber-range')
        if (!range) throw new Error('no scrubber')
        range.value = String(value)
        range.dispatchEvent(new Event('input', { bubbles: true }))
        range.dispatchEvent(new Event('change', { bubbles: true }))
      }, seq)
      scrubMs.push(await nextMeasure(page, 'chronicle:scrub', before))
    }
    const phases = await page.evaluate(
      ([n]) =>
        Object.fromEntries(
          ['chronicle:scrub-state', 'chronicle:scrub-dom'].map((name) => [
            name,
            performance
              .getEntriesByName(name)
              .slice(-n)
              .map((e) => e.duration),
          ]),
        ),
      [samples] as const,
    )
    const stateInPage = phases['chronicle:scrub-state'] ?? []
    const domInPage = phases['chronicle:scrub-dom'] ?? []
    const scrubCallMs: number[] = []
    const scrubBytes: number[] = []
    for (const seq of seqs) {
      t = performance.now()
      const state = await node.call('session.state', { session: big.id, at: seq })
      scrubCallMs.push(performance.now() - t)
      scrubBytes.push(JSON.stringify(state).length)
    }
    // the same releases, split by how big the state at the seq is (what the browser must receive)
    const smallStates = scrubMs.filter((_, i) => (scrubBytes[i] as number) <= SMALL_STATE)

    // stream
    const { session } = await node.call('session.create', { directory: work, title: 'stream' })
    await page.evaluate((id) => {
      location.hash = `#/s/${id}`
    }, session.id)
    await page.getByRole('heading', { level: 1, name: 'stream' }).waitFor()
    await page.evaluate(() => {
      const seen: [number, number][] = []
      ;(window as unknown as { __seen: typeof seen }).__seen = seen
      const box = document.querySelector('.transcript')
      if (!box) throw new Error('no transcript')
      new MutationObserver(() => {
        const parts = box.querySelectorAll('.message-assistant .part.text')
        const last = parts[parts.length - 1]
        if (last) seen.push([Date.now(), (last.textContent ?? '').length])
      }).observe(box, { subtree: true, childList: true, characterData: true })
    })
    const arrivals: { at: number; committed: number; length: number }[] = []
    let length = 0
    const sub = await node.subscribe({ sessions: [session.id], after: session.lastSeq }, (f: EventFrame) => {
      if (f.event.type !== 'text.delta') return
      length += String(f.event.data.text).length
      arrivals.push({ at: Date.now(), committed: Date.parse(f.event.at), length })
    })
    const streamStarted = performance.now()
    await node.call('input.submit', { session: session.id, parts: [{ type: 'text', text: 'stream' }] })
    await page.locator('.part.text', { hasText: streamed }).waitFor({ timeout: 120_000 })
    const streamSeconds = (performance.now() - streamStarted) / 1000
    await sub.close()
    const seen = (await page.evaluate(() => (window as unknown as { __seen: [number, number][] }).__seen)) ?? []
    const lag: number[] = []
    const lagCommit: number[] = []
    const nodeLag = arrivals.map((a) => a.at - a.committed)
    let j = 0
    for (const a of arrivals) {
      while (j < seen.length && (seen[j] as [number, number])[1] < a.length) j++
      const shown = seen[j]
      if (!shown) break
      lag.push(shown[0] - a.at)
      lagCommit.push(shown[0] - a.committed)
    }
    const head = lag.slice(0, 100)
    const tail = lag.slice(-100)

    // streams
    const refreshMs = percentile(await idleFrames(page, 120), 0.5)
    // fresh sessions for each view: both measure ten first replies
    const create = async (view: string) => {
      const created: string[] = []
      for (let i = 0; i < streams; i++)
        created.push((await node.call('session.create', { directory: work, title: `${view} ${i + 1}` })).session.id)
      return created
    }
    const shown = await create('together')
    const inSession = await streamTogether(page, node, {
      view: 'one of the sessions',
      hash: `#/s/${shown[0]}`,
      ids: shown,
      prompt: 'together',
      deltas: streamDeltas,
      refreshMs,
    })
    // the page drew the whole reply of the session it shows
    await page.waitForFunction(
      (length) => {
        const parts = document.querySelectorAll('.message-assistant .part.text')
        return (parts[parts.length - 1]?.textContent ?? '').trim().length >= length
      },
      together.trim().length,
      { timeout: 60_000 },
    )
    const inList = await streamTogether(page, node, {
      view: 'the session list',
      hash: '#/',
      ids: await create('listed'),
      prompt: 'together',
      deltas: streamDeltas,
      refreshMs,
    })

    return {
      ...openResults,
      scrub: {
        events: bigEvents,
        samples,
        stateJsonBytesP50: percentile(scrubBytes, 0.5),
        stateJsonBytesMax: Math.max(...scrubBytes),
        pageP50Ms: round(percentile(scrubMs, 0.5)),
        pageP95Ms: round(percentile(scrubMs, 0.95)),
        pageMaxMs: round(Math.max(...scrubMs)),
        pageStateArrivedP50Ms: round(percentile(stateInPage, 0.5)),
        pageDomCommittedP50Ms: round(percentile(domInPage, 0.5)),
        stateCallP50Ms: round(percentile(scrubCallMs, 0.5)),
        stateCallP95Ms: round(percentile(scrubCallMs, 0.95)),
        pageOverStateCallP95: round(percentile(scrubMs, 0.95) / percentile(scrubCallMs, 0.95)),
        statesUpTo256KB: {
          samples: smallStates.length,
          pageP50Ms: round(percentile(smallStates, 0.5)),
          pageP95Ms: round(percentile(smallStates, 0.95)),
        },
        targetP95Ms: 150,
      },
      stream: {
        deltas: arrivals.length,
        deltasPerSecond: round(arrivals.length / streamSeconds),
        matched: lag.length,
        domLagAfterArrivalP50Ms: round(percentile(lag, 0.5)),
        domLagAfterArrivalP95Ms: round(percentile(lag, 0.95)),
        domLagAfterArrivalMaxMs: round(Math.max(...lag)),
        domLagAfterCommitP95Ms: round(percentile(lagCommit, 0.95)),
        nodeArrivalAfterCommitP95Ms: round(percentile(nodeLag, 0.95)),
        fellBehind: round(percentile(tail, 0.5) / Math.max(1, percentile(head, 0.5))),
        domUpdates: seen.length,
      },
      streams: {
        refreshMs: round(refreshMs),
        targetFrameP95Ms: 16,
        targetLongTaskMaxMs: 50,
        views: [inSession, inList],
      },
    }
  } finally {
    node.close()
    await browser.close()
    await chronicle.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

const SMALL_STATE = 256 * 1024

/** The cold tab's baseline page: static HTML, no script, no stylesheet. */
const BLANK_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>blank</title><link rel="icon" href="data:,"></head>
<body><p>blank</p></body>
</html>
`

/**
 * Opening session `id` `runs` times from the list (the page's own measure),
 * then in a fresh tab at `address` until drawn; the baseline is the same
 * `session.state` read from Node.
 */
async function openFigures(
  page: Page,
  context: BrowserContext,
  node: ChronicleSocket,
  address: string,
  id: string,
  runs: number,
) {
  const openMs: number[] = []
  for (let i = 0; i < runs; i++) {
    await page.evaluate(() => {
      location.hash = '#/'
    })
    await page.getByRole('heading', { level: 1, name: 'Sessions' }).waitFor()
    const before = await measures(page, 'chronicle:open')
    await page.evaluate((to) => {
      location.hash = `#/s/${to}`
    }, id)
    openMs.push(await nextMeasure(page, 'chronicle:open', before))
  }
  const coldMs: number[] = []
  const blankMs: number[] = []
  const blankLoaded: number[] = []
  const parts: ColdParts[] = []
  const blank = new URL('/assets/blank.html', address).href
  for (let i = 0; i < runs; i++) {
    // the baseline, one before each cold tab (the same load on the machine): a new tab, goto, a raf-polled wait, an evaluate
    const empty = await context.newPage()
    const from = performance.now()
    await empty.goto(blank)
    await empty.waitForFunction(() => document.readyState === 'complete', undefined, {
      timeout: 60_000,
      polling: 'raf',
    })
    const loaded = await empty.evaluate(
      () => (performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).domContentLoadedEventEnd,
    )
    blankMs.push(performance.now() - from)
    blankLoaded.push(loaded)
    await empty.close()
    const tab = await context.newPage()
    const started = performance.now()
    await tab.goto(address)
    await nextMeasure(tab, 'chronicle:open', 0)
    coldMs.push(performance.now() - started)
    parts.push(await coldParts(tab))
    await tab.close()
  }
  const median = (values: number[]) => round(percentile(values, 0.5))
  const part = (name: keyof ColdParts) => median(parts.map((p) => p[name]))
  const stateCallMs: number[] = []
  let stateBytes = 0
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    const state = await node.call('session.state', { session: id })
    stateCallMs.push(performance.now() - t)
    stateBytes = JSON.stringify(state).length
  }
  return {
    stateJsonBytes: stateBytes,
    pageOpenMedianMs: round(percentile(openMs, 0.5)),
    pageOpenP95Ms: round(percentile(openMs, 0.95)),
    coldTabMedianMs: round(percentile(coldMs, 0.5)),
    coldTabP95Ms: round(percentile(coldMs, 0.95)),
    // the same procedure on a page with no script (one before each cold tab)
    blankTabMedianMs: round(percentile(blankMs, 0.5)),
    blankTabP95Ms: round(percentile(blankMs, 0.95)),
    // its DOMContentLoaded in its own clock: a new tab's renderer and the navigation, no script
    blankTabLoadedMs: median(blankLoaded),
    coldOverBlankTab: round(percentile(coldMs, 0.5) / percentile(blankMs, 0.5)),
    coldMinusBlankTabMs: round(percentile(coldMs, 0.5) - percentile(blankMs, 0.5)),
    // where the cold tab's time goes, medians in the tab's clock (from its navigation's start)
    coldTabScriptsLoadedMs: part('loaded'),
    coldTabScriptRunMs: part('script'),
    coldTabLoggedInMs: part('loggedIn'),
    coldTabOpenStartedMs: part('openStarted'),
    coldTabDrawnMs: part('drawn'),
    stateCallMedianMs: round(percentile(stateCallMs, 0.5)),
    openOverStateCall: round(percentile(openMs, 0.5) / percentile(stateCallMs, 0.5)),
  }
}

interface ColdParts {
  /** DOMContentLoaded ended: the page's entry has run */
  readonly loaded: number
  /** the views' script has run (src/web/app.tsx `chronicle:script`; NaN in a page without the mark) */
  readonly script: number
  /** the login check answered (src/web/start.ts `chronicle:whoami`) */
  readonly loggedIn: number
  /** the session page started opening (logged in, socket open) */
  readonly openStarted: number
  /** the transcript drawn */
  readonly drawn: number
}

async function coldParts(tab: Page): Promise<ColdParts> {
  return tab.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming
    const open = performance.getEntriesByName('chronicle:open')[0] as PerformanceEntry
    const script = performance.getEntriesByName('chronicle:script')[0]?.startTime ?? Number.NaN
    const loggedIn = performance.getEntriesByName('chronicle:whoami')[0]?.startTime ?? Number.NaN
    return {
      loaded: nav.domContentLoadedEventEnd,
      script,
      loggedIn,
      openStarted: open.startTime,
      drawn: open.startTime + open.duration,
    }
  })
}

async function measures(page: Page, name: string): Promise<number> {
  return page.evaluate((n) => performance.getEntriesByName(n).length, name)
}

/** Waits for the page's next `name` measure past `count` and answers its duration. */
async function nextMeasure(page: Page, name: string, count: number): Promise<number> {
  await page.waitForFunction(([n, c]) => performance.getEntriesByName(n).length > c, [name, count] as const, {
    timeout: 60_000,
    polling: 'raf',
  })
  return page.evaluate((n) => {
    const all = performance.getEntriesByName(n)
    return (all[all.length - 1] as PerformanceEntry).duration
  }, name)
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}
