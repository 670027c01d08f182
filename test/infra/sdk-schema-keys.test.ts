import { describe, expect, it } from 'vitest';
import { rewriteSchemaKeys } from '../../packaging/sdk-schema-keys.js';

describe('Function: rewriteSchemaKeys', () => {
  const module = [
    'const _M = "Min";',
    'const _xN = "xmlName";',
    'const _eQN = "ec2QueryName";',
    'export var Count$ = [3, n0, _C, 0, [_M], [[1, { [_eQN]: `Min`, [_xN]: _m }]]];',
  ].join('\n');

  it('turns computed trait keys into the string literals their constants hold, and nothing else', () => {
    const out = rewriteSchemaKeys(module, 'schemas_0.js');
    expect(out).toContain('[[1, { "ec2QueryName": `Min`, "xmlName": _m }]]');
    // Member lists are arrays of the same constants, not keys: left alone.
    expect(out).toContain('[_M]');
    // The same value either way.
    const run = (src: string): unknown =>
      new Function(`const n0 = "ns", _C = "C", _m = "min"; ${src.replaceAll('export var', 'var')}; return Count$;`)();
    expect(run(out)).toEqual(run(module));
  });

  it('fails when a computed key names no string constant of the module (a new SDK layout)', () => {
    const changed = `${module}\nexport var Other$ = [3, n0, _O, 0, [], [[1, { [_unknown]: 1 }]]];`;
    expect(() => rewriteSchemaKeys(changed, 'schemas_0.js')).toThrow(
      /failed to rewrite the schema keys of schemas_0\.js: \[_unknown\]:/,
    );
  });
});
