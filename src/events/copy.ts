/**
 * `{ ...from, ...changes }`, made with Object.assign. On Node 20 (V8 11.3) an
 * object literal that starts with a spread and then adds properties gets a
 * hidden class of its own every time it is made: the soak (test/soak) found
 * 85,000 new ones in 75 s, one for each part and message the session views
 * held. Each costs memory, takes ~3 µs to make (0.3 µs this way), and makes
 * every property read of such objects megamorphic. A literal that starts with
 * its own properties (`{ id, ...rest }`) is not affected, nor is Node 22.
 * test/architecture.test.ts keeps the spread-first form out of the server.
 *
 * For shapes the code makes: Object.assign *sets* each key, so a source's own
 * "__proto__" key (JSON.parse of hostile input makes one) would change the
 * copy's prototype. Merge such objects with a spread.
 */
export function copyWith<T extends object>(from: T, changes: Partial<T>): T {
  return Object.assign({}, from, changes)
}

/**
 * `{ ...a, ...b }` for objects whose keys are not the code's (a tool's metadata): defined, never set, so a
 * "__proto__" key stays a key, and made from entries, so same keys give a shared hidden class.
 */
export function mergeOwn<T extends object>(a: T | undefined, b: T | undefined): T {
  return Object.fromEntries([...Object.entries(a ?? {}), ...Object.entries(b ?? {})]) as T
}
