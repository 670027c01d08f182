/**
 * A strict reader for the small TOML of user-data snippets: `[dotted.table]` headers, `key = value` with bare
 * or quoted keys, and basic strings, integers and booleans as values, `#` comments. Anything else (arrays,
 * inline tables, multi-line strings, dates, a key or table given twice) is refused with the line, rather
 * than read wrongly; no TOML parser ships in node_modules.
 */
export type TomlValue = string | number | boolean | TomlTable;
export interface TomlTable {
  [key: string]: TomlValue;
}

const BARE_KEY = /^[A-Za-z0-9_-]+$/;

function key(raw: string, line: number): string {
  const k = raw.trim();
  if (BARE_KEY.test(k)) return k;
  const quoted = /^"([^"\\]*)"$/.exec(k);
  if (quoted) return quoted[1]!;
  throw new Error(`line ${line}: unsupported key ${JSON.stringify(k)}`);
}

function value(raw: string, line: number): string | number | boolean {
  const v = raw.trim();
  if (/^"([^"\\]*)"$/.test(v)) return v.slice(1, -1);
  if (/^[+-]?(0|[1-9](_?\d)*)$/.test(v)) return Number(v.replace(/_/g, ''));
  if (v === 'true' || v === 'false') return v === 'true';
  throw new Error(`line ${line}: unsupported value ${JSON.stringify(v)}`);
}

/** Strips a trailing comment outside a string. */
function uncomment(text: string): string {
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '"') inString = !inString;
    else if (text[i] === '#' && !inString) return text.slice(0, i);
  }
  return text;
}

export function parseStrictToml(text: string): TomlTable {
  const root: TomlTable = {};
  const seenTables = new Set<string>();
  let current = root;
  for (const [i, rawLine] of text.split('\n').entries()) {
    const n = i + 1;
    const line = uncomment(rawLine).trim();
    if (line === '') continue;
    const header = /^\[([^[\]]+)\]$/.exec(line);
    if (header) {
      const path = header[1]!.split('.').map((p) => key(p, n));
      const name = path.join('.');
      if (seenTables.has(name)) throw new Error(`line ${n}: table [${name}] defined twice`);
      seenTables.add(name);
      current = root;
      for (const part of path) {
        const next = current[part] ?? {};
        if (typeof next !== 'object') throw new Error(`line ${n}: ${part} is a value, not a table`);
        current[part] = next;
        current = next;
      }
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`line ${n}: neither a table header nor key = value`);
    const k = key(line.slice(0, eq), n);
    if (k in current) throw new Error(`line ${n}: key ${k} given twice`);
    current[k] = value(line.slice(eq + 1), n);
  }
  return root;
}
