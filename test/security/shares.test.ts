import { startServer } from '../http/helpers.js'
import { describeShares } from './shares-contract.js'

describeShares('SQLite', startServer)
