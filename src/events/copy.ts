/**
 * `{ ...from, ...changes }` without a hidden class of its own. On Node 20 (V8
 * 11.3) an object literal that starts with a spread and then adds a key the
 * spread did not bring gets a hidden class of its own, every time: the soak
 * (test/soak) found 85,000 new ones in 75 s, one for each part and message
 * the session views held, each costing memory and making every property read
 * of such objects megamorphic. So: when `changes` only replaces keys `from`
 * has (a streamed delta, a status), a spread clone (which shares `from`'s
 * class) with those keys set; when it adds keys, Object.assign onto a fresh
 * object, whose classes are shared through ordinary transitions — but only for
 * small objects: past about 25 keys that makes a slow dictionary object, so a
 * large one (a session) is cloned and extended (its own class, kept along its
 * later copies). Node 22 shares them all. test/architecture.test.ts keeps the
 * spread-first literal out of the server's hot paths.
 *
 * For shapes the code makes: Object.assign *sets* each key, so a source's own
 * "__proto__" key (JSON.parse of hostile input makes one) would change the
 * copy's prototype. Merge such objects with mergeOwn.
 */
export function copyWith<T extends object>(from: T, changes: Partial<T>): T {
  for (const key in changes) {
    if (!Object.hasOwn(from, key)) return small(from) ? Object.assign({}, from, changes) : extended(from, changes)
  }
  return extended(from, changes)
}

/** Objects up to this many keys stay fast when Object.assign builds them (measured on Node 20: 24 do, 28 do not). */
const SMALL = 20

function small(o: object): boolean {
  let n = 0
  for (const _ in o) if (++n > SMALL) return false
  return true
}

function extended<T extends object>(from: T, changes: Partial<T>): T {
  const out = { ...from } as Record<string, unknown>
  for (const key in changes) out[key] = changes[key as keyof T]
  return out as T
}

/**
 * `{ ...a, ...b }` for objects whose keys are not the code's (a tool's metadata): defined, never set, so a
 * "__proto__" key stays a key, and made from entries, so same keys give a shared hidden class.
 */
export function mergeOwn<T extends object>(a: T | undefined, b: T | undefined): T {
  return Object.fromEntries([...Object.entries(a ?? {}), ...Object.entries(b ?? {})]) as T
}
