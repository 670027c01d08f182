import { createHash } from 'node:crypto';

/** Linux's limit on one path component (ext4, xfs, tmpfs, overlayfs). */
const NAME_MAX_BYTES = 255;
/** Marks a digest stem: '=' cannot occur in a container id, so no plain name can collide with one. */
const DIGEST_PREFIX = 'sha256=';

function digest(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * The part of an attachment's file name that stands for its container id: the id itself while
 * `<id>~<ifName><suffix>` fits in a file name (the names every earlier version wrote, so an upgrade finds them),
 * else a digest of it. The spec bounds no id's length; the file's content must name the real id where needed.
 */
export function attachmentStem(containerId: string, ifName: string, suffix: string): string {
  if (Buffer.byteLength(`${containerId}~${ifName}${suffix}`) <= NAME_MAX_BYTES) return containerId;
  return `${DIGEST_PREFIX}${digest(containerId)}`;
}

/** `<stem>~<ifName><suffix>`: one file per attachment, whatever the id's length. */
export function attachmentFileName(containerId: string, ifName: string, suffix = ''): string {
  return `${attachmentStem(containerId, ifName, suffix)}~${ifName}${suffix}`;
}

/** A temporary file's name for the attachment: short whatever the id, since only the final name is looked up. */
export function attachmentTempName(containerId: string, ifName: string): string {
  return `.${digest(`${containerId}~${ifName}`).slice(0, 16)}.${process.pid}.${Date.now()}.tmp`;
}
