import { useEffect, useRef, useState } from 'preact/hooks'

/**
 * The page's keyboard shortcuts, listed on `?` (docs/WEB.md "Everywhere").
 * Every action is also a button, link or field reachable with Tab; these
 * only save keystrokes. None fires while typing in a field.
 */

const SHORTCUTS = [
  ['?', 'Show these shortcuts'],
  ['/', 'Go to the message box'],
  ['g then s', 'Go to the session list'],
  ['Escape', 'Close this list; leave the rename field'],
  ['Enter', 'Send the message (Shift+Enter: a new line)'],
] as const

function typing(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null
  return !!el && (el.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName))
}

export function Shortcuts() {
  const [open, setOpen] = useState(false)
  const dialog = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    let pendingG = false
    const onKey = (e: KeyboardEvent) => {
      if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return
      if (e.key === '?') {
        e.preventDefault()
        setOpen(true)
      } else if (e.key === '/') {
        const box = document.getElementById('composer-text')
        if (box) {
          e.preventDefault()
          box.focus()
        }
      } else if (e.key === 'g') {
        pendingG = true
        return
      } else if (e.key === 's' && pendingG) location.hash = '#/'
      pendingG = false
    }
    document.addEventListener('keydown', onKey)
    return () => document.removeEventListener('keydown', onKey)
  }, [])
  useEffect(() => {
    const el = dialog.current
    if (!el) return
    if (open && !el.open) el.showModal()
    if (!open && el.open) el.close()
  }, [open])
  return (
    <dialog ref={dialog} class="shortcuts" aria-labelledby="shortcuts-title" onClose={() => setOpen(false)}>
      <h2 id="shortcuts-title">Keyboard shortcuts</h2>
      <dl>
        {SHORTCUTS.map(([keys, what]) => (
          <div key={keys}>
            <dt>
              <kbd>{keys}</kbd>
            </dt>
            <dd>{what}</dd>
          </div>
        ))}
      </dl>
      <button type="button" onClick={() => setOpen(false)}>
        Close
      </button>
    </dialog>
  )
}
