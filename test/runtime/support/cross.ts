import { existsSync } from 'node:fs';
import { crossCompilers, hostArch, runner } from '../../../packaging/cross.js';
import { missing } from '../../support/capabilities.js';

/** A missing tool: skipped with the reason printed, or (CI=true) a failure. */
function absent(reason: string): string {
  if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
  process.stderr.write(`skipping: ${reason}\n`);
  return reason;
}

/**
 * What building and running the arm64 executable here needs: root, an x64 machine, and Debian's
 * qemu-user-static, libc6-arm64-cross and gcc-aarch64-linux-gnu. Undefined when all are there.
 */
export function crossMissing(): string | undefined {
  const base = missing('root');
  if (base) return base;
  if (hostArch() !== 'x64') return absent('these suites cross-build arm64 on an x64 machine');
  try {
    runner('arm64');
    crossCompilers('arm64');
    return undefined;
  } catch (err) {
    return absent((err as Error).message);
  }
}

/** Debian's containerd, ctr and runc (what test/runtime/support/containerd.ts drives). */
export function containerdMissing(): string | undefined {
  const gone = ['/usr/bin/containerd', '/usr/bin/ctr', '/usr/sbin/runc'].filter((p) => !existsSync(p));
  return gone.length === 0
    ? missing('root', 'netns')
    : absent(`not installed: ${gone.join(', ')} (apt containerd, runc)`);
}
