#!/usr/bin/env node
// The `chronicle` command: runs the compiled CLI, dist/cli.js (`npm run build`
// makes it; `npm ci`, `npm install` and `npm pack` run the build). No TypeScript
// at run time: the tests run src/cli.ts through tsx instead.
import { existsSync } from 'node:fs'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

const cli = new URL('../dist/cli.js', import.meta.url)
if (!existsSync(cli)) {
  const root = dirname(fileURLToPath(new URL('../package.json', import.meta.url)))
  process.stderr.write(
    `chronicle: ${fileURLToPath(cli)} is missing: run \`npm run build\` (or \`npm ci\`) in ${root}\n`,
  )
  process.exit(1)
}
// src/cli.ts runs main() when it is the entry point or this is set (here the entry point is this file)
process.env.CHRONICLE_CLI = '1'
await import(cli.href)
