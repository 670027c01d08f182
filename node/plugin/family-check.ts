import { NoFreeLeaseError } from '../../shared/errors.js';
import type { PodIpFamily } from '../../shared/lease-store/claim-pair.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { CniCode, CniError } from '../cni/errors.js';

/**
 * A claim that found no lease of the netconf's family, explained when the node was provisioned for another
 * family (the node item's `ipFamily`, absent = ipv4): code 7, naming both. Read only on that failure, so a
 * successful ADD stays one Query and one UpdateItem; any other failure (or an unreadable node item) is
 * rethrown as it was.
 */
export async function explainFamilyMismatch(
  err: unknown,
  store: LeaseStore,
  instanceArn: string,
  family: PodIpFamily,
): Promise<unknown> {
  if (!(err instanceof NoFreeLeaseError)) return err;
  const node = await store.getNode(instanceArn).catch(() => undefined);
  const provisioned = node ? (node.ipFamily ?? 'ipv4') : undefined;
  if (provisioned === undefined || provisioned === family) return err;
  return new CniError(
    CniCode.invalidConfig,
    `netconf ipFamily ${family} does not match this node's ${provisioned} (the control plane's ipFamily); ` +
      `set "ipFamily": "${provisioned}" in the node's netconf (the DaemonSet ConfigMap's config.json)`,
    undefined,
    { cause: err },
  );
}
