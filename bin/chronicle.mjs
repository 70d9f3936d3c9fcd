#!/usr/bin/env node
// The `chronicle` command: runs src/cli.ts through tsx (no build step).
import { register } from 'tsx/esm/api'

register()
process.env.CHRONICLE_CLI = '1'
await import('../src/cli.ts')
