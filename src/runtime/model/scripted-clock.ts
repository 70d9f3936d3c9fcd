/**
 * One clock for every scripted stream in the process. A stream asks to be
 * woken at its next chunk's due time; wakes are grouped by the millisecond
 * they fall in and one timer is armed for the earliest group. A server playing
 * hundreds of scripted replies at once (bench stream: 200 sessions × 50
 * chunks/s) then runs at most one timer a millisecond, not one per chunk with
 * a timer list of its own (Node keys its lists by delay, and these delays are
 * fractional).
 */
const groups = new Map<number, Array<() => void>>()
/**
 * How late the armed timer may be before the next wake arms another. A timer
 * armed while a test faked the clock never fires; without this every later
 * scripted stream in the process would wait behind it forever. A merely late
 * one (a busy event loop) is replaced, which costs nothing.
 */
const OVERDUE_MS = 250
let armedFor = Number.POSITIVE_INFINITY
let timer: NodeJS.Timeout | undefined
/** inside fire: a woken stream's next wake is seen by fire's own loop, which arms once when done */
let firing = false

/** Calls `wake` once `performance.now()` reaches `time`, rounded up to the next whole millisecond. */
export function wakeAt(time: number, wake: () => void): void {
  const slot = Math.ceil(time)
  const group = groups.get(slot)
  if (group) group.push(wake)
  else groups.set(slot, [wake])
  if (firing) return
  if (slot < armedFor) arm(slot)
  else if (performance.now() - armedFor > OVERDUE_MS) arm(armedFor)
}

function arm(slot: number): void {
  if (timer) clearTimeout(timer)
  armedFor = slot
  timer = setTimeout(fire, slot - performance.now())
}

function fire(): void {
  // Node's millisecond clock may fire a timer a fraction early: the group it was armed for is due.
  const fired = armedFor
  const now = performance.now()
  timer = undefined
  armedFor = Number.POSITIVE_INFINITY
  let next = Number.POSITIVE_INFINITY
  firing = true
  try {
    // a Map's iteration reaches the groups its wakes add, so `next` counts them
    for (const [slot, wakes] of groups) {
      if (slot <= fired || slot <= now) {
        groups.delete(slot)
        for (const wake of wakes) wake()
      } else if (slot < next) next = slot
    }
  } finally {
    firing = false
  }
  if (next < Number.POSITIVE_INFINITY) arm(next)
}
