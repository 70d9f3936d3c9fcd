import { startServer } from '../http/helpers.js'
import { describeRoles } from './roles-contract.js'
import { dataDirFiles } from './stored-bytes.js'

describeRoles('SQLite', startServer, async (server) => {
  const files = await dataDirFiles(server)
  if (!files.some((f) => f.name.endsWith('chronicle.db'))) throw new Error('no chronicle.db in the data directory')
  return files
})
