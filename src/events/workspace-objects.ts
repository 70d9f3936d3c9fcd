/**
 * The workspace snapshots' objects in the shared store (docs/CLUSTER.md "Workspaces that move"): each node
 * records a session directory's snapshots in a shadow object store of its own (src/runtime/workspace/
 * shadow-store.ts); on a cluster it also puts every object of a recorded tree here, before the snapshot's event
 * is appended, so any node can write the directory from any recorded tree. An object is its id (git's, a
 * SHA-1 of its content) and its body as git stores a loose object (zlib of type, size and content): written
 * back as it came, it needs no git process. PostgreSQL's is src/events/postgres/workspace-objects.ts.
 */
export interface WorkspaceObjects {
  /** stores what is not stored yet (an id names one content: a second put of it changes nothing) */
  put(objects: readonly WorkspaceObject[]): Promise<void>
  /** the objects of these ids that are stored */
  get(ids: readonly string[]): Promise<WorkspaceObject[]>
  /** which of these ids are not stored */
  missing(ids: readonly string[]): Promise<string[]>
}

export interface WorkspaceObject {
  readonly id: string
  /** a loose object as git writes it: zlib-deflated `<type> <size>\0<content>` */
  readonly body: Buffer
}
