import { ipFamilyOf } from '../../shared/ipv6.js';
import { type Datapath, type PodLinkSpec, type PodLinkState, podAddresses } from './port.js';

export interface AttachmentCheck {
  /** Everything that differs from what ADD builds; empty when the attachment is intact. */
  readonly problems: readonly string[];
  /** The pod's link as the kernel has it, when it exists. */
  readonly link?: PodLinkState;
}

/**
 * The whole attachment against what ADD builds for `spec`: the ENI's interface on the host (present and up), the
 * pod's link (kind, up, each address and its family's default route), and what `spec.routing` asks for (the L3/L3S rule and table
 * route, the host veth and its routes). CHECK reports the problems; a repeated ADD rebuilds when there are any.
 */
export async function verifyAttachment(
  datapath: Datapath,
  spec: PodLinkSpec,
  linkKind: string,
): Promise<AttachmentCheck> {
  const eni = await datapath.eniLink(spec.masterMac);
  if (!eni) return { problems: [`no host interface has the ENI's MAC ${spec.masterMac}`] };
  // A down ENI leaves its pods without carrier; a repeated ADD rebuilds, and setup brings the ENI up again.
  const problems: string[] = eni.up ? [] : [`ENI interface ${eni.name} (${spec.masterMac}) is down`];
  const link = await datapath.inspect(spec.netnsPath, spec.ifName);
  if (!link) return { problems: [...problems, `link ${spec.ifName} is missing in ${spec.netnsPath}`] };
  if (link.kind !== linkKind) problems.push(`link ${spec.ifName} is ${link.kind ?? 'unknown'}, not ${linkKind}`);
  if (!link.up) problems.push(`link ${spec.ifName} is down`);
  for (const address of podAddresses(spec)) {
    const cidr = `${address.ip}/${address.prefixLength}`;
    if (!link.addresses.includes(cidr))
      problems.push(`link ${spec.ifName} lacks ${cidr} (has ${link.addresses.join(', ') || 'none'})`);
    const v6 = ipFamilyOf(address.ip) === 'ipv6';
    const gateway = v6 ? link.defaultGateway6 : link.defaultGateway;
    if (gateway !== address.gateway)
      problems.push(`${v6 ? 'IPv6 ' : ''}default route is via ${gateway ?? 'nothing'}, not ${address.gateway}`);
  }
  if (spec.routing) problems.push(...(await datapath.inspectRouting({ ...spec, mtu: link.mtu })));
  return { problems, link };
}
