/**
 * The AWS Query protocol as @aws-sdk/client-auto-scaling speaks it: form-encoded requests whose keys are
 * dotted paths (`Tags.member.1.Key`, `LaunchTemplate.LaunchTemplateName`), and XML responses in the
 * 2011-01-01 namespace whose lists are `<member>` elements.
 */
export const AUTOSCALING_XMLNS = 'http://autoscaling.amazonaws.com/doc/2011-01-01/';

export type QueryNode = { [key: string]: QueryNode | string };

/** `a.b.member.2.c=v` → `{ a: { b: { member: { '2': { c: 'v' } } } } }`. */
export function parseQuery(body: string): QueryNode {
  const root: QueryNode = {};
  for (const [key, value] of new URLSearchParams(body)) {
    const parts = key.split('.');
    let node = root;
    parts.forEach((part, i) => {
      if (i === parts.length - 1) {
        node[part] = value;
        return;
      }
      const next = node[part];
      if (typeof next === 'object') node = next;
      else {
        const created: QueryNode = {};
        node[part] = created;
        node = created;
      }
    });
  }
  return root;
}

export function child(node: QueryNode | undefined, key: string): QueryNode | undefined {
  const value = node?.[key];
  return typeof value === 'object' ? value : undefined;
}

export function text(node: QueryNode | undefined, key: string): string | undefined {
  const value = node?.[key];
  return typeof value === 'string' ? value : undefined;
}

export function int(node: QueryNode | undefined, key: string): number | undefined {
  const value = text(node, key);
  return value === undefined ? undefined : Number(value);
}

export function bool(node: QueryNode | undefined, key: string): boolean | undefined {
  const value = text(node, key);
  return value === undefined ? undefined : value === 'true';
}

/** The `member.N` entries of a list, in index order. */
export function members(node: QueryNode | undefined, key: string): (QueryNode | string)[] {
  const list = child(child(node, key), 'member');
  if (!list) return [];
  return Object.keys(list)
    .sort((a, b) => Number(a) - Number(b))
    .map((index) => list[index]!);
}

export function stringMembers(node: QueryNode | undefined, key: string): string[] {
  return members(node, key).filter((m): m is string => typeof m === 'string');
}

export function structMembers(node: QueryNode | undefined, key: string): QueryNode[] {
  return members(node, key).filter((m): m is QueryNode => typeof m === 'object');
}

export type XmlValue = string | number | boolean | Date | undefined | null | XmlValue[] | { [key: string]: XmlValue };

function escapeXml(value: string): string {
  return value.replace(
    /[<>&'"]/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!,
  );
}

/** Objects become elements, arrays `<member>` lists, dates ISO 8601; undefined/null members are omitted. */
export function toXml(name: string, value: XmlValue): string {
  if (value === undefined || value === null) return '';
  if (Array.isArray(value)) return `<${name}>${value.map((item) => toXml('member', item)).join('')}</${name}>`;
  if (value instanceof Date) return `<${name}>${value.toISOString()}</${name}>`;
  if (typeof value === 'object') {
    return `<${name}>${Object.entries(value)
      .map(([k, v]) => toXml(k, v))
      .join('')}</${name}>`;
  }
  return `<${name}>${escapeXml(String(value))}</${name}>`;
}

export function responseXml(action: string, result: Record<string, XmlValue> | undefined, requestId: string): string {
  const body = result === undefined ? '' : toXml(`${action}Result`, result);
  return (
    `<?xml version="1.0"?>\n<${action}Response xmlns="${AUTOSCALING_XMLNS}">${body}` +
    `<ResponseMetadata><RequestId>${requestId}</RequestId></ResponseMetadata></${action}Response>`
  );
}

export function errorXml(code: string, message: string, type: 'Sender' | 'Receiver', requestId: string): string {
  return (
    `<?xml version="1.0"?>\n<ErrorResponse xmlns="${AUTOSCALING_XMLNS}"><Error><Type>${type}</Type>` +
    `<Code>${escapeXml(code)}</Code><Message>${escapeXml(message)}</Message></Error>` +
    `<RequestId>${requestId}</RequestId></ErrorResponse>`
  );
}
