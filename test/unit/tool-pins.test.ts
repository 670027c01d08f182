import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkModule, readPins, TOOLS_DIR, toolDir } from '../tools/build.js';

describe('Go test tools: test/tools/versions.json is the one pin', () => {
  const pins = Object.entries(readPins());

  it.each(pins)('%s: its module requires exactly the pinned version', (name, pin) => {
    expect(existsSync(join(TOOLS_DIR, name, 'go.sum'))).toBe(true);
    expect(() => checkModule(name, pin)).not.toThrow();
    // The cache entry is keyed by the pin, so a new pin never reuses an old build.
    expect(toolDir(name)).toContain(`${name}-${pin.version}-`);
  });

  it('refuses a pin its module was not updated to, naming the command that updates it', () => {
    const [name, pin] = pins[0]!;
    expect(() => checkModule(name, { ...pin, version: 'v0.0.1' })).toThrow(
      /requires .* but versions\.json pins v0\.0\.1.*npm run tools -- --update/,
    );
  });
});
