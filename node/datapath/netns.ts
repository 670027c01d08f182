import { closeSync, fstatSync, openSync, statSync } from 'node:fs';
import { VpcLeaseError } from '../../shared/errors.js';

/** The path names no network namespace (ADD: the container is unknown; DEL: nothing to tear down). */
export class NetnsMissingError extends VpcLeaseError {}
/** The path exists but is not a network namespace. */
export class NotANetnsError extends VpcLeaseError {}
/** Opens a netns file and checks it is one (an nsfs inode), without entering it. */
export function openNetns(path: string): number {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR')
      throw new NetnsMissingError(`network namespace ${path} does not exist`);
    throw new NotANetnsError(`failed to open network namespace ${path}: ${code}`, { cause: err });
  }
  if (fstatSync(fd).dev !== statSync('/proc/self/ns/net').dev) {
    closeSync(fd);
    throw new NotANetnsError(`${path} is not a network namespace`);
  }
  return fd;
}

/** Validates CNI_NETNS without entering it or loading netlink: ADD refuses a bad path before anything changes. */
export function checkNetns(path: string): void {
  closeSync(openNetns(path));
}
