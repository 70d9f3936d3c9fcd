#!/usr/bin/env node
/**
 * Run by `prepare` (a clone's `npm ci` / `npm install`, never an install of
 * the published package): the `node` devDependency (Node 22, for the MCP conformance
 * suite only) declares a bin named `node`, which npm links into
 * node_modules/.bin — first on PATH in every npm script. Left there, `npm
 * test` would run under Node 22, where better-sqlite3 (built for the system
 * Node at install) cannot load. The link is removed; scripts/conformance.mjs
 * runs node_modules/node/bin/node by its path.
 */
import { lstatSync, readlinkSync, rmSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const bin = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', '.bin')
const link = join(bin, 'node')
try {
  // only the link to the devDependency: anything else someone put there is theirs
  if (lstatSync(link).isSymbolicLink() && resolve(bin, readlinkSync(link)).startsWith(join(bin, '..', 'node', '')))
    rmSync(link)
} catch {
  // not there: nothing to do
}
