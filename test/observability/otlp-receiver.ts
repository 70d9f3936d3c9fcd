import { createServer, type Server } from 'node:http'

/** A real OTLP/HTTP traces receiver for the specs: it decodes each JSON export it is sent. */

export interface OtlpValue {
  stringValue?: string
  intValue?: string | number
  doubleValue?: number
  boolValue?: boolean
  arrayValue?: { values: OtlpValue[] }
}
export interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  startTimeUnixNano: string
  endTimeUnixNano: string
  attributes: { key: string; value: OtlpValue }[]
  links?: { traceId: string; spanId: string; attributes?: { key: string; value: OtlpValue }[] }[]
  status?: { code?: number }
}

/** A minimal OTLP/HTTP traces receiver: every POST body to /v1/traces, decoded. */
export class Receiver {
  readonly requests: { path: string; contentType: string | undefined }[] = []
  readonly spans: OtlpSpan[] = []
  readonly resources: Record<string, unknown>[] = []
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<Receiver> {
    let receiver: Receiver | undefined
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        receiver?.requests.push({ path: req.url ?? '', contentType: req.headers['content-type'] })
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: {
            resource: { attributes: { key: string; value: OtlpValue }[] }
            scopeSpans: { spans: OtlpSpan[] }[]
          }[]
        }
        for (const rs of body.resourceSpans) {
          receiver?.resources.push(attributes(rs.resource.attributes))
          for (const ss of rs.scopeSpans) receiver?.spans.push(...ss.spans)
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    receiver = new Receiver(server, `http://127.0.0.1:${port}`)
    return receiver
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()))
  }
}

const otlpValue = (v: OtlpValue): unknown =>
  v.stringValue ??
  (v.intValue !== undefined ? Number(v.intValue) : undefined) ??
  v.doubleValue ??
  v.boolValue ??
  v.arrayValue?.values.map(otlpValue)

export const attributes = (list: { key: string; value: OtlpValue }[]): Record<string, unknown> =>
  Object.fromEntries(list.map((a) => [a.key, otlpValue(a.value)]))
