import { existsSync } from 'node:fs';
import { missing } from '../../support/capabilities.js';
import { goAvailable, toolDir } from '../../tools/build.js';

/**
 * Debian's containerd 1.6 and runc, busybox for the sandbox image, and Go (or the tools already in the cache)
 * for containerd 2.x and crictl. CI=true: anything absent is a failure.
 */
export function criMissing(): string | undefined {
  const base = missing('root', 'netns', 'go-plugins');
  if (base) return base;
  const absent = ['/usr/bin/containerd', '/usr/bin/ctr', '/usr/sbin/runc', '/bin/busybox'].filter(
    (p) => !existsSync(p),
  );
  const tools = ['containerd', 'crictl', 'cni-plugins'].filter((t) => !existsSync(toolDir(t)));
  if (tools.length > 0 && !goAvailable()) absent.push(`go (to build ${tools.join(', ')}; npm run tools)`);
  if (absent.length === 0) return undefined;
  const reason = `not installed: ${absent.join(', ')} (apt packages containerd, runc, busybox-static; Go)`;
  if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
  process.stderr.write(`skipping: ${reason}\n`);
  return reason;
}
