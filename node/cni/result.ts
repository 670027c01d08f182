import { CniCode, CniError } from './errors.js';
import { atLeast, type CniVersion } from './version.js';

/**
 * A CNI result in a version-neutral shape. `formatResult` prints it the way the requested spec version
 * defines: 0.3.x/0.4.0 carry `version: "4"` on every IP, 1.0.0 dropped it, 1.1.0 added the interface `mtu`.
 */
export interface CniInterface {
  readonly name: string;
  readonly mac?: string;
  readonly mtu?: number;
  readonly sandbox?: string;
}

export interface CniIp {
  /** CIDR notation: the address with its prefix length. */
  readonly address: string;
  readonly gateway?: string;
  /** Index into `interfaces`. */
  readonly interface?: number;
}

export interface CniRoute {
  readonly dst: string;
  readonly gw?: string;
}

export interface CniDns {
  readonly nameservers?: readonly string[];
  readonly domain?: string;
  readonly search?: readonly string[];
  readonly options?: readonly string[];
}

export interface CniResult {
  readonly interfaces: readonly CniInterface[];
  readonly ips: readonly CniIp[];
  readonly routes: readonly CniRoute[];
  readonly dns: CniDns;
}

export function formatResult(result: CniResult, version: CniVersion): Record<string, unknown> {
  const withIpVersion = !atLeast(version, '1.0.0');
  const withMtu = atLeast(version, '1.1.0');
  return {
    cniVersion: version,
    interfaces: result.interfaces.map((i) => ({
      name: i.name,
      ...(i.mac !== undefined ? { mac: i.mac } : {}),
      ...(withMtu && i.mtu !== undefined ? { mtu: i.mtu } : {}),
      ...(i.sandbox !== undefined ? { sandbox: i.sandbox } : {}),
    })),
    ips: result.ips.map((ip) => ({
      ...(withIpVersion ? { version: '4' } : {}),
      address: ip.address,
      ...(ip.gateway !== undefined ? { gateway: ip.gateway } : {}),
      ...(ip.interface !== undefined ? { interface: ip.interface } : {}),
    })),
    routes: result.routes.map((r) => ({ dst: r.dst, ...(r.gw !== undefined ? { gw: r.gw } : {}) })),
    dns: { ...result.dns },
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function bad(why: string): CniError {
  return new CniError(CniCode.invalidConfig, 'invalid prevResult', why);
}

/** Reads a `prevResult` of any supported version into the neutral shape. @throws CniError code 7 */
export function parsePrevResult(raw: unknown): CniResult {
  if (!isObject(raw)) throw bad('prevResult must be an object');
  const list = (name: string): unknown[] => {
    const value = raw[name];
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) throw bad(`${name} must be a list`);
    return value;
  };
  const interfaces = list('interfaces').map((i, n): CniInterface => {
    if (!isObject(i) || typeof i['name'] !== 'string') throw bad(`interfaces[${n}] needs a name`);
    return {
      name: i['name'],
      ...(typeof i['mac'] === 'string' ? { mac: i['mac'] } : {}),
      ...(typeof i['mtu'] === 'number' ? { mtu: i['mtu'] } : {}),
      ...(typeof i['sandbox'] === 'string' ? { sandbox: i['sandbox'] } : {}),
    };
  });
  const ips = list('ips').map((ip, n): CniIp => {
    if (!isObject(ip) || typeof ip['address'] !== 'string') throw bad(`ips[${n}] needs an address`);
    const index = ip['interface'];
    if (index !== undefined && (typeof index !== 'number' || index < 0 || index >= interfaces.length))
      throw bad(`ips[${n}].interface does not index interfaces`);
    return {
      address: ip['address'],
      ...(typeof ip['gateway'] === 'string' ? { gateway: ip['gateway'] } : {}),
      ...(typeof index === 'number' ? { interface: index } : {}),
    };
  });
  const routes = list('routes').map((r, n): CniRoute => {
    if (!isObject(r) || typeof r['dst'] !== 'string') throw bad(`routes[${n}] needs a dst`);
    return { dst: r['dst'], ...(typeof r['gw'] === 'string' ? { gw: r['gw'] } : {}) };
  });
  const dns = isObject(raw['dns']) ? (raw['dns'] as CniDns) : {};
  return { interfaces, ips, routes, dns };
}

/** Appends our attachment to a previous plugin's result, re-pointing our IPs at the appended interfaces. */
export function appendResult(prev: CniResult, ours: CniResult): CniResult {
  const offset = prev.interfaces.length;
  return {
    interfaces: [...prev.interfaces, ...ours.interfaces],
    ips: [
      ...prev.ips,
      ...ours.ips.map((ip) => (ip.interface === undefined ? ip : { ...ip, interface: ip.interface + offset })),
    ],
    routes: [...prev.routes, ...ours.routes],
    dns: Object.keys(prev.dns).length > 0 ? prev.dns : ours.dns,
  };
}
