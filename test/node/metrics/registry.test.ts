import { describe, expect, it } from 'vitest';
import { renderExposition } from '../../../node/metrics/exposition.js';
import { Registry } from '../../../node/metrics/registry.js';
import { ValidationError } from '../../../shared/errors.js';

async function render(registry: Registry): Promise<string> {
  return renderExposition(await registry.collect());
}

describe('Class: Registry', () => {
  it('writes HELP and TYPE once per family and one line per series', async () => {
    const registry = new Registry();
    const c = registry.counter('vpc_lease_x_total', 'Things done.', ['kind']);
    c.inc({ kind: 'a' });
    c.inc({ kind: 'a' }, 2);
    c.inc({ kind: 'b' });
    registry.gauge('vpc_lease_y', 'A level.').set({}, 0.5);
    expect(await render(registry)).toBe(
      [
        '# HELP vpc_lease_x_total Things done.',
        '# TYPE vpc_lease_x_total counter',
        'vpc_lease_x_total{kind="a"} 3',
        'vpc_lease_x_total{kind="b"} 1',
        '# HELP vpc_lease_y A level.',
        '# TYPE vpc_lease_y gauge',
        'vpc_lease_y 0.5',
        '',
      ].join('\n'),
    );
  });

  it('escapes backslash, quote and newline in label values, and backslash and newline in HELP', async () => {
    const registry = new Registry();
    registry.counter('vpc_lease_e_total', 'a \\ b\nc "q"', ['v']).inc({ v: 'x\\y"z\nw' });
    const text = await render(registry);
    expect(text).toContain('# HELP vpc_lease_e_total a \\\\ b\\nc "q"\n');
    expect(text).toContain('vpc_lease_e_total{v="x\\\\y\\"z\\nw"} 1\n');
  });

  it('writes cumulative buckets, +Inf, _sum and _count for a histogram', async () => {
    const registry = new Registry();
    const h = registry.histogram('vpc_lease_d_seconds', 'Durations.', ['cmd'], [0.1, 1]);
    for (const v of [0.05, 0.1, 0.5, 3]) h.observe({ cmd: 'ADD' }, v);
    const lines = (await render(registry)).split('\n');
    expect(lines).toEqual(
      expect.arrayContaining([
        'vpc_lease_d_seconds_bucket{cmd="ADD",le="0.1"} 2',
        'vpc_lease_d_seconds_bucket{cmd="ADD",le="1"} 3',
        'vpc_lease_d_seconds_bucket{cmd="ADD",le="+Inf"} 4',
        'vpc_lease_d_seconds_sum{cmd="ADD"} 3.65',
        'vpc_lease_d_seconds_count{cmd="ADD"} 4',
      ]),
    );
  });

  it('refuses a label set that is not the family’s, a falling counter and bad names', () => {
    const registry = new Registry();
    const c = registry.counter('vpc_lease_z_total', 'z', ['a']);
    expect(() => c.inc({ b: '1' })).toThrow(ValidationError);
    expect(() => c.inc({})).toThrow(/takes labels \{a\}/);
    expect(() => c.inc({ a: '1' }, -1)).toThrow(/only goes up/);
    expect(() => registry.counter('vpc_lease_z_total', 'again')).toThrow(/registered twice/);
    expect(() => registry.gauge('bad-name', 'x')).toThrow(/invalid metric name/);
    expect(() => registry.gauge('vpc_lease_ok', 'x', ['le'])).toThrow(/invalid label name/);
    expect(() => registry.histogram('vpc_lease_h', 'x', [], [1, 1])).toThrow(/strictly increasing/);
  });

  it('runs collectors on every render, and one that throws leaves the others served', async () => {
    const registry = new Registry();
    const g = registry.gauge('vpc_lease_g', 'g');
    let reads = 0;
    registry.onCollect(() => {
      reads += 1;
      g.set({}, reads);
    });
    registry.onCollect(() => {
      throw new Error('source down');
    });
    expect(await render(registry)).toContain('vpc_lease_g 1\n');
    expect(await render(registry)).toContain('vpc_lease_g 2\n');
  });
});
