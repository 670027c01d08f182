import { linkSync, renameSync, statSync, unlinkSync } from 'node:fs';

/** How big the log may grow and how many rotated generations stay (`cni.log.1` newest … `cni.log.N`). */
export interface LogBound {
  readonly maxBytes: number;
  readonly keepFiles: number;
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

function renameIfPresent(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (err) {
    if (errno(err) !== 'ENOENT') throw err;
  }
}

/**
 * Rotates `path` once it holds `maxBytes` or more. Many plugin processes write the log at once, each appending
 * by path, so exactly one of them may rotate a given file: the one whose hard link named after the file's
 * inode succeeds. Until it unlinks `path` nobody else can create a new file there to rotate, and a write that
 * opened the old file just before still lands in it (now `path.1`). Returns whether this call rotated.
 */
export function rotateIfFull(path: string, bound: LogBound): boolean {
  let ino: number;
  try {
    const st = statSync(path);
    if (st.size < bound.maxBytes) return false;
    ino = st.ino;
  } catch (err) {
    if (errno(err) === 'ENOENT') return false;
    throw err;
  }
  const claim = `${path}.rotating-${ino}`;
  try {
    linkSync(path, claim);
  } catch (err) {
    if (errno(err) === 'EEXIST' || errno(err) === 'ENOENT') return false;
    throw err;
  }
  try {
    // Another process may have rotated this inode away between our stat and our link.
    if (statSync(path, { throwIfNoEntry: false })?.ino !== ino) return false;
    unlinkSync(path);
    if (bound.keepFiles < 1) return true;
    for (let n = bound.keepFiles - 1; n >= 1; n--) renameIfPresent(`${path}.${n}`, `${path}.${n + 1}`);
    renameSync(claim, `${path}.1`);
    return true;
  } finally {
    try {
      unlinkSync(claim);
    } catch {
      // Renamed into place, or never made.
    }
  }
}
