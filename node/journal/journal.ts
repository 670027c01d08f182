import { linkSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { mkdir, open, rename } from 'node:fs/promises';
import { join } from 'node:path';
import type { LeasePlacement } from '../../shared/domain/lease.js';
import { assertNotAbandoned } from './call-scope.js';
import { attachmentFileName, attachmentStem, attachmentTempName } from './names.js';

/**
 * The node's own record of its attachments, like host-local's files: one file per (containerId, ifName).
 *
 * ADD writes an *intent* before it claims anything, then the claimed address after; DEL reads the address back
 * so its release is one conditional write (no lookup). A record that stops at intent means a crash between the
 * two — the next ADD or DEL looks the holder up in the store instead of trusting the file.
 *
 * Every write goes to a temp file first; the intent is published with link(2), which fails with EEXIST when a
 * record is already there (the O_EXCL of host-local, without ever exposing a half-written file), and later
 * writes replace it with rename(2). The record with the address is fsynced before, and its directory after, the
 * rename, so DEL finds it after a power loss. The intent is not: losing it costs at worst a second claim that GC
 * returns, and two more fsyncs on every ADD would cost more.
 */
export interface AttachmentRecord {
  readonly containerId: string;
  readonly ifName: string;
  readonly netns: string;
  readonly createdAtMs: number;
  /** The process that wrote the intent (for operators; the attachment lock, not this, serializes ADDs). */
  readonly pid?: number;
  /** Set once the claim succeeded. */
  readonly ip?: string;
  readonly placement?: LeasePlacement;
  /** A dual-stack pod's IPv6 lease (on the same ENI as `ip`'s): DEL releases it by address too. */
  readonly ipv6?: { readonly ip: string; readonly subnetCidr: string; readonly gateway: string };
}

const SUFFIX = '.json';

export class Journal {
  private readonly dir: string;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'attachments');
  }

  private path(containerId: string, ifName: string): string {
    // Both parts are validated by the skel (no '/'); '~' cannot occur in a container id, so names never collide.
    return join(this.dir, attachmentFileName(containerId, ifName, SUFFIX));
  }

  private tempPath(record: AttachmentRecord): string {
    return join(this.dir, attachmentTempName(record.containerId, record.ifName));
  }

  /** Publishes an intent; returns false (and writes nothing) when a record already exists. */
  createIntent(record: AttachmentRecord): boolean {
    assertNotAbandoned('the journal intent');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const tmp = this.tempPath(record);
    writeFileSync(tmp, JSON.stringify(record), { mode: 0o600 });
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

  /**
   * Replaces the record durably (the claimed address is now known). Asynchronous, so ADD builds the datapath
   * while the disk syncs; it must be awaited before anything else touches the record.
   */
  async write(record: AttachmentRecord): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const tmp = this.tempPath(record);
    const file = await open(tmp, 'w', 0o600);
    try {
      await file.writeFile(JSON.stringify(record));
      await file.sync();
    } finally {
      await file.close();
    }
    // A write started before the call was abandoned must not land after its lock went to the next call.
    assertNotAbandoned('the journal record');
    await rename(tmp, this.path(record.containerId, record.ifName));
    const dir = await open(this.dir, 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }

  read(containerId: string, ifName: string): AttachmentRecord | undefined {
    return this.readFile(this.path(containerId, ifName), containerId, ifName);
  }

  private readFile(path: string, containerId: string, ifName: string): AttachmentRecord | undefined {
    try {
      return JSON.parse(readFileSync(path, 'utf8')) as AttachmentRecord;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      // A record we cannot parse is treated as an intent: the store is asked instead.
      if (err instanceof SyntaxError) return { containerId, ifName, netns: '', createdAtMs: 0 };
      throw err;
    }
  }

  remove(containerId: string, ifName: string): void {
    assertNotAbandoned('the journal removal');
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
      if (!name.endsWith(SUFFIX) || name.startsWith('.')) continue;
      // An id has no '~', an interface name may: split at the first.
      const stem = name.slice(0, -SUFFIX.length);
      const tilde = stem.indexOf('~');
      if (tilde <= 0 || tilde === stem.length - 1) continue;
      const ifName = stem.slice(tilde + 1);
      const fileStem = stem.slice(0, tilde);
      // A digest name's id is the record's when it maps back to this file; else (unreadable) the stem, which no
      // live id equals and which `remove` maps back to this file.
      const record = this.readFile(join(this.dir, name), fileStem, ifName);
      if (!record) continue;
      const recorded = typeof record.containerId === 'string' ? record.containerId : '';
      const containerId = attachmentStem(recorded, ifName, SUFFIX) === fileStem ? recorded : fileStem;
      out.push({ ...record, containerId, ifName });
    }
    return out;
  }
}
