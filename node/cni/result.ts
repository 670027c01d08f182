import { CniCode, CniError } from './errors.js';
import { atLeast, type CniVersion } from './version.js';

/**
 * A CNI result in a version-neutral shape. `formatResult` prints it the way the requested spec version
 * defines: 0.3.x/0.4.0 carry `version` ("4" or "6") on every IP, 1.0.0 dropped it, and 1.1.0 added the interface
 * `mtu`, `socketPath` and `pciID` and the route `mtu`, `advmss`, `priority`, `table` and `scope`. A previous
 * plugin's 1.1.0 fields are kept and passed on whenever the list's version has them.
 */
export interface CniInterface {
  readonly name: string;
  readonly mac?: string;
  readonly mtu?: number;
  readonly sandbox?: string;
  readonly socketPath?: string;
  readonly pciID?: string;
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
  readonly mtu?: number;
  readonly advmss?: number;
  readonly priority?: number;
  readonly table?: number;
  readonly scope?: number;
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

/** Fields the 1.1.0 result added: printed only from 1.1.0 on, read from any prevResult that has them. */
const INTERFACE_FIELDS_1_1 = ['mtu', 'socketPath', 'pciID'] as const;
const ROUTE_FIELDS_1_1 = ['mtu', 'advmss', 'priority', 'table', 'scope'] as const;

/** The fields of `from` named in `keys` that are set, for spreading into an output object. */
function pick<T extends object>(from: T, keys: readonly (keyof T)[]): Partial<T> {
  const out: Partial<T> = {};
  for (const key of keys) if (from[key] !== undefined) out[key] = from[key];
  return out;
}

export function formatResult(result: CniResult, version: CniVersion): Record<string, unknown> {
  const withIpVersion = !atLeast(version, '1.0.0');
  const with11 = atLeast(version, '1.1.0');
  return {
    cniVersion: version,
    interfaces: result.interfaces.map((i) => ({
      ...pick(i, ['name', 'mac']),
      ...(with11 ? pick(i, INTERFACE_FIELDS_1_1) : {}),
      ...pick(i, ['sandbox']),
    })),
    ips: result.ips.map((ip) => ({
      ...(withIpVersion ? { version: ip.address.includes(':') ? '6' : '4' } : {}),
      ...pick(ip, ['address', 'gateway', 'interface']),
    })),
    routes: result.routes.map((r) => ({ ...pick(r, ['dst', 'gw']), ...(with11 ? pick(r, ROUTE_FIELDS_1_1) : {}) })),
    dns: { ...result.dns },
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function bad(why: string): CniError {
  return new CniError(CniCode.invalidConfig, 'invalid prevResult', why);
}

type FieldKind = 'string' | 'uint' | 'strings';

/** The optional fields of `raw` named in `kinds`, each checked against its kind (code 7 when it is not one). */
function optionalFields(raw: Record<string, unknown>, kinds: Record<string, FieldKind>, where: string) {
  const out: Record<string, unknown> = {};
  for (const [key, kind] of Object.entries(kinds)) {
    const value = raw[key];
    if (value === undefined || value === null) continue;
    const ok =
      kind === 'string'
        ? typeof value === 'string'
        : kind === 'uint'
          ? Number.isSafeInteger(value) && (value as number) >= 0
          : Array.isArray(value) && value.every((v) => typeof v === 'string');
    if (!ok) throw bad(`${where}.${key} must be ${kind === 'uint' ? 'an unsigned integer' : `a ${kind}`}`);
    out[key] = value;
  }
  return out;
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
    const fields = { mac: 'string', mtu: 'uint', sandbox: 'string', socketPath: 'string', pciID: 'string' } as const;
    return { name: i['name'], ...optionalFields(i, fields, `interfaces[${n}]`) };
  });
  const ips = list('ips').map((ip, n): CniIp => {
    if (!isObject(ip) || typeof ip['address'] !== 'string') throw bad(`ips[${n}] needs an address`);
    const index = ip['interface'];
    if (
      index !== undefined &&
      (!Number.isSafeInteger(index) || (index as number) < 0 || (index as number) >= interfaces.length)
    )
      throw bad(`ips[${n}].interface does not index interfaces`);
    return {
      address: ip['address'],
      ...optionalFields(ip, { gateway: 'string' }, `ips[${n}]`),
      ...(typeof index === 'number' ? { interface: index } : {}),
    };
  });
  const routes = list('routes').map((r, n): CniRoute => {
    if (!isObject(r) || typeof r['dst'] !== 'string') throw bad(`routes[${n}] needs a dst`);
    const fields = {
      gw: 'string',
      mtu: 'uint',
      advmss: 'uint',
      priority: 'uint',
      table: 'uint',
      scope: 'uint',
    } as const;
    return { dst: r['dst'], ...optionalFields(r, fields, `routes[${n}]`) };
  });
  const rawDns = raw['dns'];
  if (rawDns !== undefined && rawDns !== null && !isObject(rawDns)) throw bad('dns must be an object');
  const dnsFields = { nameservers: 'strings', domain: 'string', search: 'strings', options: 'strings' } as const;
  const dns: CniDns = isObject(rawDns) ? optionalFields(rawDns, dnsFields, 'dns') : {};
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
