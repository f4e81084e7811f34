import { describe, expect, it } from 'vitest';
import { FRAME_HEADROOM, allocFrame, claimHeadroom } from '../src/wire/frame-slab.js';

describe('frame slab headroom', () => {
  it('gives the frame cut last its own room in front, once, and the frame bytes stay as written', () => {
    const first = allocFrame(10).fill(1);
    const second = allocFrame(20).fill(2);
    expect(claimHeadroom(first, 5)).toBeUndefined(); // not the frame cut last
    const framed = claimHeadroom(second, 5)!;
    expect(framed.length).toBe(25);
    expect(framed.buffer).toBe(second.buffer);
    framed.fill(9, 0, 5);
    expect([...framed.subarray(5)]).toEqual(new Array(20).fill(2));
    expect([...first]).toEqual(new Array(10).fill(1)); // the room was the second frame's own, not the first's tail
    expect(claimHeadroom(second, 5)).toBeUndefined(); // once
  });

  it('refuses views of the frame, more room than reserved, and frames of a buffer of their own alike', () => {
    const frame = allocFrame(64);
    expect(claimHeadroom(frame.subarray(0, 32), 5)).toBeUndefined();
    expect(claimHeadroom(frame, FRAME_HEADROOM + 1)).toBeUndefined();
    const large = allocFrame(64 * 1024).fill(3);
    const framed = claimHeadroom(large, 5)!;
    expect(framed.length).toBe(64 * 1024 + 5);
    expect(framed[5]).toBe(3);
  });

  it('never lets a frame’s headroom overlap the frame before it, across slab boundaries', () => {
    const frames: Buffer[] = [];
    for (let i = 0; i < 200; i++) frames.push(allocFrame(1 + ((i * 37) % 600)).fill(i & 0xff));
    const last = frames[frames.length - 1]!;
    claimHeadroom(last, 5)!.fill(0xee, 0, 5);
    frames.forEach((frame, i) => expect(frame.every((byte) => byte === (i & 0xff))).toBe(true));
  });
});
