import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { checkDirectory } from '../../src/commands/directory.js'
import { expectFailure } from './given.js'

/** A directory a session is to work in must be an absolute path to an existing directory (BAD_REQUEST otherwise). */

let root: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'chronicle-directory-'))
})
afterEach(() => {
  rmSync(root, { recursive: true, force: true })
})

describe('checkDirectory', () => {
  it('accepts an existing absolute directory', () => {
    mkdirSync(join(root, 'repo'))
    expect(() => checkDirectory(root)).not.toThrow()
    expect(() => checkDirectory(join(root, 'repo'))).not.toThrow()
  })

  it('accepts a symbolic link to a directory', () => {
    mkdirSync(join(root, 'repo'))
    symlinkSync(join(root, 'repo'), join(root, 'link'))
    expect(() => checkDirectory(join(root, 'link'))).not.toThrow()
  })

  it('refuses a relative path: BAD_REQUEST', () => {
    expectFailure(() => checkDirectory('repo'), 'BAD_REQUEST', 'directory must be an absolute path: repo')
    expectFailure(() => checkDirectory('./'), 'BAD_REQUEST', 'directory must be an absolute path')
    expectFailure(() => checkDirectory(''), 'BAD_REQUEST', 'directory must be an absolute path')
  })

  it('refuses a path that does not exist: BAD_REQUEST', () => {
    const missing = join(root, 'missing')
    expectFailure(() => checkDirectory(missing), 'BAD_REQUEST', `directory does not exist: ${missing}`)
  })

  it('refuses a file: BAD_REQUEST', () => {
    const file = join(root, 'notes.txt')
    writeFileSync(file, 'not a directory')
    expectFailure(() => checkDirectory(file), 'BAD_REQUEST', `not a directory: ${file}`)
  })

  it('refuses a dangling symbolic link: BAD_REQUEST', () => {
    symlinkSync(join(root, 'gone'), join(root, 'dangling'))
    expectFailure(() => checkDirectory(join(root, 'dangling')), 'BAD_REQUEST', 'directory does not exist')
  })
})
