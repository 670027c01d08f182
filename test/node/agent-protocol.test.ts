import { describe, expect, it } from 'vitest';
import { needsIptables } from '../../node/agent/command.js';
import { decodeRequest, encodeAnswer, encodeRequest, FrameError, MAX_FRAME_BYTES } from '../../node/agent/protocol.js';

describe('the shim ↔ agent frames', () => {
  const request = {
    env: { CNI_COMMAND: 'ADD', CNI_ARGS: 'K8S_POD_NAME=a=b;IgnoreUnknown=1', EMPTY: '' },
    stdin: '{"x":"é"}',
  };

  it('round-trips a request and waits for the rest of a partial one', () => {
    const frame = encodeRequest(request);
    expect(decodeRequest(frame)).toEqual(request);
    for (const cut of [0, 3, 7, 12, frame.length - 1]) expect(decodeRequest(frame.subarray(0, cut))).toBeUndefined();
  });

  it('refuses what no shim sends: another magic, oversize lengths, trailing bytes', () => {
    expect(() => decodeRequest(Buffer.from('HTTP/1.1'))).toThrow(FrameError);
    const huge = Buffer.alloc(8);
    Buffer.from('VLA1').copy(huge);
    huge.writeUInt32LE(MAX_FRAME_BYTES + 1, 4);
    expect(() => decodeRequest(huge)).toThrow(/environment of/);
    expect(() => decodeRequest(Buffer.concat([encodeRequest(request), Buffer.from('x')]))).toThrow(/after/);
  });

  it('encodes the exit code and stdout length the shim reads', () => {
    const answer = encodeAnswer(1, '{"code":11}');
    expect([answer[0], answer.readUInt32LE(1), answer.subarray(5).toString()]).toEqual([1, 11, '{"code":11}']);
  });
});

describe('needsIptables: the calls an agent without iptables leaves to the host plugin', () => {
  const req = (command: string, netconf: unknown) => ({
    env: { CNI_COMMAND: command },
    stdin: JSON.stringify(netconf),
  });
  it('is ADD, DEL and CHECK with the host veth (the default), nothing else', () => {
    for (const command of ['ADD', 'DEL', 'CHECK']) {
      expect(needsIptables(req(command, {}))).toBe(true);
      expect(needsIptables(req(command, { hostVeth: true }))).toBe(true);
      expect(needsIptables(req(command, { hostVeth: false }))).toBe(false);
    }
    for (const command of ['GC', 'STATUS', 'VERSION']) expect(needsIptables(req(command, {}))).toBe(false);
    expect(needsIptables({ env: { CNI_COMMAND: 'ADD' }, stdin: 'not json' })).toBe(false);
  });
});
