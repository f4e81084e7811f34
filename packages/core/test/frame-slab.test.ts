import { describe, expect, it } from 'vitest';
import { FRAME_HEADROOM, PIPE_HEADROOM, allocFrame, claimHeadroom } from '../src/wire/frame-slab.js';
import { MUX_HEADER_BYTES } from '../src/mux/mux-frame.js';

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

  it('lets the mux claim its header and then the pipe its own in front of it, each once, within the room left', () => {
    expect(FRAME_HEADROOM).toBe(MUX_HEADER_BYTES + PIPE_HEADROOM);
    const before = allocFrame(8).fill(1);
    const frame = allocFrame(300).fill(2);
    const mux = claimHeadroom(frame, MUX_HEADER_BYTES)!;
    mux.fill(5, 0, MUX_HEADER_BYTES);
    expect(claimHeadroom(frame, 1)).toBeUndefined(); // the frame's room is taken by the mux frame's claim
    expect(claimHeadroom(mux, PIPE_HEADROOM + 1)).toBeUndefined(); // more than is left
    const pipe = claimHeadroom(mux, PIPE_HEADROOM)!;
    expect(pipe.length).toBe(FRAME_HEADROOM + 300);
    expect(pipe.byteOffset + FRAME_HEADROOM).toBe(frame.byteOffset);
    pipe.fill(7, 0, PIPE_HEADROOM);
    expect(claimHeadroom(pipe, 1)).toBeUndefined(); // no room left
    expect(claimHeadroom(mux, 1)).toBeUndefined(); // once
    expect([...mux.subarray(0, MUX_HEADER_BYTES)]).toEqual([5, 5, 5, 5, 5]);
    expect(frame.every((byte) => byte === 2)).toBe(true);
    expect(before.every((byte) => byte === 1)).toBe(true);
  });

  it('gives a pipe no room in front of a mux frame that was not the codec’s frame cut last', () => {
    const frame = allocFrame(40);
    const mux = claimHeadroom(frame, MUX_HEADER_BYTES)!;
    allocFrame(40); // a later frame: the room that counts now is in front of it
    expect(claimHeadroom(mux, 4)).toBeUndefined();
  });
});
