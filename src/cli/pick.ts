import { resolve } from 'node:path'
import type { Interface } from 'node:readline'
import type { ChronicleSocket } from '../client/socket.js'
import { type Args, flag, Refusal } from './args.js'
import { renderSessionRow } from './render.js'
import type { Terminal } from './terminal.js'

/**
 * Which session `chat` and `run` talk to: the one named, the most recent
 * (`--continue`), one picked from a list (chat on a terminal), or a new one
 * made with the command's --directory, --agent, --model and --title.
 */

export interface Chosen {
  readonly id: string
  readonly created: boolean
}

export async function chooseSession(
  args: Args,
  socket: ChronicleSocket,
  options: { named?: string; term: Terminal; ask?: Interface },
): Promise<Chosen> {
  if (options.named) return { id: options.named, created: false }
  if (args.flags.has('continue')) {
    const { sessions } = await socket.call('session.list', { limit: 1 })
    const latest = sessions[0]
    if (!latest) throw new Refusal('no session to continue: there are none yet')
    return { id: latest.id, created: false }
  }
  if (options.ask) {
    const picked = await pick(socket, options.term, options.ask)
    if (picked) return { id: picked, created: false }
  }
  const directory = flag(args, 'directory')
  const { session } = await socket.call('session.create', {
    ...(directory && { directory: resolve(directory) }),
    ...(flag(args, 'agent') && { agent: flag(args, 'agent') }),
    ...(flag(args, 'model') && { model: flag(args, 'model') }),
    ...(flag(args, 'title') && { title: flag(args, 'title') }),
  })
  return { id: session.id, created: true }
}

/** The most recent sessions, numbered; Enter (or n) starts a new one. */
async function pick(socket: ChronicleSocket, term: Terminal, ask: Interface): Promise<string | undefined> {
  const { sessions } = await socket.call('session.list', { limit: 9 })
  if (sessions.length === 0) return undefined
  term.line(term.paint('bold', 'recent sessions:'))
  for (const [i, s] of sessions.entries())
    term.line(`  ${term.paint('cyan', String(i + 1))}) ${renderSessionRow(s, term.paint)}`)
  for (;;) {
    const answer = (await question(ask, `session [1-${sessions.length}], or Enter for a new one: `)).trim()
    if (answer === '' || /^n(ew)?$/i.test(answer)) return undefined
    const chosen = sessions[Number(answer) - 1]
    if (chosen && /^\d+$/.test(answer)) return chosen.id
    const byId = sessions.find((s) => s.id === answer)
    if (byId) return byId.id
    term.line(`no session ${answer} in the list`)
  }
}

function question(rl: Interface, prompt: string): Promise<string> {
  return new Promise((resolveAnswer) => rl.question(prompt, resolveAnswer))
}
