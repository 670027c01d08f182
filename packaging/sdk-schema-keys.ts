import { readFile } from 'node:fs/promises';
import type { Plugin } from 'esbuild';

/** The SDK clients' schema modules: one file per client holding every operation's shapes. */
const SCHEMA_FILE = /[\\/]@aws-sdk[\\/]client-[^\\/]+[\\/]dist-es[\\/]schemas[\\/]schemas_\d+\.js$/;
const STRING_CONST = /^const (_\w+) = ("[^"\\]*");$/gm;
const COMPUTED_KEY = /\[(_\w+)\]:/g;

/**
 * Rewrites `{ [_xN]: v }` in a schema module to `{ "xmlName": v }`, with the key the module's own
 * `const _xN = "xmlName"` gives. esbuild cannot prove a computed key free of side effects, so every shape
 * with a trait stayed in the bundle with everything it names: 540 of the EC2 client's 550 KB, for the ten
 * operations we send. With literal keys the unused shapes are plain data and drop out.
 */
export function rewriteSchemaKeys(source: string, file: string): string {
  const consts = new Map<string, string>();
  for (const m of source.matchAll(STRING_CONST)) consts.set(m[1]!, m[2]!);
  const out = source.replace(COMPUTED_KEY, (key, name: string) => {
    const literal = consts.get(name);
    return literal === undefined ? key : `${literal}:`;
  });
  // A new SDK layout must fail the build, not quietly bring the half-megabyte back.
  const left = out.match(COMPUTED_KEY);
  if (left) throw new Error(`failed to rewrite the schema keys of ${file}: ${left[0]} names no string constant`);
  return out;
}

export const sdkSchemaKeys: Plugin = {
  name: 'vpc-lease-sdk-schema-keys',
  setup(build) {
    build.onLoad({ filter: SCHEMA_FILE }, async (args) => ({
      contents: rewriteSchemaKeys(await readFile(args.path, 'utf8'), args.path),
      loader: 'js',
    }));
  },
};
