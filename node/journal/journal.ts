import { linkSync, mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LeasePlacement } from '../../shared/domain/lease.js';

/**
 * The node's own record of its attachments, like host-local's files: one file per (containerId, ifName).
 *
 * ADD writes an *intent* before it claims anything, then the claimed address after; DEL reads the address back
 * so its release is one conditional write (no lookup). A record that stops at intent means a crash between the
 * two — the next ADD or DEL looks the holder up in the store instead of trusting the file.
 *
 * Every write goes to a temp file first; the intent is published with link(2), which fails with EEXIST when a
 * record is already there (the O_EXCL of host-local, without ever exposing a half-written file), and later
 * writes replace it with rename(2).
 */
export interface AttachmentRecord {
  readonly containerId: string;
  readonly ifName: string;
  readonly netns: string;
  readonly createdAtMs: number;
  /** The process that wrote the intent: while it lives, a second ADD of the same attachment must wait. */
  readonly pid?: number;
  /** Set once the claim succeeded. */
  readonly ip?: string;
  readonly placement?: LeasePlacement;
}

export class Journal {
  private readonly dir: string;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'attachments');
  }

  private path(containerId: string, ifName: string): string {
    // Both parts are validated by the skel (no '/'); '~' cannot occur in a container id, so names never collide.
    return join(this.dir, `${containerId}~${ifName}.json`);
  }

  private writeTemp(record: AttachmentRecord): string {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const tmp = join(this.dir, `.${record.containerId}~${record.ifName}.${process.pid}.${Date.now()}.tmp`);
    writeFileSync(tmp, JSON.stringify(record), { mode: 0o600 });
    return tmp;
  }

  /** Publishes an intent; returns false (and writes nothing) when a record already exists. */
  createIntent(record: AttachmentRecord): boolean {
    const tmp = this.writeTemp(record);
    try {
      linkSync(tmp, this.path(record.containerId, record.ifName));
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    } finally {
      unlinkSync(tmp);
    }
  }

  /** Replaces the record (the claimed address is now known). */
  write(record: AttachmentRecord): void {
    renameSync(this.writeTemp(record), this.path(record.containerId, record.ifName));
  }

  read(containerId: string, ifName: string): AttachmentRecord | undefined {
    try {
      return JSON.parse(readFileSync(this.path(containerId, ifName), 'utf8')) as AttachmentRecord;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      // A record we cannot parse is treated as an intent: the store is asked instead.
      if (err instanceof SyntaxError) return { containerId, ifName, netns: '', createdAtMs: 0 };
      throw err;
    }
  }

  remove(containerId: string, ifName: string): void {
    try {
      unlinkSync(this.path(containerId, ifName));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  list(): AttachmentRecord[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    const out: AttachmentRecord[] = [];
    for (const name of names) {
      if (!name.endsWith('.json') || name.startsWith('.')) continue;
      const [containerId, ifName] = name.slice(0, -'.json'.length).split('~');
      if (!containerId || !ifName) continue;
      const record = this.read(containerId, ifName);
      if (record) out.push({ ...record, containerId, ifName });
    }
    return out;
  }
}

/** Whether the writer of an intent is still running (then its ADD is in flight, not crashed). */
export function writerAlive(record: AttachmentRecord): boolean {
  if (record.pid === undefined || record.pid === process.pid) return false;
  try {
    process.kill(record.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
