import type { ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

/** Process-group helpers for the bash tool: signal a whole group, wait until it is gone, stop reading pipes. */

export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return
  try {
    process.kill(-child.pid, signal)
  } catch {
    // the group is already gone
  }
}

/**
 * Waits (bounded) until no live process of the group is left, so the caller
 * never sees survivors. Zombies do not count: they are dead, merely unreaped
 * (in containers PID 1 may reap late).
 */
export async function groupGone(child: ChildProcess, ms: number): Promise<void> {
  const pgid = child.pid
  if (pgid === undefined) return
  const deadline = Date.now() + ms
  while (Date.now() < deadline && groupAlive(pgid)) await new Promise((r) => setTimeout(r, 10))
}

function groupAlive(pgid: number): boolean {
  if (process.platform !== 'linux') {
    try {
      process.kill(-pgid, 0)
      return true
    } catch {
      return false
    }
  }
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8')
    } catch {
      continue
    }
    // pid (comm) state ppid pgrp …; comm may contain spaces, so parse after the last ')'
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') return true
  }
  return false
}

export function drain(child: ChildProcess, ms: number): Promise<void> {
  const streams = [child.stdout, child.stderr].filter((s) => s && !s.destroyed && !s.readableEnded)
  if (streams.length === 0) return Promise.resolve()
  return new Promise((resolve) => {
    let open = streams.length
    const done = () => {
      clearTimeout(timer)
      for (const s of streams) s?.destroy()
      resolve()
    }
    const timer = setTimeout(done, ms)
    for (const s of streams) s?.once('close', () => --open === 0 && done())
  })
}
