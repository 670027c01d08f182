/**
 * Turns CloudFormation intrinsics into concrete strings: `{Ref: X}` and `{Fn::GetAtt: [X, A]}` through the
 * given map (keys `X` and `X.A`), Fn::Join, and Fn::Sub with `${X}`/`${X.A}` placeholders. An unknown
 * reference throws, so a template change cannot silently leave an unresolved ARN in a policy.
 */
export function concretize(value: unknown, refs: Readonly<Record<string, string>>): unknown {
  if (Array.isArray(value)) return value.map((v) => concretize(v, refs));
  if (typeof value !== 'object' || value === null) return value;
  const o = value as Record<string, unknown>;
  const ref = (name: string): string => {
    const v = refs[name];
    if (v === undefined) throw new Error(`failed to resolve ${name}: no local value for it`);
    return v;
  };
  if (typeof o['Ref'] === 'string') return ref(o['Ref']);
  if (Array.isArray(o['Fn::GetAtt'])) return ref((o['Fn::GetAtt'] as string[]).join('.'));
  if (typeof o['Fn::GetAtt'] === 'string') return ref(o['Fn::GetAtt']);
  if (Array.isArray(o['Fn::Join'])) {
    const [sep, items] = o['Fn::Join'] as [string, unknown[]];
    return items.map((i) => concretize(i, refs)).join(sep);
  }
  if (o['Fn::Sub'] !== undefined) {
    const [text, vars] = (Array.isArray(o['Fn::Sub']) ? o['Fn::Sub'] : [o['Fn::Sub'], {}]) as [
      string,
      Record<string, unknown>,
    ];
    const local = Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, String(concretize(v, refs))]));
    // `${!Literal}` stays `${Literal}`; IAM policy variables such as ${ec2:SourceInstanceARN} are not CFN names.
    return text.replace(/\$\{(!?)([^}]+)\}/g, (whole, bang: string, name: string) => {
      if (bang) return `\${${name}}`;
      if (local[name] !== undefined) return local[name];
      if (name.includes(':') && !name.startsWith('AWS::')) return whole;
      return ref(name);
    });
  }
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, concretize(v, refs)]));
}
