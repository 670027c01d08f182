import * as sdk from '@aws-sdk/client-ec2';
import { NormalizedSchema } from '@smithy/core/schema';
import { Ec2ApiError } from './errors.js';

/**
 * The EC2 Query protocol, both directions, driven by the operation schemas that `@aws-sdk/client-ec2` itself
 * carries (generated from the service model). Requests arrive as `Foo.1`, `Filter.1.Value.1` …; member names on
 * the wire are `ec2QueryName`, else the capitalised `xmlName`, else the member name — the same rule the SDK's
 * serializer applies. Responses are XML whose elements are the members' `xmlName` and whose list entries are
 * `<item>`. Taking the names from the model keeps every action's shapes exact without hand-written XML; the
 * contract suite, which round-trips through the real client, is what proves the rules are applied right.
 */
export const EC2_API_VERSION = '2016-11-15';
const XMLNS = `http://ec2.amazonaws.com/doc/${EC2_API_VERSION}/`;

type StaticOperation = readonly [9, string, string, unknown, unknown, unknown];

const schemas = sdk as unknown as Record<string, unknown>;

function operationSchema(action: string): StaticOperation | undefined {
  const op = schemas[`${action}$`];
  if (!Array.isArray(op) || op[0] !== 9) return undefined;
  return op as unknown as StaticOperation;
}

export function isKnownAction(action: string): boolean {
  return operationSchema(action) !== undefined;
}

/** Form fields as a tree: `Filter.1.Value.2=x` becomes `{Filter: {1: {Value: {2: 'x'}}}}`. */
type FormTree = { [key: string]: FormTree | string };

function toTree(params: URLSearchParams): FormTree {
  const root: FormTree = {};
  for (const [key, value] of params) {
    if (key === 'Action' || key === 'Version') continue;
    const parts = key.split('.');
    let node = root;
    for (let i = 0; i < parts.length - 1; i++) {
      const part = parts[i] as string;
      const next = node[part];
      if (typeof next === 'object') {
        node = next;
      } else {
        const child: FormTree = {};
        node[part] = child;
        node = child;
      }
    }
    node[parts[parts.length - 1] as string] = value;
  }
  return root;
}

function wireKey(memberName: string, ns: NormalizedSchema): string {
  const traits = ns.getMergedTraits();
  if (typeof traits.ec2QueryName === 'string') return traits.ec2QueryName;
  const key = typeof traits.xmlName === 'string' ? traits.xmlName : memberName;
  return key.charAt(0).toUpperCase() + key.slice(1);
}

function readValue(ns: NormalizedSchema, value: FormTree | string, path: string): unknown {
  if (ns.isListSchema()) {
    if (typeof value === 'string') return value === '' ? [] : [readValue(ns.getValueSchema(), value, path)];
    const indexes = Object.keys(value)
      .map(Number)
      .filter((n) => Number.isInteger(n) && n > 0)
      .sort((a, b) => a - b);
    return indexes.map((i) => readValue(ns.getValueSchema(), value[String(i)] as FormTree | string, `${path}.${i}`));
  }
  if (ns.isMapSchema()) {
    const out: Record<string, unknown> = {};
    if (typeof value === 'string') return out;
    const entries = (typeof value['entry'] === 'object' ? value['entry'] : value) as FormTree;
    for (const entry of Object.values(entries)) {
      if (typeof entry !== 'object') continue;
      const k = entry['key'];
      const v = entry['value'];
      if (typeof k === 'string' && v !== undefined) out[k] = readValue(ns.getValueSchema(), v, path);
    }
    return out;
  }
  if (ns.isStructSchema()) {
    if (typeof value === 'string') throw malformed(path);
    const out: Record<string, unknown> = {};
    for (const [memberName, member] of ns.structIterator()) {
      const raw = value[wireKey(memberName, member)];
      if (raw !== undefined) out[memberName] = readValue(member, raw, `${path}.${memberName}`);
    }
    return out;
  }
  if (typeof value !== 'string') throw malformed(path);
  if (ns.isBooleanSchema()) {
    if (value !== 'true' && value !== 'false') throw malformed(path, value);
    return value === 'true';
  }
  if (ns.isNumericSchema()) {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n)) throw malformed(path, value);
    return n;
  }
  if (ns.isTimestampSchema()) {
    const d = new Date(/^\d+(\.\d+)?$/.test(value) ? Number(value) * 1000 : value);
    if (Number.isNaN(d.getTime())) throw malformed(path, value);
    return d;
  }
  return value;
}

function malformed(path: string, value?: string): Ec2ApiError {
  const shown = value === undefined ? '' : ` '${value}'`;
  return new Ec2ApiError('InvalidParameterValue', `Invalid value${shown} for ${path.replace(/^\./, '')}`);
}

/** The action's input in the SDK's own shape (e.g. `{ Filters: [{ Name, Values }] }`). */
export function decodeRequest(action: string, params: URLSearchParams): Record<string, unknown> {
  const op = operationSchema(action);
  if (!op) throw new Ec2ApiError('InvalidAction', `The action ${action} is not valid for this web service.`);
  const input = NormalizedSchema.of(op[4] as Parameters<typeof NormalizedSchema.of>[0]);
  if (input.isUnitSchema()) return {};
  return readValue(input, toTree(params), '') as Record<string, unknown>;
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function scalarText(ns: NormalizedSchema, value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (ns.isTimestampSchema() && typeof value === 'number') return new Date(value).toISOString();
  return escapeXml(String(value));
}

function writeValue(ns: NormalizedSchema, value: unknown, out: string[]): void {
  if (ns.isListSchema()) {
    if (!Array.isArray(value)) return;
    const item = ns.getValueSchema();
    const tag = (item.getMergedTraits().xmlName as string | undefined) ?? 'member';
    for (const entry of value) {
      if (entry === undefined || entry === null) continue;
      out.push(`<${tag}>`);
      writeValue(item, entry, out);
      out.push(`</${tag}>`);
    }
    return;
  }
  if (ns.isMapSchema()) {
    if (typeof value !== 'object' || value === null) return;
    for (const [k, v] of Object.entries(value)) {
      out.push(`<entry><key>${escapeXml(k)}</key><value>`);
      writeValue(ns.getValueSchema(), v, out);
      out.push('</value></entry>');
    }
    return;
  }
  if (ns.isStructSchema()) {
    if (typeof value !== 'object' || value === null) return;
    const record = value as Record<string, unknown>;
    for (const [memberName, member] of ns.structIterator()) {
      const v = record[memberName];
      if (v === undefined || v === null) continue;
      const tag = (member.getMemberTraits().xmlName as string | undefined) ?? memberName;
      out.push(`<${tag}>`);
      writeValue(member, v, out);
      out.push(`</${tag}>`);
    }
    return;
  }
  out.push(scalarText(ns, value));
}

/** `<ActionResponse xmlns=…><requestId>…</requestId>…</ActionResponse>`; members not in the model are dropped. */
export function encodeResponse(action: string, output: Record<string, unknown>, requestId: string): string {
  const op = operationSchema(action);
  if (!op) throw new Error(`no schema for ${action}`);
  const out: string[] = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<${action}Response xmlns="${XMLNS}">`,
    `<requestId>${requestId}</requestId>`,
  ];
  const schema = NormalizedSchema.of(op[5] as Parameters<typeof NormalizedSchema.of>[0]);
  if (!schema.isUnitSchema()) writeValue(schema, output, out);
  // Actions modelled as returning only `Return` (e.g. DeleteNetworkInterface is modelled as unit) still answer
  // <return>true</return> on the wire, as EC2 does.
  if (schema.isUnitSchema()) out.push('<return>true</return>');
  out.push(`</${action}Response>`);
  return out.join('');
}

export function encodeError(code: string, message: string, requestId: string): string {
  return (
    '<?xml version="1.0" encoding="UTF-8"?>' +
    `<Response><Errors><Error><Code>${escapeXml(code)}</Code><Message>${escapeXml(message)}</Message></Error>` +
    `</Errors><RequestID>${requestId}</RequestID></Response>`
  );
}
