/**
 * The parts of DynamoDB's expression grammar IAM's request context depends on: which top-level attributes an
 * update writes, which a projection reads, and which value a key condition pins the partition key to. A
 * fragment these functions cannot read throws, so the endpoint refuses the request rather than guess a context.
 */

export class ExpressionError extends Error {
  override readonly name = 'ExpressionError';
}

type Names = Readonly<Record<string, string>> | undefined;

/** Splits on `separator` outside parentheses and brackets. */
function splitTopLevel(text: string, separator: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === '(' || c === '[') depth += 1;
    else if (c === ')' || c === ']') depth -= 1;
    else if (depth === 0 && text.startsWith(separator, i)) {
      parts.push(text.slice(start, i));
      start = i + separator.length;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p !== '');
}

/** The top-level attribute a document path names: `#a.b[2]` → the name `#a` stands for. */
export function topLevelName(path: string, names: Names): string {
  const head = path.trim().split(/[.[]/, 1)[0] ?? '';
  if (head.startsWith('#')) {
    const resolved = names?.[head];
    if (resolved === undefined) throw new ExpressionError(`unknown expression attribute name ${head}`);
    return resolved;
  }
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(head)) throw new ExpressionError(`cannot read the attribute path "${path}"`);
  return head;
}

const CLAUSE = /\b(SET|REMOVE|ADD|DELETE)\b/gi;

/** Every top-level attribute an UpdateExpression writes (SET, REMOVE, ADD, DELETE targets). */
export function updatedAttributes(expression: string, names: Names): string[] {
  const out = new Set<string>();
  const marks = [...expression.matchAll(CLAUSE)].filter(
    (m) => depthAt(expression, m.index) === 0 && !/[#:]/.test(expression[m.index - 1] ?? ''),
  );
  if (marks.length === 0 || expression.slice(0, marks[0]!.index).trim() !== '')
    throw new ExpressionError(`cannot read the update expression "${expression}"`);
  for (const [i, mark] of marks.entries()) {
    const body = expression.slice(mark.index + mark[0].length, marks[i + 1]?.index ?? expression.length);
    const verb = mark[0].toUpperCase();
    for (const action of splitTopLevel(body, ',')) {
      const target =
        verb === 'SET' ? action.split('=', 1)[0]! : verb === 'REMOVE' ? action : action.split(/\s+/, 1)[0]!;
      out.add(topLevelName(target, names));
    }
  }
  return [...out];
}

function depthAt(text: string, index: number): number {
  let depth = 0;
  for (let i = 0; i < index; i += 1) {
    if (text[i] === '(' || text[i] === '[') depth += 1;
    else if (text[i] === ')' || text[i] === ']') depth -= 1;
  }
  return depth;
}

/** The top-level attributes a ProjectionExpression reads. */
export function projectedAttributes(expression: string, names: Names): string[] {
  return [...new Set(splitTopLevel(expression, ',').map((p) => topLevelName(p, names)))];
}

/**
 * The value placeholder a KeyConditionExpression sets `partitionKey` equal to, or undefined when no clause
 * does (DynamoDB itself then refuses the Query, after IAM has).
 */
export function partitionKeyPlaceholder(expression: string, names: Names, partitionKey: string): string | undefined {
  for (const clause of splitTopLevel(expression.replace(/\bAND\b/gi, '&&'), '&&')) {
    const m = /^\(?\s*([#A-Za-z_][A-Za-z0-9_]*)\s*=\s*(:[A-Za-z0-9_]+)\s*\)?$/.exec(clause);
    const r = /^\(?\s*(:[A-Za-z0-9_]+)\s*=\s*([#A-Za-z_][A-Za-z0-9_]*)\s*\)?$/.exec(clause);
    const [name, value] = m ? [m[1]!, m[2]!] : r ? [r[2]!, r[1]!] : [undefined, undefined];
    if (name !== undefined && topLevelName(name, names) === partitionKey) return value;
  }
  return undefined;
}
