import { existsSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VpcLeaseError } from '../../shared/errors.js';

/** The setns(2) addon (node/native/netns.c). */
export interface NetnsAddon {
  setns(fd: number): void;
}

export const NETNS_ADDON_FILE = 'vpc_lease_netns.node';

export class NativeAddonMissingError extends VpcLeaseError {}

/** Where the addon may be: beside the executable (dist/, /opt/cni/bin), or the dev build under node/native/. */
function candidates(env: NodeJS.ProcessEnv): string[] {
  const out: string[] = [];
  const override = env['VPC_LEASE_NATIVE_DIR'];
  if (override) out.push(join(override, NETNS_ADDON_FILE));
  const main = process.argv[1];
  if (main) {
    try {
      out.push(join(dirname(realpathSync(main)), NETNS_ADDON_FILE));
    } catch {
      // not a file (node -e): the other places remain
    }
  }
  try {
    // In the esbuild bundle import.meta is empty and this throws; the executable's directory was tried above.
    const here = dirname(fileURLToPath(import.meta.url));
    out.push(join(here, '..', 'native', 'build', 'Release', NETNS_ADDON_FILE));
  } catch {
    // bundled
  }
  return out;
}

let loaded: NetnsAddon | undefined;

export function loadNetnsAddon(env: NodeJS.ProcessEnv = process.env): NetnsAddon {
  if (loaded) return loaded;
  const tried = candidates(env);
  const found = tried.find((p) => existsSync(p));
  if (!found)
    throw new NativeAddonMissingError(
      `the setns addon ${NETNS_ADDON_FILE} is missing (looked in ${tried.join(', ')}); run npm run build`,
    );
  loaded = createRequire(found)(found) as NetnsAddon;
  return loaded;
}
