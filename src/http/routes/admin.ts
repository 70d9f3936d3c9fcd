import { Params, type Api } from '../api.js'
import type { App } from '../app.js'
import { callerOf } from '../caller.js'
import { Answers, ok, problems } from '../openapi.js'

/** The server's own upkeep over HTTP (admin): a backup of the running store (docs/BACKUP.md). */

export function adminRoutes(app: App, api: Api): void {
  app.post(
    '/admin/backup',
    {
      schema: {
        operationId: 'backupStore',
        summary: 'store.backup',
        description:
          'A consistent copy of the store at a seq and of the workspace object store, into a new directory on the ' +
          "server's machine (`out`, absolute). The server keeps serving while it is taken; answers when it is whole.",
        tags: ['admin'],
        body: Params['store.backup'],
        response: {
          200: ok('the backup: its directory, seq and head digest', Answers.backup),
          ...problems(
            {
              400: 'BAD_REQUEST: out is not an absolute path',
              403: 'FORBIDDEN: the token is not an admin, or is limited to some sessions',
              409: 'BACKUP_REFUSED: out exists, its parent is not a directory, or a backup is already running',
            },
            { body: true },
          ),
        },
      },
    },
    async (req) => api['store.backup'](req.body, callerOf(req)),
  )
}
