import { Component, type ComponentChildren, type FunctionComponent, type VNode } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { describeError } from './connection.js'

/** Small pieces the views share. */

/** A component that re-renders only when a prop changes identity (evolve keeps unchanged objects). */
export function pure<P extends object>(render: (props: P) => VNode | null, equal = shallowEqual<P>) {
  class Pure extends Component<P> {
    override shouldComponentUpdate(next: P): boolean {
      return !equal(this.props, next)
    }
    override render(props: P) {
      return render(props)
    }
  }
  return Pure as unknown as FunctionComponent<P>
}

export function shallowEqual<P extends object>(a: P, b: P): boolean {
  const ka = Object.keys(a) as (keyof P)[]
  if (ka.length !== Object.keys(b).length) return false
  return ka.every((k) => a[k] === b[k])
}

/** A refusal, read out as it appears. */
export function ErrorNote({ error, children }: { error: unknown; children?: ComponentChildren }) {
  if (error === undefined || error === null) return null
  const { code, message } = describeError(error)
  return (
    <div class="error" role="alert">
      <strong>{code}</strong> {message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message}
      {children}
    </div>
  )
}

/*
 * Numbers and times are formatted here, not by toLocaleString: a tab's first use of Intl sets up ICU's number
 * and date formats, 30–75 ms on the development VM, the largest single piece of a cold open's script (docs/WEB.md).
 * The page's text is English, so are its separators.
 */

/** A time in the browser's time zone: `2026-12-07 17:57:18`. */
export function formatTime(iso: string | undefined): string {
  if (!iso) return ''
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
}

/** A count with its thousands separated by commas: `12,345`. */
export function formatCount(n: number): string {
  const [whole = '', fraction] = String(n).split('.')
  const grouped = whole.replace(/\B(?=(\d{3})+$)/g, ',')
  return fraction === undefined ? grouped : `${grouped}.${fraction}`
}

export function clockTime(iso: string): string {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  const pad = (n: number, w = 2) => String(n).padStart(w, '0')
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${formatCount(n)} ${n === 1 ? one : many}`
}

/** The state of an async call a button starts: busy while it runs, the error if it failed. */
export function useAction<A extends unknown[], T>(run: (...args: A) => Promise<T>) {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const alive = useRef(true)
  useEffect(
    () => () => {
      alive.current = false
    },
    [],
  )
  const start = async (...args: A): Promise<T | undefined> => {
    setBusy(true)
    setError(undefined)
    try {
      return await run(...args)
    } catch (err) {
      if (alive.current) setError(err)
      return undefined
    } finally {
      if (alive.current) setBusy(false)
    }
  }
  return { busy, error, start, setError }
}

/** Status words as a badge; the class carries the colour, the text carries the meaning. */
export function Badge({ kind, children }: { kind: string; children: ComponentChildren }) {
  return <span class={`badge badge-${kind}`}>{children}</span>
}

/** A size in bytes as people read it: 512 B, 14.2 KB, 5.0 MB. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`
}
