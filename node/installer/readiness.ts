import { errorMessage } from '../../shared/errors.js';
import { parseNetconf } from '../config/netconf.js';
import { checkOverrides } from '../config/overrides.js';
import { loadIdentity } from '../identity/identity.js';
import { phaseProblem, probeStore, storeProblem } from '../plugin/status.js';
import { openLeaseStore } from '../store/open-store.js';

/** Why the node cannot serve ADDs yet, or undefined once it is READY in the store. */
export type ReadinessProbe = () => Promise<string | undefined>;

/**
 * The installer's readiness check, the same one STATUS makes: the instance identity from IMDS, then one GetItem of
 * the node item, READY or not. Built from the plugin configuration the conflist will carry (table, region,
 * endpoints), so it asks exactly the store the plugin will use.
 */
export function storeReadiness(
  pluginConfig: Record<string, unknown>,
  networkName: string,
  env: NodeJS.ProcessEnv,
  nowMs: () => number = Date.now,
): ReadinessProbe {
  const config = parseNetconf({ cniVersion: '1.0.0', name: networkName, type: 'vpc-lease-cni', ...pluginConfig });
  checkOverrides(env, config);
  return async () => {
    let identity: Awaited<ReturnType<typeof loadIdentity>>;
    try {
      identity = await loadIdentity({
        dataDir: config.dataDir,
        ttlS: config.identityCacheTtlS,
        timeoutMs: config.imdsTimeoutMs,
        ...(config.imdsEndpoint ? { endpoint: config.imdsEndpoint } : {}),
        env,
        nowMs: nowMs(),
      });
    } catch (err) {
      return `no instance identity: ${errorMessage(err)}`;
    }
    const probe = await probeStore(() => openLeaseStore(config, identity).getNode(identity.instanceArn));
    return probe.kind === 'answered' ? phaseProblem(probe.node) : storeProblem(probe);
  };
}
