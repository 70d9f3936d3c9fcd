import type { Page } from 'playwright-core'
import type { ChronicleSocket, EventFrame } from '../src/client/index.js'

/**
 * bench/web.ts's `streams` phase: `ids.length` sessions stream at once (the
 * scripted model, 50 deltas a second each) while the page shows `hash` — one
 * of them, or the list. In the page a requestAnimationFrame loop notes every
 * frame and a PerformanceObserver the long tasks (over 50 ms: the browser's
 * own threshold); a Node subscriber to the sessions counts the deltas, and
 * ends the window when every run has finished. Frame intervals are what a
 * reader sees: one per refresh (16.7 ms at 60 Hz) when the page keeps up, a
 * multiple of it when a frame was dropped. A frame's work (approximate): from
 * its start to the first task after it was drawn (a message posted in its
 * requestAnimationFrame callback), so script, style, layout and paint.
 */
export interface StreamsFigures {
  readonly view: string
  readonly sessions: number
  /**
   * text.delta events that arrived and how many the script streams: fewer when the server, behind or
   * loaded, merged queued deltas (docs/EVENTS.md "Deltas"), never fewer characters
   */
  readonly deltas: number
  readonly deltasScripted: number
  readonly characters: number
  readonly windowSeconds: number
  readonly deltasPerSecond: number
  readonly frames: number
  readonly frameP50Ms: number
  readonly frameP95Ms: number
  readonly frameMaxMs: number
  readonly frameWorkP50Ms: number
  readonly frameWorkP95Ms: number
  readonly frameWorkMaxMs: number
  /** frames that took more than one refresh: intervals over 1.5 × the idle median */
  readonly droppedFrames: number
  readonly longTasks: number
  readonly longTaskMaxMs: number
  readonly longTaskTotalMs: number
}

interface InPage {
  __frames: number[]
  /** [frame start, its work] */
  __work: [number, number][]
  __long: { start: number; duration: number }[]
  __stop: boolean
}

/** The page's frame intervals while nothing happens: the refresh this browser draws at. */
export async function idleFrames(page: Page, count: number): Promise<number[]> {
  await keepNames(page)
  const times = await page.evaluate(
    (n) =>
      new Promise<number[]>((resolve) => {
        const t: number[] = []
        const tick = (now: number) => {
          t.push(now)
          if (t.length <= n) requestAnimationFrame(tick)
          else resolve(t)
        }
        requestAnimationFrame(tick)
      }),
    count,
  )
  return intervals(times)
}

export async function streamTogether(
  page: Page,
  node: ChronicleSocket,
  opts: { view: string; hash: string; ids: readonly string[]; prompt: string; deltas: number; refreshMs: number },
): Promise<StreamsFigures> {
  const { ids } = opts
  await page.evaluate((hash) => {
    location.hash = hash
  }, opts.hash)
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'))
  await page.waitForTimeout(500)
  await keepNames(page)
  await page.evaluate(() => {
    const w = window as unknown as InPage
    w.__frames = []
    w.__work = []
    w.__long = []
    w.__stop = false
    const drawn = new MessageChannel()
    drawn.port1.onmessage = (e: MessageEvent<number>) => w.__work.push([e.data, performance.now() - e.data])
    const tick = (now: number) => {
      w.__frames.push(now)
      drawn.port2.postMessage(now)
      if (!w.__stop) requestAnimationFrame(tick)
    }
    requestAnimationFrame(tick)
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) w.__long.push({ start: e.startTime, duration: e.duration })
    }).observe({ type: 'longtask', buffered: true })
  })

  let deltas = 0
  let characters = 0
  let first = Number.POSITIVE_INFINITY
  let last = 0
  const running = new Set(ids)
  let finished!: () => void
  const allFinished = new Promise<void>((resolve) => {
    finished = resolve
  })
  const { head } = await node.call('hello', { protocol: 1 })
  const types = ['text.delta', 'run.finished']
  const sub = await node.subscribe({ sessions: [...ids], after: head, types }, (f: EventFrame) => {
    if (f.event.type === 'run.finished') {
      running.delete(f.session)
      if (running.size === 0) finished()
      return
    }
    const now = performance.now()
    deltas++
    characters += String(f.event.data.text).length
    first = Math.min(first, now)
    last = now
  })
  const [startedInPage] = await Promise.all([
    page.evaluate(() => performance.now()),
    ...ids.map((id) => node.call('input.submit', { session: id, parts: [{ type: 'text', text: opts.prompt }] })),
  ])
  await allFinished
  const endedInPage = await page.evaluate(() => {
    ;(window as unknown as InPage).__stop = true
    return performance.now()
  })
  await sub.close()
  const { frames, work, long } = await page.evaluate(() => {
    const w = window as unknown as InPage
    return { frames: w.__frames, work: w.__work, long: w.__long }
  })
  const worked = work.filter(([t]) => t >= startedInPage && t <= endedInPage).map(([, ms]) => ms)
  const inWindow = frames.filter((t) => t >= startedInPage && t <= endedInPage)
  const gaps = intervals(inWindow)
  const tasks = long.filter((t) => t.start + t.duration >= startedInPage && t.start <= endedInPage)
  const seconds = (last - first) / 1000
  return {
    view: opts.view,
    sessions: ids.length,
    deltas,
    deltasScripted: opts.deltas * ids.length,
    characters,
    windowSeconds: round((endedInPage - startedInPage) / 1000),
    deltasPerSecond: round(deltas / seconds),
    frames: inWindow.length,
    frameP50Ms: round(percentile(gaps, 0.5)),
    frameP95Ms: round(percentile(gaps, 0.95)),
    frameMaxMs: round(Math.max(...gaps)),
    frameWorkP50Ms: round(percentile(worked, 0.5)),
    frameWorkP95Ms: round(percentile(worked, 0.95)),
    frameWorkMaxMs: round(Math.max(...worked)),
    droppedFrames: gaps.filter((g) => g > 1.5 * opts.refreshMs).length,
    longTasks: tasks.length,
    longTaskMaxMs: round(Math.max(0, ...tasks.map((t) => t.duration))),
    longTaskTotalMs: round(tasks.reduce((sum, t) => sum + t.duration, 0)),
  }
}

/** tsx (esbuild's keepNames) wraps the named functions below in `__name`, which the page lacks. */
async function keepNames(page: Page): Promise<void> {
  await page.evaluate('globalThis.__name ??= (f) => f')
}

function intervals(times: readonly number[]): number[] {
  return times.slice(1).map((t, i) => t - (times[i] as number))
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] as number
}

export function round(n: number): number {
  return Math.round(n * 10) / 10
}
